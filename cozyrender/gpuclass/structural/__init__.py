"""The API server's steps for a custom resource under a structural schema, before
CEL: prune unknown fields, apply defaults, validate the OpenAPI v3 schema.

The schema is translated to JSON Schema for `jsonschema`: descriptions and the
`x-kubernetes-*` extensions are annotations there (the ones with a meaning,
`x-kubernetes-int-or-string` and `x-kubernetes-preserve-unknown-fields`, are
already expressed by `anyOf` and by pruning), `nullable` adds `null` to the
type, and the integer formats become their bounds. Failures carry the field
path in Kubernetes' spelling (`spec.tolerations[0].operator`) and messages in
the API server's words (Required value, Unsupported value, ...).

Pure functions over dicts, no I/O.
"""

from cozyrender.gpuclass.structural.default import apply_defaults
from cozyrender.gpuclass.structural.prune import OBJECT_META_FIELDS, prune, prune_resource, prune_value
from cozyrender.gpuclass.structural.schema import BLOCKING_VALIDATORS, FieldError, SchemaValidator, to_json_schema

__all__ = [
    "BLOCKING_VALIDATORS", "OBJECT_META_FIELDS", "FieldError", "SchemaValidator", "apply_defaults", "prune",
    "prune_resource", "prune_value", "to_json_schema",
]
