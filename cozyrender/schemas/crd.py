"""A CRD version's openAPIV3Schema as a JSON schema that validates objects the
way the API server's structural-schema checks do, for offline validation."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# keywords whose value is one schema, a list of schemas, or a map of schemas
_ONE = ("items", "additionalProperties", "not")
_LIST = ("allOf", "anyOf", "oneOf")
_MAP = ("properties", "patternProperties", "definitions", "$defs")


def _children(node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(keyword, sub-schema) pairs directly under a schema node."""
    out: list[tuple[str, dict[str, Any]]] = []
    for key in _ONE:
        if isinstance(node.get(key), dict):
            out.append((key, node[key]))
    for key in _LIST:
        for sub in node.get(key) or []:
            if isinstance(sub, dict):
                out.append((key, sub))
    for key in _MAP:
        for sub in (node.get(key) or {}).values():
            if isinstance(sub, dict):
                out.append((key, sub))
    return out


def strip_descriptions(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema without `description` keywords (property *names* called
    `description` stay): they are half of a CRD's size and validate nothing."""
    node = {k: v for k, v in copy.deepcopy(dict(schema)).items() if k != "description"}
    for key in _ONE:
        if isinstance(node.get(key), dict):
            node[key] = strip_descriptions(node[key])
    for key in _LIST:
        if isinstance(node.get(key), list):
            node[key] = [strip_descriptions(s) if isinstance(s, dict) else s for s in node[key]]
    for key in _MAP:
        if isinstance(node.get(key), dict):
            node[key] = {k: strip_descriptions(s) if isinstance(s, dict) else s
                         for k, s in node[key].items()}
    return node


def to_json_schema(schema: Mapping[str, Any], strict: bool = True,
                   object_meta_ref: str | None = None) -> dict[str, Any]:
    """A structural openAPIV3Schema as a JSON schema.

    Rules, as the API server applies them:
    - `nullable: true` admits null besides the declared type;
    - strict: a field the schema does not declare is an error (the server
      prunes it, `kubectl --validate=strict` refuses it), so every object node
      of the structural part (reached through properties, items,
      additionalProperties) that declares properties, has no
      additionalProperties and does not preserve unknown fields gets
      `additionalProperties: false`; anyOf/oneOf/allOf/not branches only
      constrain values and are left alone;
    - the root's `metadata` is an ObjectMeta (`object_meta_ref`, when given)."""
    root = copy.deepcopy(dict(schema))

    def walk(node: dict[str, Any], structural: bool) -> None:
        if node.get("nullable") is True:
            node.pop("nullable")
            kind = node.get("type")
            if isinstance(kind, str):
                node["type"] = [kind, "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
        if (strict and structural and isinstance(node.get("properties"), dict)
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for key, sub in _children(node):
            walk(sub, structural and key in ("items", "additionalProperties", "properties"))

    walk(root, True)
    if object_meta_ref and isinstance(root.get("properties"), dict):
        root["properties"]["metadata"] = {"$ref": object_meta_ref}
    return root


def served_schema(crd: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The openAPIV3Schema of one served version of a CRD object."""
    for entry in crd.get("spec", {}).get("versions") or []:
        if entry.get("name") == version:
            if not entry.get("served", False):
                raise ValueError(f"{crd['metadata']['name']} does not serve {version}")
            return dict(entry["schema"]["openAPIV3Schema"])
    raise ValueError(f"{crd.get('metadata', {}).get('name')} has no version {version}")
