"""Model -> JSON schema (what Helm checks the values against), as
cozyvalues-gen writes it for Cozystack's charts, plus the chart's overlay."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from cozyrender.chartdocs.model import MISSING, Entry, Model, TypeRef

# A Kubernetes resource.Quantity in string form (the apimachinery grammar).
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}],
                  "x-kubernetes-int-or-string": True}
_PRIMITIVE_SCHEMA: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "number": {"type": "number"},
    "quantity": {"pattern": QUANTITY_PATTERN, **_INT_OR_STRING},
    "intOrString": dict(_INT_OR_STRING),
    "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "any": {},
}
_JSON_TYPE = {"string": "string", "int": "integer"}
SCHEMA_TITLE = "Chart Values"


def type_schema(model: Model, ref: TypeRef, value: Any = MISSING) -> dict[str, Any]:
    """The schema of one type. `value` is the values.yaml value at this place:
    struct fields take their defaults from it. Rule: containers' element
    schemas carry no defaults (an element has no place in values.yaml)."""
    if ref.form == "pointer":
        assert ref.inner is not None
        return type_schema(model, ref.inner, value)
    if ref.form == "list":
        assert ref.inner is not None
        return {"type": "array", "items": type_schema(model, ref.inner)}
    if ref.form == "map":
        assert ref.inner is not None
        return {"type": "object", "additionalProperties": type_schema(model, ref.inner)}
    if ref.name in _PRIMITIVE_SCHEMA:
        return copy.deepcopy(_PRIMITIVE_SCHEMA[ref.name])
    if ref.name in model.enums:
        enum = model.enums[ref.name]
        return {"type": _JSON_TYPE[enum.base], "enum": list(enum.values)}
    typedef = model.typedefs[ref.name]
    nested = value if isinstance(value, Mapping) else {}
    schema: dict[str, Any] = {"type": "object"}
    required = sorted(f.name for f in typedef.fields if is_required(f))
    if required:
        schema["required"] = required
    if typedef.fields:
        schema["properties"] = {f.name: entry_schema(model, f, nested.get(f.name, MISSING))
                                for f in sorted(typedef.fields, key=lambda f: f.name)}
    return schema


def is_required(entry: Entry) -> bool:
    """Rule (cozyvalues-gen's): a struct field is required unless it is written
    `[name]`, or its type is a pointer, list or map, all of which have a
    natural "unset" (nil, empty)."""
    return not entry.optional and entry.type.form == "name"


def is_struct(model: Model, ref: TypeRef) -> bool:
    while ref.form == "pointer" and ref.inner is not None:
        ref = ref.inner
    return ref.form == "name" and ref.name in model.typedefs


def entry_schema(model: Model, entry: Entry, value: Any) -> dict[str, Any]:
    """The schema of one @param or @field: description, type, default, the rest.
    Rule: the default is the values.yaml value (or the comment's `name=lit`
    when values.yaml has none); a struct's default is `{}`, its fields carry
    their own; a key without a value has no default."""
    body = type_schema(model, entry.type, value)
    out: dict[str, Any] = {}
    if entry.description:
        out["description"] = entry.description
    if "type" in body:
        out["type"] = body.pop("type")
    default = value if value is not MISSING else entry.comment_default
    if default is not MISSING:
        out["default"] = {} if is_struct(model, entry.type) else copy.deepcopy(default)
    out.update(body)
    out.update(copy.deepcopy(entry.extensions))
    return out


def build_schema(model: Model) -> dict[str, Any]:
    """The chart's values schema before the overlay. Rule: top-level params are
    never `required` and unknown top-level keys are not refused (as in
    Cozystack's generated schemas); charts that want more say so in the overlay."""
    return {
        "title": SCHEMA_TITLE,
        "type": "object",
        "properties": {p.name: entry_schema(model, p, model.values.get(p.name, MISSING))
                       for p in model.params},
    }


def deep_merge(base: Any, overlay: Any) -> Any:
    """The overlay merged into the generated schema. Rule: objects merge key by
    key, recursively; anything else in the overlay (lists, scalars) replaces
    what was generated; a null in the overlay deletes the generated key.
    Neither argument is modified."""
    if not isinstance(overlay, Mapping):
        return copy.deepcopy(overlay)
    if not isinstance(base, Mapping):
        base = {}  # an object replacing a non-object is merged into nothing: its nulls delete too
    merged = {k: copy.deepcopy(v) for k, v in base.items()}
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = deep_merge(merged.get(key), value)
    return merged


def dump_schema(schema: Mapping[str, Any]) -> str:
    """values.schema.json's text: two-space JSON, key order kept, a final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
