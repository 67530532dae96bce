package apps

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
)

// strategy is the create, update and delete rules of one kind: namespaced, names as a
// Kubernetes object's (DNS-1123 subdomain), the spec checked against the kind's schema
// (none: not checked), everything else kept as written.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	spec *SpecSchema
}

func (strategy) NamespaceScoped() bool                                            { return true }
func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (strategy) AllowCreateOnUpdate() bool                                        { return false }
func (strategy) AllowUnconditionalUpdate() bool                                   { return false }
func (strategy) Canonicalize(runtime.Object)                                      {}
func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string        { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (s strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(accessor, true,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, s.spec.Validate(specOf(obj))...)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	newMeta, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(newMeta, oldMeta, field.NewPath("metadata"))
	return append(errs, s.spec.Validate(specOf(obj))...)
}

// specOf is the object's spec as decoded JSON (nil when absent).
func specOf(obj runtime.Object) any {
	type bodied interface{ body() *Body }
	b := obj.(bodied).body()
	if b.Spec == nil || len(b.Spec.Raw) == 0 {
		return nil
	}
	var value any
	if err := json.Unmarshal(b.Spec.Raw, &value); err != nil {
		return fmt.Sprintf("unreadable spec: %v", err)
	}
	return value
}

func (in *Body) body() *Body { return in }

// getAttrs is what a label or field selector matches: the labels, the name and namespace.
func getAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return accessor.GetLabels(), fields.Set{
		"metadata.name": accessor.GetName(), "metadata.namespace": accessor.GetNamespace(),
	}, nil
}

// NewStore is the etcd-backed generic registry storage of one kind.
func NewStore(kind Kind, spec *SpecSchema, options generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	s := strategy{ObjectTyper: Scheme, NameGenerator: names.SimpleNameGenerator, spec: spec}
	resource := SchemeGroupVersion.WithResource(kind.Plural).GroupResource()
	store := &genericregistry.Store{
		NewFunc:     kind.New,
		NewListFunc: kind.NewList,
		PredicateFunc: func(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: getAttrs}
		},
		DefaultQualifiedResource:  resource,
		SingularQualifiedResource: SchemeGroupVersion.WithResource(kind.Singular).GroupResource(),
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		TableConvertor:            rest.NewDefaultTableConvertor(resource),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: options, AttrFunc: getAttrs}); err != nil {
		return nil, err
	}
	return store, nil
}
