package apps

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Scheme and Codecs of the server: the four kinds in v1alpha1 and in the internal version
// (the same Go types), metav1's options and the unversioned types every server answers with.
var (
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	for _, kind := range Kinds {
		for _, version := range []schema.GroupVersion{SchemeGroupVersion, internalVersion} {
			Scheme.AddKnownTypeWithName(version.WithKind(kind.Kind), kind.New())
			Scheme.AddKnownTypeWithName(version.WithKind(kind.Kind+"List"), kind.NewList())
		}
		// A field selector may name the object's name and namespace, nothing else.
		if err := Scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind.Kind),
			func(label, value string) (string, string, error) {
				switch label {
				case "metadata.name", "metadata.namespace":
					return label, value, nil
				}
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(Scheme, SchemeGroupVersion)
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	if err := Scheme.SetVersionPriority(SchemeGroupVersion); err != nil {
		panic(err)
	}
}
