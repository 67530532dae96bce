// Package apps holds the apps.cozystack.io/v1alpha1 kinds the stand-in serves (Tenant,
// VMInstance, KubernetesNodes, Kubernetes), their scheme, storage strategy, spec validation
// and OpenAPI definitions.
//
// Rule: like cozystack-api's Application, every kind is ObjectMeta plus a `spec` (and a
// `status`) held as JSON as written (apiextensions JSON): the server never prunes or
// re-orders a field of the spec, so the admission chain sees exactly what the client wrote.
// The four kinds are four Go types with one shape, because a scheme gives each Go type one
// kind.
package apps

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served.
const GroupName = "apps.cozystack.io"

// SchemeGroupVersion is the one served version; internalVersion is the hub the generic
// server converts through (the same Go types: no conversion is ever needed).
var (
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	internalVersion    = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}
)

// Body is the shape every kind shares.
type Body struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   *apiextensionsv1.JSON `json:"spec,omitempty"`
	Status *apiextensionsv1.JSON `json:"status,omitempty"`
}

func (in *Body) deepCopyInto(out *Body) {
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec.DeepCopy()
	out.Status = in.Status.DeepCopy()
}

// The served kinds: each a Body, each with its list.

type Tenant struct {
	Body `json:",inline"`
}
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}
type VMInstance struct {
	Body `json:",inline"`
}
type VMInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMInstance `json:"items"`
}
type KubernetesNodes struct {
	Body `json:",inline"`
}
type KubernetesNodesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubernetesNodes `json:"items"`
}
type Kubernetes struct {
	Body `json:",inline"`
}
type KubernetesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Kubernetes `json:"items"`
}

func (in *Tenant) DeepCopyObject() runtime.Object {
	out := &Tenant{}
	in.deepCopyInto(&out.Body)
	return out
}
func (in *VMInstance) DeepCopyObject() runtime.Object {
	out := &VMInstance{}
	in.deepCopyInto(&out.Body)
	return out
}
func (in *KubernetesNodes) DeepCopyObject() runtime.Object {
	out := &KubernetesNodes{}
	in.deepCopyInto(&out.Body)
	return out
}
func (in *Kubernetes) DeepCopyObject() runtime.Object {
	out := &Kubernetes{}
	in.deepCopyInto(&out.Body)
	return out
}

func copyList[T any](in []T, copyItem func(*T, *T)) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		copyItem(&in[i], &out[i])
	}
	return out
}

func (in *TenantList) DeepCopyObject() runtime.Object {
	out := &TenantList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyList(in.Items, func(a, b *Tenant) { a.deepCopyInto(&b.Body) })
	return out
}
func (in *VMInstanceList) DeepCopyObject() runtime.Object {
	out := &VMInstanceList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyList(in.Items, func(a, b *VMInstance) { a.deepCopyInto(&b.Body) })
	return out
}
func (in *KubernetesNodesList) DeepCopyObject() runtime.Object {
	out := &KubernetesNodesList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyList(in.Items, func(a, b *KubernetesNodes) { a.deepCopyInto(&b.Body) })
	return out
}
func (in *KubernetesList) DeepCopyObject() runtime.Object {
	out := &KubernetesList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyList(in.Items, func(a, b *Kubernetes) { a.deepCopyInto(&b.Body) })
	return out
}

// Kind is one served kind: its names and how to make an empty object and list.
type Kind struct {
	Kind, Plural, Singular string
	New, NewList           func() runtime.Object
	// SchemaFile is the spec schema's file name in --app-schemas (cozyrender.appspec's schema).
	SchemaFile string
}

// Kinds are the four kinds, with Cozystack's plurals (packages/system/*-rd/cozyrds at 3c780acd).
var Kinds = []Kind{
	{"Tenant", "tenants", "tenant", func() runtime.Object { return &Tenant{} },
		func() runtime.Object { return &TenantList{} }, "tenant.json"},
	{"VMInstance", "vminstances", "vminstance", func() runtime.Object { return &VMInstance{} },
		func() runtime.Object { return &VMInstanceList{} }, "vminstance.json"},
	{"KubernetesNodes", "kubernetesnodeses", "kubernetesnodes", func() runtime.Object { return &KubernetesNodes{} },
		func() runtime.Object { return &KubernetesNodesList{} }, "kubernetesnodes.json"},
	{"Kubernetes", "kuberneteses", "kubernetes", func() runtime.Object { return &Kubernetes{} },
		func() runtime.Object { return &KubernetesList{} }, "kubernetes.json"},
}
