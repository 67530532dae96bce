"""Offline validation of rendered manifests against the Kubernetes 1.35 schemas
bundled by `kubernetes-validate` (strict variant: unknown fields are errors),
and against the CRD schemas of the custom kinds the charts render, bundled in
`cozyrender/schemas/` (Cilium network policies, Flux HelmRelease,
KeycloakRealmGroup) or read from our own GPUClass CRD.

`kubernetes_validate.validate` re-reads a 1.6 MB definitions file on every
call; here the definitions registry and one validator per kind are loaded
once and cached. A custom resource is validated as the API server would:
its CRD's structural schema (unknown fields refused when strict, nullable
honoured) with `metadata` checked as an ObjectMeta. Kinds with no schema at
all are not errors, only warnings.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
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


_OBJECT_META = ("https://kubernetes.io/api/_definitions.json#/$defs/"
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
GPUCLASS_CRD = (Path(__file__).resolve().parent.parent / "charts" / "cozystack-basics" / "crds"
                / "gpuclasses.cozystack.io.yaml")


# (apiVersion, kind) -> the bundled schema file in cozyrender/schemas/
BUNDLED_CUSTOM_KINDS: dict[tuple[str, str], str] = {
    ("cilium.io/v2", "CiliumNetworkPolicy"): "cilium.io_v2_ciliumnetworkpolicy.json",
    ("cilium.io/v2", "CiliumClusterwideNetworkPolicy"):
        "cilium.io_v2_ciliumclusterwidenetworkpolicy.json",
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"): "helm.toolkit.fluxcd.io_v2_helmrelease.json",
    ("v1.edp.epam.com/v1", "KeycloakRealmGroup"): "v1.edp.epam.com_v1_keycloakrealmgroup.json",
    ("operator.victoriametrics.com/v1beta1", "VMServiceScrape"):
        "operator.victoriametrics.com_v1beta1_vmservicescrape.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_v1_servicemonitor.json",
}
GPUCLASS_API_VERSION = "cozystack.io/v1alpha1"


def _crd_schema(kind: str, api_version: str) -> dict[str, Any] | None:
    """The openAPIV3Schema of a custom kind: bundled, or our own GPUClass CRD
    (read from the chart, so it is always the CRD the chart installs)."""
    if (api_version, kind) == (GPUCLASS_API_VERSION, "GPUClass"):
        if not GPUCLASS_CRD.is_file():
            return None
        import yaml

        from cozyrender.schemas.crd import served_schema
        from cozyrender.yamlio import SafeLoader

        crd = yaml.load(GPUCLASS_CRD.read_text(encoding="utf-8"), Loader=SafeLoader)
        return served_schema(crd, api_version.split("/", 1)[1])
    name = BUNDLED_CUSTOM_KINDS.get((api_version, kind))
    if name is None:
        return None
    import importlib_resources

    path = importlib_resources.files("cozyrender.schemas") / name
    return json.loads(path.read_text(encoding="utf-8"))


def _schema_file(kind: str, api_version: str) -> str:
    # rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1, v1 -> v1
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@functools.cache
def _validator(kind: str, api_version: str, strict: bool) -> Any | None:
    """A compiled validator for one kind, or None when no schema is bundled."""
    import jsonschema

    path = _schema_dir(strict) / _schema_file(kind, api_version)
    if path.is_file():
        schema = json.loads(path.read_text())
    else:
        crd = _crd_schema(kind, api_version)
        if crd is None:
            return None
        from cozyrender.schemas.crd import to_json_schema

        schema = to_json_schema(crd, strict=strict, object_meta_ref=_OBJECT_META)
        # apiVersion and kind are fixed for the kind looked up
        schema.setdefault("required", [])
        schema["required"] = sorted({*schema["required"], "apiVersion", "kind"})
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

    from cozyrender.yamlio import SafeLoader, yaml_problem

    try:
        objects = list(yaml.load_all(text, Loader=SafeLoader))
    except yaml.YAMLError as err:
        return [Finding("?", f"invalid YAML: {yaml_problem(err)}")]
    return validate_objects(objects, strict)
