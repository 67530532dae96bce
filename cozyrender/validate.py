"""Offline validation of rendered manifests against the Kubernetes 1.35 schemas
bundled by `kubernetes-validate` (strict variant: unknown fields are errors).

`kubernetes_validate.validate` re-reads a 1.6 MB definitions file on every
call; here the definitions registry and one validator per kind are loaded
once and cached. Kinds without a bundled schema (CRDs such as HelmRelease or
GPUClass) are not errors, only warnings.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KUBERNETES_VERSION = "1.35.0"


@dataclass(frozen=True)
class Finding:
    """One validation result about one object; `error` False means a warning."""

    object_id: str
    message: str
    error: bool = True

    def __str__(self) -> str:
        level = "error" if self.error else "warning"
        return f"{level}: {self.object_id}: {self.message}"


def object_id(obj: Mapping[str, Any]) -> str:
    """kind/namespace/name (kind/name for cluster-scoped objects), for messages."""
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    parts = [str(obj.get("kind") or "?"), str(metadata.get("namespace") or ""),
             str(metadata.get("name") or "?")]
    return "/".join(p for p in parts if p)


def _schema_dir(strict: bool) -> Any:
    import importlib_resources

    base = importlib_resources.files("kubernetes_validate") / "kubernetes-json-schema"
    return base / f"v{KUBERNETES_VERSION}-local{'-strict' if strict else ''}"


@functools.cache
def _registry(strict: bool) -> Any:
    """The shared definitions, parsed once per process."""
    from referencing import Registry, Resource

    definitions = json.loads((_schema_dir(strict) / "_definitions.json").read_text())
    return Resource.from_contents(definitions) @ Registry()


def _schema_file(kind: str, api_version: str) -> str:
    # rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1, v1 -> v1
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@functools.cache
def _validator(kind: str, api_version: str, strict: bool) -> Any | None:
    """A compiled validator for one kind, or None when no schema is bundled."""
    import jsonschema

    path = _schema_dir(strict) / _schema_file(kind, api_version)
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    return jsonschema.Draft202012Validator(schema, registry=_registry(strict))


def validate_object(obj: Any, strict: bool = True) -> list[Finding]:
    """All schema violations of one object (not only the first)."""
    if not isinstance(obj, Mapping):
        return [Finding("?", "a manifest must be a mapping")]
    oid = object_id(obj)
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str) or not api_version:
        return [Finding(oid, "a manifest needs a string apiVersion and kind")]
    validator = _validator(kind, api_version, strict)
    if validator is None:
        return [Finding(oid, f"no Kubernetes {KUBERNETES_VERSION} schema for {api_version} "
                             f"{kind}; not validated", error=False)]
    findings = []
    for err in sorted(validator.iter_errors(dict(obj)), key=lambda e: list(map(str, e.path))):
        where = ".".join(str(p) for p in err.path) or "(root)"
        findings.append(Finding(oid, f"{where}: {err.message}"))
    return findings


def validate_objects(objects: Iterable[Any], strict: bool = True) -> list[Finding]:
    findings: list[Finding] = []
    for obj in objects:
        if obj is None:  # empty or comment-only document
            continue
        findings.extend(validate_object(obj, strict))
    return findings


def validate_text(text: str, strict: bool = True) -> list[Finding]:
    """Validate every document of a multi-document YAML stream."""
    import yaml

    from cozyrender.yamlio import SafeLoader

    try:
        objects = list(yaml.load_all(text, Loader=SafeLoader))
    except yaml.YAMLError as err:
        return [Finding("?", f"invalid YAML: {' '.join(str(err).split())}")]
    return validate_objects(objects, strict)
