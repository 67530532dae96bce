"""The structural schema as JSON Schema, and failures in the API server's
words. Pure functions over dicts, no I/O."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import jsonschema

from cozyrender.kube.shape import join as join_path

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
