"""The GPU class checks of `cozyrender check` (issue 5 item 6): unknown
classes, class conflicts, the vGPU entitlement gate, GPUClass writes."""

from __future__ import annotations

import base64

import pytest
from test_budgets_builders import gpuclass, root_namespace, run_check, run_check_json, tenant, vm

A100 = gpuclass("a100", "nvidia.com/GA100_A100_PCIE_40GB")
VGPU = gpuclass("a100-4c", "nvidia.com/GRID_A100_4C", mode="vgpu")


def _vgpu_state(platform: str | None, a_vgpu: bool = True, b_vgpu: bool | None = None) -> list[dict]:
    return [root_namespace(platform), A100, VGPU, tenant("a", vgpu=a_vgpu), tenant("b", "tenant-a", vgpu=b_vgpu)]


def _vgpu_vm(namespace: str) -> dict:
    return vm(namespace, "desktop", [{"class": "a100-4c"}])


def test_passthrough_class_is_admitted(tmp_path):
    assert run_check_json(tmp_path, [A100], vm("tenant-root", "v", [{"class": "a100"}]))[0] == 0


def test_unknown_class_is_refused(tmp_path):
    code, answer = run_check_json(tmp_path, [A100], vm("tenant-root", "v", [{"name": "nvidia.com/x"}, {"class": "h100"}]))
    assert code == 1
    assert answer["reasons"] == [{"field": "spec.gpus[1].class", "message": "Invalid: GPU class 'h100' does not exist"}]


def test_class_in_conflict_is_refused_naming_the_holder(tmp_path):
    newer = gpuclass("a100-typo", A100["spec"]["resourceName"], created="2026-02-01T00:00:00Z")
    code, answer = run_check_json(tmp_path, [A100, newer], vm("tenant-root", "v", [{"class": "a100-typo"}]))
    assert code == 1
    assert "'a100'" in answer["reasons"][0]["message"] and "conflict" in answer["reasons"][0]["message"]
    # the holder stays usable
    assert run_check_json(tmp_path, [A100, newer], vm("tenant-root", "v", [{"class": "a100"}]))[0] == 0


def test_state_without_classes_refuses_every_class_and_still_checks_budgets(tmp_path):
    # R4: issue 5 item 6 refuses a write naming an unknown class; with no
    # GPUClass in the state every class is unknown, so it is refused, saying how to fix the state.
    state = [tenant("a", quotas={"a100.gpuclass.cozystack.io/devices": 1})]
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "v", [{"class": "a100", "count": 2},
                                                                       {"name": "nvidia.com/x"}, {"class": "a100"}]))
    assert code == 1 and answer["warnings"] == []
    [device, no_class, budget] = answer["reasons"]
    assert device["field"] == "spec.gpus[1].name"  # a raw name where budgets apply (issue 11 item 3)
    assert no_class["field"] == "spec.gpus[0].class"
    assert "holds no GPUClass objects" in no_class["message"]
    assert "kubectl get gpuclasses -o yaml" in no_class["message"]
    assert budget["field"] == "spec.gpus[0].count" and "requested 3" in budget["message"]
    # Within budget, the class alone refuses it.
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "v", [{"class": "a100"}]))
    assert code == 1 and [r["field"] for r in answer["reasons"]] == ["spec.gpus[0].class"]
    # A workload naming no class is not concerned, outside pools with GPU budgets.
    assert run_check_json(tmp_path, [*state, tenant("b")], vm("tenant-b", "v", [{"name": "nvidia.com/x"}]))[0] == 0


def test_the_reviewers_no_gpuclass_case_through_the_cli(tmp_path):
    state = [tenant("a", vgpu=False), root_namespace("false")]
    result = run_check(tmp_path, state, vm("tenant-a", "v", [{"class": "grid-a100-4c", "count": 1}]), "-o", "text")
    assert result.exit_code == 1 and result.output.splitlines()[0] == "refused"
    assert "spec.gpus[0].class: Invalid: GPU class 'grid-a100-4c': the state holds no GPUClass objects" in result.output
    assert "kubectl get gpuclasses -o yaml" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("namespace,platform,a_vgpu,b_vgpu,allowed", [
    ("tenant-a", "true", True, None, True),
    ("tenant-a", "false", True, None, False),      # the platform is off
    ("tenant-a", "true", False, None, False),      # a does not ask
    ("tenant-a-b", "true", True, None, False),     # b does not ask
    ("tenant-a-b", "true", True, True, True),
    ("tenant-a-b", "true", False, True, False),    # b asks, its parent is not entitled
    ("tenant-root", "true", True, None, True),
])
def test_vgpu_entitlement_chain(tmp_path, namespace, platform, a_vgpu, b_vgpu, allowed):
    code, answer = run_check_json(tmp_path, _vgpu_state(platform, a_vgpu, b_vgpu), _vgpu_vm(namespace))
    assert answer["allowed"] is allowed and code == (0 if allowed else 1)
    if not allowed:
        assert answer["reasons"][0]["field"] == "spec.gpus[0].class"
        assert "not entitled to vGPU" in answer["reasons"][0]["message"]


def test_platform_vgpu_flag_overrides_the_state(tmp_path):
    state = _vgpu_state("false")
    assert run_check_json(tmp_path, state, _vgpu_vm("tenant-a"), "--platform-vgpu", "true")[0] == 0
    state = _vgpu_state("true")
    assert run_check_json(tmp_path, state, _vgpu_vm("tenant-a"), "--platform-vgpu", "false")[0] == 1


def _values_secret(values: str, encoded: bool) -> dict:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": "tenant-root"}}
    if encoded:
        secret["data"] = {"values.yaml": base64.b64encode(values.encode()).decode()}
    else:
        secret["stringData"] = {"values.yaml": values}
    return secret


@pytest.mark.parametrize("encoded", [False, True])
@pytest.mark.parametrize("values,allowed", [("_cluster:\n  gpu-vgpu: true\n", True), ("_cluster: {}\n", False)])
def test_platform_vgpu_from_cozystack_values(tmp_path, encoded, values, allowed):
    state = _vgpu_state(None)[1:] + [_values_secret(values, encoded)]
    code, answer = run_check_json(tmp_path, state, _vgpu_vm("tenant-a"))
    assert answer["allowed"] is allowed


def test_unknown_platform_vgpu_is_off_with_a_warning(tmp_path):
    code, answer = run_check_json(tmp_path, _vgpu_state(None)[1:], _vgpu_vm("tenant-a"))
    assert code == 1 and "--platform-vgpu" in answer["warnings"][0]


def test_unknown_platform_vgpu_warns_once_for_two_vgpu_classes(tmp_path):
    # Regression: the warning was appended once per vgpu class named.
    other = gpuclass("a100-8c", "nvidia.com/GRID_A100_8C", mode="vgpu")
    write = vm("tenant-a", "desktop", [{"class": "a100-4c"}, {"class": "a100-8c"}])
    code, answer = run_check_json(tmp_path, _vgpu_state(None)[1:] + [other], write)
    assert code == 1 and len(answer["reasons"]) == 2
    assert [w for w in answer["warnings"] if "--platform-vgpu" in w] == [answer["warnings"][0]]
    assert len(answer["warnings"]) == 1


def test_gpuclass_create_is_validated(tmp_path):
    assert run_check_json(tmp_path, [], gpuclass("h100", "nvidia.com/H100", created=None))[0] == 0
    bad = gpuclass("H100", "h100.gpuclass.cozystack.io/devices", created=None)
    code, answer = run_check_json(tmp_path, [], bad)
    assert code == 1
    messages = " ".join(r["message"] for r in answer["reasons"])
    assert "DNS-1123" in messages and "budget domain" in messages


def test_gpuclass_update_is_validated_against_the_stored_class(tmp_path):
    changed = gpuclass("a100", A100["spec"]["resourceName"], created=None)
    changed["spec"]["model"] = "A100X"
    code, answer = run_check_json(tmp_path, [A100], changed)
    assert code == 1
    assert any("model is immutable" in r["message"] for r in answer["reasons"])
    # the same change is a valid create
    assert run_check_json(tmp_path, [], changed)[0] == 0


def test_gpuclass_write_that_would_conflict_warns(tmp_path):
    code, answer = run_check_json(tmp_path, [A100], gpuclass("a100b", A100["spec"]["resourceName"], created=None))
    assert code == 0 and "conflict" in answer["warnings"][0]


def test_text_output_of_a_refusal(tmp_path):
    result = run_check(tmp_path, _vgpu_state("false"), _vgpu_vm("tenant-a"), "-o", "text")
    assert result.exit_code == 1
    assert result.output.startswith("refused\n  spec.gpus[0].class: Forbidden: GPU class 'a100-4c' is a vGPU class")


def test_unusable_crd_propagates_from_the_library_and_is_bad_input_on_the_cli(tmp_path, monkeypatch):
    from cozyrender.budgets import check_write, index_state
    from cozyrender.gpuclass import validation

    def broken(obj, old=None):
        raise validation.CRDError("no openAPIV3Schema")

    monkeypatch.setattr(validation, "validate_gpuclass", broken)
    write = gpuclass("h100", "nvidia.com/GH100")
    with pytest.raises(validation.CRDError):
        check_write(index_state([A100]), write)
    result = run_check(tmp_path, [A100], write)
    assert result.exit_code == 2
    assert "the GPUClass CRD cannot be used: no openAPIV3Schema" in result.output
