"""cozyrender.validate: built-in kinds against the Kubernetes 1.35 schemas, and
the custom kinds the charts render against their bundled CRD schemas (a valid
and an invalid object per kind), loaded once; and the CRD-to-JSON-schema rules
in cozyrender.schemas.crd."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cozyrender import validate
from cozyrender.schemas.crd import served_schema, strip_descriptions, to_json_schema

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "cozystack-3c780acd"

CNP = {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
       "metadata": {"name": "allow-internal", "namespace": "tenant-a"},
       "spec": {"endpointSelector": {},
                "ingress": [{"fromEndpoints": [{"matchLabels": {
                    "k8s:io.kubernetes.pod.namespace": "tenant-a"}}]}],
                "egress": [{"toEntities": ["kube-apiserver"]},
                           {"toPorts": [{"ports": [{"port": "53", "protocol": "UDP"}]}]}]}}
CCNP = {"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "tenant-a-egress"},
        "spec": {"endpointSelector": {"matchLabels": {"tenant.cozystack.io/tenant-a": ""}},
                 "egress": [{"toEndpoints": [{"matchLabels": {
                     "k8s:io.kubernetes.pod.namespace": "kube-system",
                     "k8s-app": "kube-dns"}}]}]}}
HELMRELEASE = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "etcd", "namespace": "tenant-a",
                            "labels": {"cozystack.io/ui": "true"}},
               "spec": {"chartRef": {"kind": "ExternalArtifact", "name": "etcd",
                                     "namespace": "cozy-system"},
                        "interval": "1m0s", "timeout": "10m0s",
                        "install": {"remediation": {"retries": -1}},
                        "upgrade": {"remediation": {"retries": -1}},
                        "dependsOn": [{"name": "info"}],
                        "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}],
                        "values": {"anything": {"goes": [1, 2]}}}}
REALM_GROUP = {"apiVersion": "v1.edp.epam.com/v1", "kind": "KeycloakRealmGroup",
               "metadata": {"name": "tenant-a-view", "namespace": "tenant-a"},
               "spec": {"name": "tenant-a-view",
                        "realmRef": {"name": "keycloakrealm-cozy",
                                     "kind": "ClusterKeycloakRealm"}}}
GPUCLASS = {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": "a100-40g"},
            "spec": {"vendor": "nvidia", "model": "A100-PCIE-40GB", "mode": "passthrough",
                     "memory": "40Gi", "sourceKind": "PCIHostDevice",
                     "resourceName": "nvidia.com/GA100_A100_PCIE_40GB"}}
VAP = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
       "metadata": {"name": "p"},
       "spec": {"failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["namespaces"]}]},
                "validations": [{"expression": "true", "reason": "Forbidden"}]}}
VAPB = {"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "p"},
        "spec": {"policyName": "p", "validationActions": ["Deny"]}}


def with_change(obj: dict, path: str, value: Any) -> dict:
    out = copy.deepcopy(obj)
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def errors(obj: Any, strict: bool = True) -> list[str]:
    findings = validate.validate_object(obj, strict)
    assert all(f.error for f in findings), findings
    return [f.message for f in findings]


# ---------------------------------------------------------------- each kind

VALID = [CNP, CCNP, HELMRELEASE, REALM_GROUP, GPUCLASS, VAP, VAPB]


@pytest.mark.parametrize("obj", VALID, ids=lambda o: o["kind"])
def test_valid_objects_have_no_finding(obj: dict) -> None:
    assert validate.validate_object(obj) == []


@pytest.mark.parametrize("obj, path, value, message", [
    (CNP, "spec.ingress.0.fromEndpoints", "tenant-a", "spec.ingress.0.fromEndpoints: "
                                                      "'tenant-a' is not of type 'array'"),
    (CNP, "spec.egress.0.toEntity", ["world"], "'toEntity' was unexpected"),
    (CNP, "spec.egress.1.toPorts.0.ports.0.protocol", "ICMPX", "protocol: 'ICMPX' is not one of"),
    (CNP, "metadata.labels", {"a": 1}, "metadata.labels.a: 1 is not of type"),
    (CCNP, "spec.nodeSelector", {}, "spec: "),  # endpointSelector and nodeSelector: oneOf
    (CCNP, "specs", "x", "specs: 'x' is not of type 'array'"),
    (HELMRELEASE, "spec.timeoutt", "5m", "'timeoutt' was unexpected"),
    (HELMRELEASE, "spec.interval", 60, "spec.interval: 60 is not of type 'string'"),
    (HELMRELEASE, "spec.chartRef.kind", "GitRepository", "spec.chartRef.kind: 'GitRepository'"),
    (HELMRELEASE, "spec.dependsOn.0", {"namespace": "x"}, "'name' is a required property"),
    (REALM_GROUP, "spec.realmRef.kind", "Realm", "'Realm' is not one of"),
    (REALM_GROUP, "spec.subGroup", ["x"], "'subGroup' was unexpected"),
    (GPUCLASS, "spec.mode", "shared", "spec.mode: 'shared' is not one of"),
    (GPUCLASS, "spec.memroy", "1Gi", "'memroy' was unexpected"),
    (VAP, "spec.validations", [{"reason": "Forbidden"}], "'expression' is a required property"),
    (VAPB, "spec.validationActions", "Deny", "spec.validationActions: 'Deny' is not of type"),
    (VAPB, "spec.policyname", "p", "'policyname' was unexpected"),
])
def test_invalid_objects_are_errors(obj: dict, path: str, value: Any, message: str) -> None:
    found = errors(with_change(obj, path, value))
    assert any(message in m for m in found), found


@pytest.mark.parametrize("obj", [CNP, HELMRELEASE, REALM_GROUP, GPUCLASS], ids=lambda o: o["kind"])
def test_custom_kinds_check_metadata_as_object_meta(obj: dict) -> None:
    found = errors(with_change(obj, "metadata.nmae", "x"))
    assert any("'nmae' was unexpected" in m for m in found), found
    found = errors(with_change(obj, "metadata.name", 5))
    assert any("metadata.name: 5 is not of type" in m for m in found), found


def test_kind_and_api_version_must_match_a_schema() -> None:
    [finding] = validate.validate_object({**CNP, "apiVersion": "cilium.io/v3"})
    assert not finding.error and "no Kubernetes 1.35.0 schema for cilium.io/v3" in finding.message
    [finding] = validate.validate_object({**CNP, "kind": "CiliumNetworkPolicies"})
    assert not finding.error
    assert errors({"kind": "CiliumNetworkPolicy"}) == [
        "a manifest needs a string apiVersion and kind"]


def test_non_strict_mode_allows_unknown_fields_of_custom_kinds() -> None:
    obj = with_change(HELMRELEASE, "spec.timeoutt", "5m")
    assert errors(obj, strict=True) != []
    assert validate.validate_object(obj, strict=False) == []
    assert errors(with_change(HELMRELEASE, "spec.interval", 60), strict=False) != []


def test_bundled_kinds_and_files_agree() -> None:
    import importlib_resources

    folder = importlib_resources.files("cozyrender.schemas")
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    assert sorted(validate.BUNDLED_CUSTOM_KINDS.values()) == files
    assert (folder / "README.md").is_file()
    for (api_version, kind), name in validate.BUNDLED_CUSTOM_KINDS.items():
        schema = json.loads((folder / name).read_text())
        assert set(schema["properties"]) >= {"apiVersion", "kind", "metadata", "spec"}, name
        assert strip_descriptions(schema) == schema, name  # shipped without descriptions


def test_schemas_are_loaded_once_per_kind() -> None:
    validate._validator.cache_clear()
    for _ in range(3):
        validate.validate_objects([CNP, CNP, HELMRELEASE, GPUCLASS])
    info = validate._validator.cache_info()
    assert info.misses == 3 and info.hits == 9


def test_cozystack_renders_validate_clean() -> None:
    """Every object Cozystack's own charts render (the stored reference renders)
    validates: the bundled schemas fit what the platform really produces."""
    renders = sorted(DATA.glob("*/upstream.yaml"))
    kinds: set[str] = set()
    for path in renders:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        kinds |= {d["kind"] for d in docs}
        assert validate.validate_objects(docs) == [], path
    assert {"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "HelmRelease",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds


def test_validate_text() -> None:
    text = yaml.safe_dump_all([CNP, None, with_change(CCNP, "spec.bogus", 1)])
    [finding] = validate.validate_text(text)
    assert finding.object_id == "CiliumClusterwideNetworkPolicy/tenant-a-egress"
    assert "'bogus' was unexpected" in finding.message
    assert str(finding).startswith("error: CiliumClusterwideNetworkPolicy/tenant-a-egress: ")
    [finding] = validate.validate_text("a: [")
    assert finding.message.startswith("invalid YAML")


# ---------------------------------------------------------------- CRD schema rules

def test_structural_objects_get_closed_and_branches_do_not() -> None:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object",
                 "anyOf": [{"properties": {"a": {}}, "required": ["a"]}],
                 "properties": {"a": {"type": "string"},
                                "free": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True,
                                         "properties": {"k": {"type": "string"}}},
                                "map": {"type": "object",
                                        "additionalProperties": {"type": "object", "properties": {
                                            "x": {"type": "integer"}}}},
                                "list": {"type": "array", "items": {"type": "object",
                                                                    "properties": {}}}}}}}
    out = to_json_schema(schema)
    spec = out["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert "additionalProperties" not in spec["anyOf"][0]
    assert "additionalProperties" not in spec["properties"]["free"]
    assert spec["properties"]["map"]["additionalProperties"]["additionalProperties"] is False
    assert spec["properties"]["list"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in to_json_schema(schema, strict=False)["properties"]["spec"]
    assert schema["properties"]["spec"].get("additionalProperties") is None  # input untouched


def test_nullable_admits_null() -> None:
    out = to_json_schema({"type": "object", "properties": {
        "a": {"type": "string", "nullable": True},
        "b": {"type": "string", "enum": ["x"], "nullable": True},
        "c": {"type": "string"}}})
    props = out["properties"]
    assert props["a"] == {"type": ["string", "null"]}
    assert props["b"] == {"type": ["string", "null"], "enum": ["x", None]}
    assert props["c"] == {"type": "string"}


def test_metadata_becomes_object_meta() -> None:
    out = to_json_schema({"type": "object", "properties": {"metadata": {"type": "object"}}},
                         object_meta_ref="#meta")
    assert out["properties"]["metadata"] == {"$ref": "#meta"}


def test_strip_descriptions_keeps_fields_named_description() -> None:
    schema = {"description": "top", "properties": {
        "description": {"type": "string", "description": "a field called description"},
        "list": {"items": {"description": "x", "type": "string"}},
        "alt": {"oneOf": [{"description": "y"}]}}}
    assert strip_descriptions(schema) == {"properties": {
        "description": {"type": "string"}, "list": {"items": {"type": "string"}},
        "alt": {"oneOf": [{}]}}}


def test_served_schema() -> None:
    crd = {"metadata": {"name": "x.example"}, "spec": {"versions": [
        {"name": "v1", "served": True, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v0", "served": False, "schema": {"openAPIV3Schema": {}}}]}}
    assert served_schema(crd, "v1") == {"type": "object"}
    with pytest.raises(ValueError, match="does not serve v0"):
        served_schema(crd, "v0")
    with pytest.raises(ValueError, match="has no version v2"):
        served_schema(crd, "v2")
