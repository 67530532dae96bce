"""Pruning as the API server prunes a custom resource (see the package
docstring and the rules below). Pure functions over dicts, no I/O."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from cozyrender.kube.shape import join as join_path

# ObjectMeta fields a client may send; the API server drops everything else
# under metadata when it decodes the object.
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
})
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


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


def additional_of(schema: Mapping) -> tuple[bool, Mapping | None]:
    """(declared, schema): `additionalProperties` as a schema, or declared
    without one (a boolean)."""
    additional = schema.get("additionalProperties")
    if additional is None:
        return False, None
    return True, additional if isinstance(additional, Mapping) else None


def _prune(value, schema: Mapping | None, path: str, pruned: list[str], keep_unknown: bool = False) -> None:
    """Drop the fields `schema` does not declare. Below
    x-kubernetes-preserve-unknown-fields (`keep_unknown`, carried into list
    items) unknown fields stay, but pruning goes on inside the declared ones."""
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        keep_unknown = True
    if isinstance(value, dict):
        if schema is None:
            if not keep_unknown:
                for key in list(value):
                    pruned.append(join_path(path, key))
                    del value[key]
            return
        properties = schema.get("properties") or {}
        has_additional, additional = additional_of(schema)
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            if embedded and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(value[key], properties[key], join_path(path, key), pruned)
            elif has_additional:
                _prune(value[key], additional, join_path(path, key), pruned)
            elif not keep_unknown:
                if key not in _META_FIELDS or path:
                    pruned.append(join_path(path, key))
                del value[key]
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        for index, item in enumerate(value):
            _prune(item, items if isinstance(items, Mapping) else None, join_path(path, index), pruned, keep_unknown)


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
        _, additional = additional_of(schema)
        for key, child in value.items():
            sub = properties.get(key, additional)
            _coerce_metadata(child, sub if isinstance(sub, Mapping) else None, join_path(path, key), pruned)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            _coerce_metadata(item, items if isinstance(items, Mapping) else None, join_path(path, index), pruned)
