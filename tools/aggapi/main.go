// Command cozystack-apps-apiserver is cozyrender's stand-in for cozystack-api: an aggregated
// API server on k8s.io/apiserver v0.35.4 serving apps.cozystack.io/v1alpha1 (Tenant,
// VMInstance, KubernetesNodes, Kubernetes; namespaced), registered with kube-apiserver by an
// APIService, so that the writes of these kinds reach cozyrender's webhook from the caller
// they have on Cozystack.
//
// Rule: each kind is kept in etcd by the generic registry (its own --etcd-prefix), its spec
// checked against the kind's schema (--app-schemas, apps/spec.go); authentication and
// authorization are delegated to kube-apiserver (the front proxy's request headers, token
// and subject access reviews); every write goes through the generic admission chain
// (NamespaceLifecycle, the mutating and validating webhooks, ValidatingAdmissionPolicy),
// configured by its own --admission-control-config-file: a WebhookAdmissionConfiguration's
// kubeConfigFile is how it presents a client certificate to a webhook. What cozystack-api
// does beyond that (a HelmRelease per application, its status read back, quota checks of its
// own) this server does not do.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/logs"
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"cozyrender.local/aggapi/apps"
)

type options struct {
	recommended *genericoptions.RecommendedOptions
	// appSchemas is the folder of the kinds' spec schemas (<kind>.json); empty: none checked.
	appSchemas string
	// endpointRouting resolves a webhook's Service to its endpoints (no cluster DNS here).
	endpointRouting bool
}

func newOptions() *options {
	o := &options{recommended: genericoptions.NewRecommendedOptions("/cozystack-apps-apiserver",
		apps.Codecs.LegacyCodec(apps.SchemeGroupVersion))}
	o.recommended.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		apps.SchemeGroupVersion, schema.GroupKind{Group: apps.GroupName})
	return o
}

func (o *options) addFlags(flags *pflag.FlagSet) {
	o.recommended.AddFlags(flags)
	flags.StringVar(&o.appSchemas, "app-schemas", "",
		"folder of the kinds' spec schemas (tenant.json, vminstance.json, kubernetesnodes.json, kubernetes.json)")
	flags.BoolVar(&o.endpointRouting, "webhook-endpoint-routing", false,
		"call a Service-referenced webhook at a ready endpoint's address instead of <name>.<namespace>.svc")
}

func (o *options) config() (*genericapiserver.RecommendedConfig, error) {
	if o.endpointRouting {
		o.recommended.ExtraAdmissionInitializers = func(c *genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
			return []admission.PluginInitializer{
				webhookinit.NewPluginInitializer(nil, newEndpointResolver(c.SharedInformerFactory)),
			}, nil
		}
	}
	config := genericapiserver.NewRecommendedConfig(apps.Codecs)
	namer := openapi.NewDefinitionNamer(apps.NamerScheme())
	config.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(apps.GetOpenAPIDefinitions, namer)
	config.OpenAPIConfig.Info.Title, config.OpenAPIConfig.Info.Version = "apps.cozystack.io (cozyrender stand-in)", "v1alpha1"
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(apps.GetOpenAPIDefinitions, namer)
	config.OpenAPIV3Config.Info.Title, config.OpenAPIV3Config.Info.Version = config.OpenAPIConfig.Info.Title, "v1alpha1"
	config.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	if err := o.recommended.ApplyTo(config); err != nil {
		return nil, err
	}
	return config, nil
}

func (o *options) run(ctx context.Context) error {
	config, err := o.config()
	if err != nil {
		return err
	}
	server, err := config.Complete().New("cozystack-apps-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(apps.GroupName, apps.Scheme, metav1.ParameterCodec, apps.Codecs)
	storage := map[string]rest.Storage{}
	for _, kind := range apps.Kinds {
		schema, err := apps.LoadSpecSchema(o.appSchemas, kind.SchemaFile)
		if err != nil {
			return fmt.Errorf("the %s schema: %w", kind.Kind, err)
		}
		store, err := apps.NewStore(kind, schema, config.RESTOptionsGetter)
		if err != nil {
			return fmt.Errorf("the %s storage: %w", kind.Kind, err)
		}
		storage[kind.Plural] = store
	}
	group.VersionedResourcesStorageMap[apps.SchemeGroupVersion.Version] = storage
	if err := server.InstallAPIGroup(&group); err != nil {
		return err
	}
	return server.PrepareRun().RunWithContext(ctx)
}

func main() {
	o := newOptions()
	flags := pflag.NewFlagSet("cozystack-apps-apiserver", pflag.ContinueOnError)
	o.addFlags(flags)
	logs.AddFlags(flags)
	flags.SetOutput(io.Discard) // a bad flag is one line, not the usage of every flag
	if err := flags.Parse(os.Args[1:]); errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(os.Stdout, "Usage of cozystack-apps-apiserver:\n%s", flags.FlagUsages())
		os.Exit(0)
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "cozystack-apps-apiserver: error: %v\n", err)
		os.Exit(2)
	}
	if errs := o.recommended.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "cozystack-apps-apiserver: error: %v\n", err)
		}
		os.Exit(2)
	}
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := o.run(genericapiserver.SetupSignalContext()); err != nil {
		klog.ErrorS(err, "cozystack-apps-apiserver stopped")
		os.Exit(1)
	}
}
