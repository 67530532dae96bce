// cozyrender-cert-manager-cainjector: cert-manager v1.21's CA injector, run from the
// github.com/cert-manager/cert-manager library module (the proxy does not serve the upstream
// command module github.com/cert-manager/cert-manager/cmd/cainjector). It writes the CA of a
// Certificate's Secret into the caBundle of webhook configurations (and CRDs, APIServices)
// annotated with cert-manager.io/inject-ca-from.
package main

import (
	"flag"
	"fmt"
	"os"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-cainjector: error: %v\n", err)
	os.Exit(code)
}

func main() {
	// --kubeconfig is controller-runtime's own flag (empty: the pod's service account).
	namespace := flag.String("namespace", "", "inject only into objects of this namespace; empty: all")
	healthAddr := flag.String("health-address", ":9404", "address of /healthz and /readyz (\"0\": off)")
	klog.InitFlags(nil)
	flag.Parse()
	if flag.NArg() != 0 {
		fail(2, fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	ctrl.SetLogger(klog.NewKlogr())

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(2, err)
	}
	// "cert-manager-cainjector/...": its prefix is the field manager of what it applies.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	if err := kscheme.AddToScheme(scheme); err != nil {
		fail(1, err)
	}
	// The kinds it injects into: webhook configurations (client-go's scheme), CRDs and APIServices.
	for _, add := range []func(*runtime.Scheme) error{cmscheme.AddToScheme, apiextensionsv1.AddToScheme,
		apiregistrationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fail(1, err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		LeaderElection:         false, // one replica; nothing to elect
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: *healthAddr,
		// Secrets are read straight from the API server: the injector caches only their
		// metadata (it watches them with OnlyMetadata), never every Secret's data.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		fail(1, err)
	}
	_ = mgr.AddHealthzCheck("ping", healthz.Ping)
	_ = mgr.AddReadyzCheck("ping", healthz.Ping)
	ctx := ctrl.SetupSignalHandler()
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    *namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		fail(1, err)
	}
	if err := mgr.Start(ctx); err != nil {
		fail(1, err)
	}
}
