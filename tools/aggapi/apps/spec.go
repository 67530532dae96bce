package apps

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SpecSchema checks a kind's spec against its JSON schema (the schema cozyrender.appspec
// reads: the tenant chart's values schema, Cozystack's app values schemas with the GPU
// change) with kube-apiserver's own OpenAPI validator of custom resources: types, required
// fields, enums, patterns, bounds, each problem at its path under `spec`. Not checked:
// `x-kubernetes-validations` (CEL rules) and unknown fields (these schemas keep them);
// nothing is defaulted or pruned. A nil SpecSchema checks nothing.
type SpecSchema struct {
	validator validation.SchemaValidator
}

// LoadSpecSchema reads `file` in `dir`; an empty dir means no schema.
func LoadSpecSchema(dir, file string) (*SpecSchema, error) {
	if dir == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	var external apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &external); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&external, &internal, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &SpecSchema{validator}, nil
}

// Validate is the spec's problems, each at its path under `spec`.
func (s *SpecSchema) Validate(value any) field.ErrorList {
	if s == nil {
		return nil
	}
	if value == nil {
		value = map[string]any{}
	}
	return validation.ValidateCustomResource(field.NewPath("spec"), value, s.validator)
}
