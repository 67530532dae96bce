package apps

import (
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI model names of the kinds: the REST-friendly names kube-apiserver gives a
// CRD's kinds, so a client finds them as it finds any other.
func modelName(kind string) string { return "io.cozystack.apps.v1alpha1." + kind }

func (Tenant) OpenAPIModelName() string              { return modelName("Tenant") }
func (TenantList) OpenAPIModelName() string          { return modelName("TenantList") }
func (VMInstance) OpenAPIModelName() string          { return modelName("VMInstance") }
func (VMInstanceList) OpenAPIModelName() string      { return modelName("VMInstanceList") }
func (KubernetesNodes) OpenAPIModelName() string     { return modelName("KubernetesNodes") }
func (KubernetesNodesList) OpenAPIModelName() string { return modelName("KubernetesNodesList") }
func (Kubernetes) OpenAPIModelName() string          { return modelName("Kubernetes") }
func (KubernetesList) OpenAPIModelName() string      { return modelName("KubernetesList") }

// GetOpenAPIDefinitions is the generated definitions of metav1's and apiextensions' types
// (k8s.io/apiextensions-apiserver's, which hold ObjectMeta, ListMeta, Status, JSON ...)
// and, written here, the four kinds: metadata, and `spec` and `status` as any object
// (x-kubernetes-preserve-unknown-fields): the schema of a spec is checked by the server
// (spec.go), not published.
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	definitions := apiextensionsopenapi.GetOpenAPIDefinitions(ref)
	anyObject := spec.Schema{
		SchemaProps:      spec.SchemaProps{Type: []string{"object"}},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
	}
	typeMeta := func(description string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: description}}
	}
	objectMeta, listMeta := metav1.ObjectMeta{}.OpenAPIModelName(), metav1.ListMeta{}.OpenAPIModelName()
	for _, kind := range Kinds {
		item := modelName(kind.Kind)
		definitions[item] = common.OpenAPIDefinition{
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: kind.Kind + " of apps.cozystack.io (cozyrender's stand-in for cozystack-api)",
				Type:        []string{"object"},
				Properties: map[string]spec.Schema{
					"apiVersion": typeMeta("APIVersion of the object"),
					"kind":       typeMeta("Kind of the object"),
					"metadata":   {SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(objectMeta)}},
					"spec":       anyObject,
					"status":     anyObject,
				},
			}},
			Dependencies: []string{objectMeta},
		}
		definitions[modelName(kind.Kind+"List")] = common.OpenAPIDefinition{
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: kind.Kind + "List is a list of " + kind.Kind,
				Type:        []string{"object"},
				Required:    []string{"items"},
				Properties: map[string]spec.Schema{
					"apiVersion": typeMeta("APIVersion of the list"),
					"kind":       typeMeta("Kind of the list"),
					"metadata":   {SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(listMeta)}},
					"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{
						Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(item)}}}}},
				},
			}},
			Dependencies: []string{listMeta, item},
		}
	}
	return definitions
}

// NamerScheme is the scheme the OpenAPI namer reads the kinds' group, version and kind from:
// the served version only (Scheme also holds the internal one, which no client may see).
func NamerScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, kind := range Kinds {
		scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(kind.Kind), kind.New())
		scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(kind.Kind+"List"), kind.NewList())
	}
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return scheme
}
