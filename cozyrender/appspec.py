"""The apps' spec schemas, checked as the API server checks a write under
strict field validation (kubectl's default): an unknown field is refused,
named, with the known field it is nearest to; a value of the wrong type is
refused, named, with the type wanted.

Rule: one schema per kind `check` and the webhook read, the schema of the
app's values at Cozystack 3c780acd with the GPU change (a `spec.gpus` entry
takes `class` and `count` beside `name`):

- Tenant: the `tenant` chart's own values.schema.json (charts/tenant), less
  the values the platform passes (`_cluster`, `_namespace`);
- VMInstance, KubernetesNodes, Kubernetes: Cozystack's vm-instance,
  kubernetes-nodes and kubernetes values schemas (cozyrender/schemas/apps/,
  descriptions stripped; see cozyrender/schemas/README.md).

A schema node marked `x-kubernetes-preserve-unknown-fields` keeps unknown
fields, except one within two edits of a declared field (its typo).

Only what decides a field's place and type is read: `properties`,
`additionalProperties`, `items`, `type`, `anyOf` of types (int-or-string),
`x-kubernetes-preserve-unknown-fields`. Patterns, enums, bounds and required
fields are the charts' and the rules' business. The stand-in CRDs of the test
cluster (tools/controlplane/crds/apps-cozystack-io-standins.yaml) keep `spec`
as written, so this schema, through the webhook, is the one that applies
there, whatever field validation a client asks for.

Pure functions; the schemas are read once from package data.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

from cozyrender.nearmiss import closest

SCHEMAS = Path(__file__).resolve().parent / "schemas" / "apps"
PLATFORM_VALUES = ("_cluster", "_namespace")  # passed by the platform, never written in a Tenant
KINDS = ("Tenant", "VMInstance", "KubernetesNodes", "Kubernetes")
NEAR_EDITS = 2
GPU_ENTRY = {"type": "object", "properties": {
    "name": {"type": "string"}, "class": {"type": "string"}, "count": {"type": "integer"}}}


@cache
def spec_schema(kind: str) -> dict:
    """The schema of `spec` for one of KINDS."""
    if kind == "Tenant":
        from cozyrender.resources import chart_path

        schema = json.loads((chart_path("tenant") / "values.schema.json").read_text(encoding="utf-8"))
        for name in PLATFORM_VALUES:
            schema.get("properties", {}).pop(name, None)
        return schema
    schema = json.loads((SCHEMAS / f"{kind.lower()}.json").read_text(encoding="utf-8"))
    if kind in ("VMInstance", "KubernetesNodes"):
        schema["properties"]["gpus"]["items"] = copy.deepcopy(GPU_ENTRY)
    elif kind == "Kubernetes":
        group = schema["properties"]["nodeGroups"]["additionalProperties"]
        group["properties"]["gpus"]["items"] = copy.deepcopy(GPU_ENTRY)
    return schema


def spec_problems(obj: Mapping) -> Iterator[tuple[str, str]]:
    """(field, message) for each field of `obj`'s spec its kind's schema
    refuses, in document order; nothing for a kind not in KINDS or a spec
    that is absent (the rules say what a missing spec means)."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind not in KINDS or spec is None:
        return
    yield from _walk(spec, spec_schema(kind), "spec")


# Objects are plain JSON (dicts and lists): exact types, not the ABCs (the
# walk runs on every admission).
_JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _type_of(value: object) -> str:
    if value is None:
        return "null"
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
    return "object" if isinstance(value, dict) else type(value).__name__


def _fits(value: object, wanted: str) -> bool:
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and value.is_integer())
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    kind = _JSON_TYPES.get(wanted)
    return kind is None or isinstance(value, kind)


def _wanted_types(schema: Mapping) -> list[str]:
    if "type" in schema:
        return [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
    options = [option.get("type") for option in schema.get("anyOf", ()) if isinstance(option, dict)]
    return [t for t in options if isinstance(t, str)]


def unknown_values(values: Mapping, schema: Mapping) -> Iterator[tuple[str, str]]:
    """(path, message) for each key of a chart's `values` that its values
    schema does not know (`template`, `flux`: Helm renders them silently), with
    the known key nearest; types are Helm's own check."""
    for path, message in _walk(dict(values), schema, "", types=False):
        yield path.lstrip("."), message.replace("did you mean .", "did you mean ")


def _walk(value: object, schema: Mapping, path: str, types: bool = True) -> Iterator[tuple[str, str]]:
    if value is None:
        return  # null: Kubernetes drops it (a nullable field, or one the defaults fill)
    wanted = _wanted_types(schema)
    if not types and wanted and not any(_fits(value, t) for t in wanted):
        return
    if wanted and not any(_fits(value, t) for t in wanted):
        yield path, (f"Invalid value: {_type_of(value)}: must be of type {' or '.join(wanted)}")
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        keeps = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for key, item in value.items():
            where = f"{path}.{key}" if _plain(key) else f'{path}["{key}"]'
            if isinstance(properties, dict) and key in properties:
                yield from _walk(item, properties[key], where, types)
            elif isinstance(extra, dict):
                yield from _walk(item, extra, where, types)
            elif isinstance(properties, dict) and (properties or extra is False):
                near = closest(str(key), properties, NEAR_EDITS)
                if keeps and near is None:
                    continue
                hint = f"; did you mean {path}.{near}?" if near else f" (known: {', '.join(sorted(properties))})"
                yield where, f"unknown field{hint}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _walk(item, schema["items"], f"{path}[{index}]", types)


def _plain(key: object) -> bool:
    return isinstance(key, str) and _PLAIN_KEY.match(key) is not None
