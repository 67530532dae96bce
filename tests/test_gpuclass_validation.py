"""The shipped GPUClass CRD through the API server's steps (prune, default,
schema, CEL with a real runtime), on create and on update."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from cozyrender.kube.cel.environment import RuleCompileError
from cozyrender.gpuclass.validation import (
    CRD_PATH,
    RULES_NOT_CHECKED,
    CRDError,
    CRDValidator,
    load_validator,
    validate_gpuclass,
)

DATA = Path(__file__).parent / "data" / "gpuclass"


def load(name: str) -> dict:
    return yaml.safe_load((DATA / f"{name}.yaml").read_text())


def messages(result) -> list[str]:
    return [str(v) for v in result.violations]


def assert_refused(result, path: str, fragment: str) -> None:
    hits = [v for v in result.violations if v.path == path and fragment in v.message]
    assert hits, f"expected {path}: ...{fragment}... in {messages(result)}"


# -- the CRD's rules -----------------------------------------------------------

def test_every_rule_compiles_once_and_is_cached():
    validator = load_validator()
    rules = validator.rules()
    texts = {rule.text for rule in rules}
    crd_text = CRD_PATH.read_text()
    assert len(rules) == crd_text.count("- rule:") == 20
    assert all(rule.message for rule in rules)
    assert sum(rule.is_transition for rule in rules) == 7  # six fields + profile presence
    assert "self == oldSelf" in texts
    assert load_validator() is validator  # compiled once per CRD file version


def _crd_with_rule(rule: dict) -> dict:
    crd = yaml.safe_load(CRD_PATH.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["x-kubernetes-validations"].append(rule)
    return crd


def test_a_rule_that_does_not_compile_raises_instead_of_admitting():
    with pytest.raises(RuleCompileError, match="does not compile"):
        CRDValidator(_crd_with_rule({"rule": "self.mode.noSuchFunction()", "message": "x"}))
    with pytest.raises(RuleCompileError, match="must evaluate to a bool"):
        CRDValidator(_crd_with_rule({"rule": "size(self.vendor)", "message": "x"}))


def test_an_unsupported_rule_field_is_refused_not_ignored():
    with pytest.raises(CRDError, match="messageExpression"):
        CRDValidator(_crd_with_rule({"rule": "true", "messageExpression": "'x'"}))


# -- valid classes of each mode ------------------------------------------------------

@pytest.mark.parametrize("name", ["passthrough", "vgpu", "mig"])
def test_valid_class_of_each_mode_is_admitted_on_create_and_on_unchanged_update(name):
    obj = load(name)
    assert validate_gpuclass(obj).violations == []
    assert validate_gpuclass(obj, old=copy.deepcopy(obj)).violations == []


def test_mutable_fields_may_change_on_update():
    old = load("vgpu")
    new = copy.deepcopy(old)
    new["spec"]["resourceName"] = "nvidia.com/GRID_A100-4C_v2"
    new["spec"]["tolerations"] = []
    new["spec"]["license"] = {"secretRef": {"namespace": "cozy-gpu", "name": "license-2027"}, "featureType": 2}
    assert validate_gpuclass(new, old).violations == []


# -- immutable fields ----------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("vendor", "AMD"),
    ("model", "A100-SXM4-80GB"),
    ("mode", "mig"),
    ("profile", "A100-8C"),
    ("memory", "8Gi"),
    ("sourceKind", "PCIHostDevice"),
])
def test_each_immutable_field_changed_is_refused_on_update(field, value):
    old = load("vgpu")
    new = copy.deepcopy(old)
    new["spec"][field] = value
    result = validate_gpuclass(new, old)
    assert_refused(result, f"spec.{field}", f"{field} is immutable")
    # A transition rule never runs on create.
    assert not any("immutable" in m for m in messages(validate_gpuclass(new)))


def test_memory_respelled_is_a_change():
    old = load("vgpu")
    new = copy.deepcopy(old)
    new["spec"]["memory"] = "4096Mi"
    assert_refused(validate_gpuclass(new, old), "spec.memory", "memory is immutable")


@pytest.mark.parametrize("change", ["add", "remove"])
def test_profile_added_or_removed_is_refused_on_update(change):
    old = load("passthrough") if change == "add" else load("mig")
    new = copy.deepcopy(old)
    if change == "add":
        new["spec"]["profile"] = "full"
    else:
        del new["spec"]["profile"]
        new["spec"]["mode"] = old["spec"]["mode"]
    assert_refused(validate_gpuclass(new, old), "spec.profile", "profile is immutable")


# -- names and resource names ----------------------------------------------------------

@pytest.mark.parametrize("name", ["A100", "a100_40g", "-a100", "a100.40g", "a" * 64])
def test_a_name_that_is_not_a_dns_label_is_refused(name):
    obj = load("passthrough")
    obj["metadata"]["name"] = name
    result = validate_gpuclass(obj)
    assert any(v.path == "" and "DNS-1123 label" in v.message for v in result.violations), messages(result)


def test_a_name_with_a_nul_character_is_refused():
    """cel-expr-python cuts strings at a NUL, so the name rule would see "ok"
    if the string were passed as it is; with the stand-in it sees the whole
    name, and the API server's object-meta check refuses it too."""
    obj = load("passthrough")
    obj["metadata"]["name"] = "ok\x00BAD"
    result = validate_gpuclass(obj)
    assert not result.ok
    assert_refused(result, "metadata.name", "RFC 1123 subdomain")
    assert_refused(result, "", "must be a DNS-1123 label")


@pytest.mark.parametrize("field", ["vendor", "model", "profile"])
def test_a_nul_character_in_a_free_text_field_is_accepted_as_the_api_server_accepts_it(field):
    """Found by the corpus against kube-apiserver 1.35: `vendor: "NVIDIA\\x00"`
    is created there; offline it was refused because the CEL runtime cannot
    take a NUL."""
    obj = load("vgpu")
    obj["spec"][field] = obj["spec"][field] + "\x00"
    assert validate_gpuclass(obj).ok


@pytest.mark.parametrize("field", ["profile", "tolerations", "license"])
def test_a_null_field_is_dropped_before_validation_as_the_api_server_drops_it(field):
    """Found by the corpus: `profile: null` is created by the API server (a
    null without `nullable` or a default is pruned before defaulting), where
    ours said "must be of type string"."""
    obj = load("passthrough")
    obj["spec"][field] = None
    result = validate_gpuclass(obj)
    assert result.ok, [str(v) for v in result.violations]
    assert field not in result.object["spec"]


def test_an_immutable_field_changed_after_a_nul_character_is_refused():
    """Cut at the NUL, old and new model would read the same and the
    immutability rule would admit the change."""
    old = load("vgpu")
    new = copy.deepcopy(old)
    new["spec"]["model"] = old["spec"]["model"] + "\x00H100"
    result = validate_gpuclass(new, old)
    assert not result.ok
    assert_refused(result, "spec.model", "model is immutable")


@pytest.mark.parametrize("name", ["a.b", "a" * 253])
def test_object_meta_allows_a_subdomain_where_the_rule_then_refuses(name):
    """The API server's name check is a DNS-1123 subdomain; the CRD's own
    rule narrows it to a label."""
    obj = load("passthrough")
    obj["metadata"]["name"] = name
    result = validate_gpuclass(obj)
    assert not any(v.path == "metadata.name" for v in result.violations), messages(result)
    assert any(v.path == "" and "DNS-1123 label" in v.message for v in result.violations), messages(result)


@pytest.mark.parametrize("resource", [
    "gpuclass.cozystack.io/devices",
    "a100.gpuclass.cozystack.io/devices",
    "x.y.gpuclass.cozystack.io/anything",
])
def test_a_resource_name_in_the_budget_domain_is_refused(resource):
    obj = load("passthrough")
    obj["spec"]["resourceName"] = resource
    assert_refused(validate_gpuclass(obj), "spec.resourceName", "budget domain")


@pytest.mark.parametrize("resource", ["nvidia.com/", "nvidia.com/-x", "Nvidia.com/gpu", "a/b/c", "x" * 64])
def test_a_resource_name_that_is_not_a_qualified_name_is_refused(resource):
    obj = load("passthrough")
    obj["spec"]["resourceName"] = resource
    assert_refused(validate_gpuclass(obj), "spec.resourceName", "qualified name")


def test_the_budget_domain_is_a_suffix_test_not_a_substring():
    obj = load("passthrough")
    obj["spec"]["resourceName"] = "notgpuclass.cozystack.io/devices"
    assert validate_gpuclass(obj).violations == []


# -- the vGPU fields --------------------------------------------------------------------

def test_a_vgpu_class_without_its_license_is_refused():
    obj = load("vgpu")
    del obj["spec"]["license"]
    assert_refused(validate_gpuclass(obj), "spec.license", "a vgpu class needs license")


def test_a_passthrough_class_with_a_license_is_refused():
    obj = load("passthrough")
    obj["spec"]["license"] = load("vgpu")["spec"]["license"]
    assert_refused(validate_gpuclass(obj), "spec.license", "license is only for vgpu classes")


@pytest.mark.parametrize("mode", ["vgpu", "mig"])
def test_profile_is_required_for_vgpu_and_mig(mode):
    obj = load(mode)
    del obj["spec"]["profile"]
    assert_refused(validate_gpuclass(obj), "spec.profile", "profile is required")


def test_license_needs_its_secret_and_feature_type():
    obj = load("vgpu")
    obj["spec"]["license"] = {"secretRef": {"namespace": "Bad_NS", "name": "lic"}}
    result = validate_gpuclass(obj)
    assert_refused(result, "spec.license.featureType", "Required value")
    assert_refused(result, "spec.license.secretRef.namespace", "DNS-1123 label")


# -- pruning, defaulting, schema ------------------------------------------------------------

def test_unknown_fields_are_pruned_not_refused():
    obj = load("passthrough")
    obj["spec"]["nodeSelector"] = {"gpu": "a100"}
    obj["spec"]["tolerations"][0]["colour"] = "blue"
    obj["status"] = {"free": 3}
    obj["metadata"]["bogus"] = 1
    result = validate_gpuclass(obj)
    assert result.ok, messages(result)
    assert result.pruned == ["metadata.bogus", "spec.nodeSelector", "spec.tolerations[0].colour"]
    assert "nodeSelector" not in result.object["spec"]
    assert "status" not in result.object  # the status subresource: a create never sets it
    assert "nodeSelector" in obj["spec"]  # the input is left alone


def test_toleration_operator_defaults_to_equal():
    result = validate_gpuclass(load("vgpu"))
    assert result.object["spec"]["tolerations"][0]["operator"] == "Equal"


def test_toleration_rules():
    obj = load("passthrough")
    obj["spec"]["tolerations"] = [
        {"key": "a", "operator": "Exists", "value": "x"},
        {"operator": "Equal", "value": "x"},
        {"key": "b", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30},
        {"operator": "Exists"},
    ]
    result = validate_gpuclass(obj)
    assert_refused(result, "spec.tolerations[0]", "takes no value")
    assert_refused(result, "spec.tolerations[1]", "empty key must use operator Exists")
    assert_refused(result, "spec.tolerations[2]", "only to the NoExecute effect")
    assert not any(v.path == "spec.tolerations[3]" for v in result.violations)


@pytest.mark.parametrize("memory, ok", [("40Gi", True), (1, True), ("0", False), ("-1Gi", False),
                                         ("forty", False), (0, False), ("1.5Ti", True)])
def test_memory_is_a_positive_quantity(memory, ok):
    obj = load("passthrough")
    obj["spec"]["memory"] = memory
    result = validate_gpuclass(obj)
    assert result.ok is ok, messages(result)


def test_missing_required_fields_are_reported_with_their_paths():
    obj = load("passthrough")
    del obj["spec"]["resourceName"]
    del obj["spec"]["vendor"]
    result = validate_gpuclass(obj)
    assert_refused(result, "spec.resourceName", "Required value")
    assert_refused(result, "spec.vendor", "Required value")


def test_type_and_enum_failures_stop_cel_as_the_api_server_does():
    obj = load("vgpu")
    obj["spec"]["mode"] = "sriov"
    obj["spec"]["memory"] = ["4Gi"]
    result = validate_gpuclass(obj)
    assert_refused(result, "spec.mode", 'Unsupported value: "sriov"')
    assert_refused(result, "spec.memory", "must be of type integer or string")
    assert messages(result)[-1] == f"<root>: {RULES_NOT_CHECKED}"
    assert not any("license" in m for m in messages(result))


def test_wrong_kind_or_api_version_and_a_renamed_update_are_refused():
    obj = load("passthrough")
    old = copy.deepcopy(obj)
    obj["apiVersion"] = "cozystack.io/v1"
    obj["metadata"]["name"] = "other"
    result = validate_gpuclass(obj, old)
    assert_refused(result, "apiVersion", "Unsupported value")
    assert_refused(result, "metadata.name", "cannot change")


# -- the DRA DeviceClass ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpu.cozyrender.io", "gpu.nvidia.com", "a100-40g"])
def test_a_device_class_name_that_is_a_dns_subdomain_is_admitted(name):
    obj = load("passthrough")
    obj["spec"]["deviceClassName"] = name
    assert validate_gpuclass(obj).violations == []


@pytest.mark.parametrize("name", ["GPU.example", "gpu/x", "-gpu", "gpu.", "x" * 254])
def test_a_device_class_name_that_is_no_dns_subdomain_is_refused(name):
    obj = load("passthrough")
    obj["spec"]["deviceClassName"] = name
    result = validate_gpuclass(obj)
    assert any(v.path == "spec.deviceClassName" for v in result.violations), messages(result)


def test_the_device_class_name_may_be_added_to_an_existing_class():
    old = load("passthrough")
    new = copy.deepcopy(old)
    new["spec"]["deviceClassName"] = "gpu.cozyrender.io"
    assert validate_gpuclass(new, old).violations == []
