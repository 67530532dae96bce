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

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import jsonschema

from cozyrender.kube.shape import join as join_path

# ObjectMeta fields a client may send; the API server drops everything else
# under metadata when it decodes the object.
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
})
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_ANNOTATION_KEYS = {"description", "example", "externalDocs", "title"}
# Failures that stop the API server from running CEL rules at all (a rule
# would see a value of the wrong type).
BLOCKING_VALIDATORS = frozenset({"type", "enum", "anyOf"})


@dataclass(frozen=True, order=True)
class FieldError:
    """One failure: where, and why (as the API server words it)."""

    path: str
    message: str
    blocking: bool = False

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


# -- pruning -----------------------------------------------------------------
# As the API server prunes (apiextensions-apiserver pkg/apiserver/schema/pruning,
# v0.35.7), then coerces ObjectMeta (pkg/apiserver/schema/objectmeta):
#
# * a field the schema does not declare is dropped; under
#   `x-kubernetes-preserve-unknown-fields` nothing is dropped at that level,
#   but pruning continues inside the properties it does declare;
# * a map value with no schema at all (items or additionalProperties absent
#   below a pruning node, or `additionalProperties: true`) loses every field;
# * at the resource root and at every `x-kubernetes-embedded-resource`,
#   apiVersion, kind and metadata are kept whatever the schema says, and
#   metadata keeps only ObjectMeta's fields (the API server decodes it as
#   ObjectMeta; fields nested inside ObjectMeta's own fields are not checked
#   here).

_META_FIELDS = frozenset(_ROOT_FIELDS)


def prune(obj: Mapping, schema: Mapping) -> tuple[dict, list[str]]:
    """A copy of a custom resource as the API server stores it: pruned, and
    metadata reduced to ObjectMeta at the root and at embedded resources;
    with the paths of the fields dropped."""
    result, pruned_paths = prune_resource(obj, schema)
    _coerce_metadata(result, {**schema, "x-kubernetes-embedded-resource": True}, "", pruned_paths)
    return result, sorted(pruned_paths)


def prune_resource(obj: Mapping, schema: Mapping) -> tuple[dict, list[str]]:
    """The pruning step alone on a copy of a resource root (upstream
    PruneWithOptions with isResourceRoot): apiVersion, kind and metadata
    are kept, metadata untouched."""
    pruned_paths: list[str] = []
    result = copy.deepcopy(dict(obj))
    prune_value(result, {**schema, "x-kubernetes-embedded-resource": True}, pruned_paths)
    return result, sorted(pruned_paths)


def prune_value(value, schema: Mapping | None, pruned: list[str], path: str = ""):
    """Prune `value` in place under `schema` (None: no schema), recording
    the dropped paths; the upstream algorithm, with no root special case."""
    _prune(value, schema, path, pruned)
    return value


def _additional(schema: Mapping) -> tuple[bool, Mapping | None]:
    """(declared, schema): `additionalProperties` as a schema, or declared
    without one (a boolean)."""
    additional = schema.get("additionalProperties")
    if additional is None:
        return False, None
    return True, additional if isinstance(additional, Mapping) else None


def _prune(value, schema: Mapping | None, path: str, pruned: list[str]) -> None:
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema, path, pruned)
        return
    if isinstance(value, dict):
        if schema is None:
            for key in list(value):
                pruned.append(join_path(path, key))
                del value[key]
            return
        properties = schema.get("properties") or {}
        has_additional, additional = _additional(schema)
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            if embedded and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(value[key], properties[key], join_path(path, key), pruned)
            elif has_additional:
                _prune(value[key], additional, join_path(path, key), pruned)
            else:
                if key not in _META_FIELDS or path:
                    pruned.append(join_path(path, key))
                del value[key]
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        for index, item in enumerate(value):
            _prune(item, items if isinstance(items, Mapping) else None, join_path(path, index), pruned)


def _skip_prune(value, schema: Mapping | None, path: str, pruned: list[str]) -> None:
    """Below preserve-unknown-fields: keep unknown fields, prune inside the
    declared ones."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        has_additional, additional = _additional(schema)
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            if embedded and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(value[key], properties[key], join_path(path, key), pruned)
            elif has_additional:
                _prune(value[key], additional, join_path(path, key), pruned)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            _skip_prune(item, items if isinstance(items, Mapping) else None, join_path(path, index), pruned)


def _coerce_metadata(value, schema: Mapping | None, path: str, pruned: list[str]) -> None:
    """At each embedded resource, metadata keeps only ObjectMeta's fields."""
    if schema is None:
        return
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource") and isinstance(value.get("metadata"), dict):
            metadata = value["metadata"]
            for key in sorted(set(metadata) - OBJECT_META_FIELDS):
                del metadata[key]
                pruned.append(join_path(join_path(path, "metadata"), key))
        properties = schema.get("properties") or {}
        _, additional = _additional(schema)
        for key, child in value.items():
            sub = properties.get(key, additional)
            _coerce_metadata(child, sub if isinstance(sub, Mapping) else None, join_path(path, key), pruned)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            _coerce_metadata(item, items if isinstance(items, Mapping) else None, join_path(path, index), pruned)


# -- defaulting ----------------------------------------------------------------
# As the API server defaults (pkg/apiserver/schema/defaulting, v0.35.7): an
# absent property with a `default` gets it, and so does one that is null
# while the property is not nullable; a null map value or list item that is
# not nullable takes the value schema's default (null when it has none);
# then every value is defaulted below, top down (a default object is itself
# defaulted).

def apply_defaults(obj, schema: Mapping | None):
    """Default `obj` in place under `schema` and return it."""
    _default_value(obj, schema)
    return obj


def _non_nullable_null(value, schema: Mapping | None) -> bool:
    return value is None and schema is not None and not schema.get("nullable")


def _default_value(value, schema: Mapping | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if sub.get("default") is None:
                continue
            if key not in value or _non_nullable_null(value[key], sub):
                value[key] = copy.deepcopy(sub["default"])
        has_additional, additional = _additional(schema)
        for key in list(value):
            if key in properties:
                _default_value(value[key], properties[key])
            elif has_additional:
                if _non_nullable_null(value[key], additional):
                    value[key] = copy.deepcopy(additional.get("default"))
                _default_value(value[key], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        items = items if isinstance(items, Mapping) else None
        for index in range(len(value)):
            if _non_nullable_null(value[index], items):
                value[index] = copy.deepcopy(items.get("default"))
            _default_value(value[index], items)


# -- schema validation -----------------------------------------------------------

def to_json_schema(schema: Mapping) -> dict:
    """The OpenAPI v3 structural schema as JSON Schema (draft 2020-12)."""
    translated: dict = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in _ANNOTATION_KEYS or key == "nullable":
            continue
        if key == "properties":
            translated[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            translated[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            translated[key] = [to_json_schema(sub) for sub in value]
        elif key == "format":
            bounds = _INT_BOUNDS.get(value)
            if bounds:
                translated.setdefault("minimum", bounds[0])
                translated.setdefault("maximum", bounds[1])
        else:
            translated[key] = copy.deepcopy(value)
    if schema.get("nullable") and "type" in translated:
        translated["type"] = [translated["type"], "null"]
    return translated


class SchemaValidator:
    """A compiled JSON Schema for one structural schema (built once, reused)."""

    def __init__(self, schema: Mapping) -> None:
        json_schema = to_json_schema(schema)
        jsonschema.Draft202012Validator.check_schema(json_schema)
        self._validator = jsonschema.Draft202012Validator(json_schema)

    def errors(self, obj: Mapping) -> list[FieldError]:
        return sorted(set(_field_errors(self._validator.iter_errors(obj))))


def _field_errors(errors) -> Iterator[FieldError]:
    for error in errors:
        path = ""
        for step in error.absolute_path:
            path = join_path(path, step)
        if error.validator == "required":
            # One error per required keyword: name every missing field.
            for name in error.validator_value:
                if isinstance(error.instance, Mapping) and name not in error.instance:
                    yield FieldError(join_path(path, name), "Required value")
            continue
        yield _describe(error, path)


def _quote(value: object) -> str:
    return json.dumps(value)


def _describe(error: jsonschema.ValidationError, path: str) -> FieldError:
    kind, value, expected = error.validator, error.instance, error.validator_value
    blocking = kind in BLOCKING_VALIDATORS
    if kind == "enum":
        supported = ", ".join(_quote(v) for v in expected)
        return FieldError(path, f"Unsupported value: {_quote(value)}: supported values: {supported}", blocking)
    if kind == "type":
        wanted = expected if isinstance(expected, str) else " or ".join(expected)
        return FieldError(path, f"Invalid value: {_quote(_json_type(value))}: must be of type {wanted}", blocking)
    if kind == "anyOf":
        wanted = " or ".join(sub.get("type", "?") for sub in expected)
        return FieldError(path, f"Invalid value: {_quote(_json_type(value))}: must be of type {wanted}", blocking)
    if kind == "maxLength":
        return FieldError(path, f"Too long: may not be more than {expected} bytes")
    if kind == "minLength":
        return FieldError(path, f"Invalid value: {_quote(value)}: should be at least {expected} chars long")
    if kind == "maxItems":
        return FieldError(path, f"Too many: {len(value)}: must have at most {expected} items")
    if kind == "pattern":
        return FieldError(path, f"Invalid value: {_quote(value)}: should match {_quote(expected)}")
    if kind in ("minimum", "maximum"):
        relation = "greater" if kind == "minimum" else "less"
        return FieldError(path, f"Invalid value: {value}: should be {relation} than or equal to {expected}")
    return FieldError(path, f"Invalid value: {error.message}")


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null"
