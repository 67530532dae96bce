"""Defaulting as the API server defaults a custom resource. Pure functions
over dicts, no I/O."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from cozyrender.gpuclass.structural.prune import additional_of

# -- defaulting ----------------------------------------------------------------
# As the API server defaults (pkg/apiserver/schema/defaulting, v0.35.7): an
# absent property with a `default` gets it, and so does one that is null
# while the property is not nullable; a null map value or list item that is
# not nullable takes the value schema's default (null when it has none);
# then every value is defaulted below, top down (a default object is itself
# defaulted).

def apply_defaults(obj, schema: Mapping | None):
    """Default `obj` in place under `schema` and return it. Nulls the schema
    does not allow and cannot default are dropped first, as the API server
    drops them before defaulting (`profile: null` is then absent, not a
    string of the wrong type)."""
    _drop_disallowed_nulls(obj, schema)
    _default_value(obj, schema)
    return obj


def _drop_disallowed_nulls(value, schema: Mapping | None) -> None:
    """Remove every object field whose value is null while its schema is not
    nullable and has no default; recurse into every value below."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        has_additional, additional = additional_of(schema)
        for key in list(value):
            sub = properties.get(key, additional if has_additional else None)
            if sub is None:
                continue
            if _non_nullable_null(value[key], sub) and sub.get("default") is None:
                del value[key]
            else:
                _drop_disallowed_nulls(value[key], sub)
    elif isinstance(value, list):
        items = schema.get("items")
        for item in value:
            _drop_disallowed_nulls(item, items if isinstance(items, Mapping) else None)


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
        has_additional, additional = additional_of(schema)
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
