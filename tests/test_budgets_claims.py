"""DRA ResourceClaims as a door to a GPU (cozyrender.budgets.doors,
door_checks): counted by Kubernetes' quota rule, charged to the class
naming their DeviceClass (`spec.deviceClassName`), refused past a budget
and outside the vGPU entitlement; a ResourceClaimTemplate checked, never
charged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_budgets_builders import gpuclass, tenant

from cozyrender.budgets import check_write, index_state
from cozyrender.budgets.doors import claim_device_counts, door_projection, larger_door, read_door
from cozyrender.kube.shape import ShapeError

CASES = yaml.safe_load((Path(__file__).parent / "data" / "dra" / "claim-quota-usage.yaml").read_text())
KEY = "gpuclass.cozystack.io/devices"
DRA_CLASS, VGPU_DRA_CLASS = "gpu.example.com", "vgpu.example.com"


def dra_class(name: str, resource: str, device_class: str, mode: str = "passthrough") -> dict:
    obj = gpuclass(name, resource, mode)
    obj["spec"]["deviceClassName"] = device_class
    return obj


CLASSES = [dra_class("a100", "nvidia.com/a100", DRA_CLASS),
           dra_class("a100-4c", "nvidia.com/GRID_A100-4C", VGPU_DRA_CLASS, "vgpu")]


def claim(namespace: str, name: str, count: int = 1, device_class: str = DRA_CLASS, mode: str | None = None) -> dict:
    exactly: dict = {"deviceClassName": device_class, "count": count}
    if mode is not None:
        exactly = {"deviceClassName": device_class, "allocationMode": mode}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def template(namespace: str, name: str, count: int = 1, device_class: str = DRA_CLASS) -> dict:
    body = claim(namespace, name, count, device_class)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": body["metadata"],
            "spec": {"spec": body["spec"]}}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_claim_is_counted_as_kubernetes_quota_counts_it(case) -> None:
    assert claim_device_counts(CASES[case]["spec"]) == CASES[case]["usage"]


def test_a_count_that_is_no_count_is_bad_input() -> None:
    with pytest.raises(ShapeError, match="count"):
        read_door(claim("tenant-a", "c", count="two"))  # type: ignore[arg-type]


def test_the_ledgers_projection_reads_as_the_same_claim() -> None:
    obj = CASES["prioritized-list-multiple-subrequests-different-device-classes"]
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "c", "namespace": "tenant-a", "uid": "u"}, "spec": obj["spec"]}
    assert read_door(door_projection(obj)).counts() == read_door(obj).counts() == {"gpu": 1, "tpu": 32}
    grown = claim("tenant-a", "c", 4, "gpu")
    assert read_door(larger_door(door_projection(obj), grown)).counts() == {"gpu": 4, "tpu": 32}


def test_a_claim_is_charged_to_the_class_naming_its_device_class() -> None:
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4}), claim("tenant-a", "c", 3),
                                   claim("tenant-a", "other", 9, "fpga.example.com")])
    assert state.reserved["tenant-a"] == {"a100": 3}
    assert {k: w.reservations for k, w in state.workloads.items()} == {
        ("ResourceClaim", "tenant-a", "c"): {"a100": 3}, ("ResourceClaim", "tenant-a", "other"): {}}


def test_a_claim_past_the_budget_is_refused_and_one_within_admitted() -> None:
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4}), claim("tenant-a", "c", 3)])
    assert check_write(state, claim("tenant-a", "d", 1)).allowed
    over = check_write(state, claim("tenant-a", "d", 2))
    assert not over.allowed
    assert over.reasons[0].field == "spec.devices.requests[0].exactly.deviceClassName"
    assert "requested 2, reserved 3, carved out 0, budget 4" in over.reasons[0].message
    # allocationMode All is 32 devices to the budget, as to Kubernetes' quota.
    assert not check_write(state, claim("tenant-a", "all", mode="All")).allowed
    # Another DeviceClass is none of the budgets' business; nor is a namespace outside the tenant tree.
    assert check_write(state, claim("tenant-a", "fpga", 9, "fpga.example.com")).allowed
    assert check_write(state, claim("kube-system", "c", 9)).allowed


def test_a_vgpu_device_class_needs_the_namespaces_entitlement() -> None:
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4})])
    refused = check_write(state, claim("tenant-a", "v", 1, VGPU_DRA_CLASS))
    assert not refused.allowed and "vGPU" in refused.reasons[0].message
    assert not check_write(state, template("tenant-a", "v", 1, VGPU_DRA_CLASS)).allowed


def test_a_template_is_checked_never_charged() -> None:
    # Kubernetes makes a claim per pod from a template; each claim is charged when it is created.
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 1}), claim("tenant-a", "c", 1)])
    assert check_write(state, template("tenant-a", "t", 8)).allowed
    assert not check_write(state, claim("tenant-a", "t-pod-0", 1)).allowed


def test_two_classes_naming_one_device_class_charge_the_oldest() -> None:
    newer = dra_class("b100", "nvidia.com/b100", DRA_CLASS)
    newer["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
    state = index_state(CLASSES + [newer, tenant("a", quotas={KEY: 4}), claim("tenant-a", "c", 2)])
    assert state.reserved["tenant-a"] == {"a100": 2}
    assert "its DeviceClass 'gpu.example.com' is held by the older class 'a100'" in str(state.conflicts["b100"])


def test_check_write_accepts_a_claim_with_the_webhooks_answer(tmp_path) -> None:
    """`cozyrender check --write` on a ResourceClaim and a ResourceClaimTemplate: the answer the
    webhook gives for the same state and write (admission.admit)."""
    from test_budgets_builders import run_check
    from test_webhook_admission import review

    from cozyrender.webhook import admission

    state = CLASSES + [tenant("a", quotas={KEY: 4}), claim("tenant-a", "c", 3)]
    indexed = index_state(state)
    for n, (write, allowed) in enumerate([(claim("tenant-a", "d", 2), False), (claim("tenant-a", "d", 1), True),
                                          (template("tenant-a", "t", 8), True),
                                          (claim("tenant-a", "v", 1, VGPU_DRA_CLASS), False)]):
        (tmp_path / str(n)).mkdir()
        result = run_check(tmp_path / str(n), state, write)
        assert result.exit_code == (0 if allowed else 1), result.output
        response = admission.admit(indexed, review(write, "CREATE", None))["response"]
        assert response["allowed"] is allowed
        if not allowed:
            assert response["status"]["details"]["causes"][0]["message"].split(":")[0] in result.output


def test_the_audit_and_the_tree_count_claims() -> None:
    from cozyrender.budgets import audit
    from cozyrender.tree.model import build_tree

    indexed = index_state(CLASSES + [tenant("a", quotas={KEY: 2}), claim("tenant-a", "c", 2),
                                     claim("tenant-a", "d", 1)])  # (stored before the budget was lowered)
    findings = audit(indexed)
    assert any("reserved 3 + carved out 0 = 3 > budget 2" in str(f) for f in findings), findings
    [row] = build_tree(indexed, findings).nodes["tenant-a"].keys
    assert sorted((r.kind, r.name, r.devices) for r in row.reservations) == [
        ("ResourceClaim", "c", 2), ("ResourceClaim", "d", 1)]


def test_a_pod_using_a_claim_is_not_charged_again() -> None:
    """A pod's devices are its extended resources: the claims it names are charged once, as claims."""
    user = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-a"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                     "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}}
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 2}), claim("tenant-a", "c", 2), user])
    assert state.reserved["tenant-a"] == {"a100": 2}
    assert check_write(state, {**user, "metadata": {"name": "q", "namespace": "tenant-a"}}).allowed


def test_the_metrics_count_claims() -> None:
    from cozyrender.controllers.metrics import tree_samples

    samples = tree_samples(CLASSES + [tenant("a", quotas={KEY: 4}), claim("tenant-a", "c", 3)])
    figures = {s[1]["type"]: s[2] for s in samples
               if s[0] == "cozyrender_tenant_budget" and s[1]["namespace"] == "tenant-a" and s[1]["key"] == KEY}
    assert (figures["used"], figures["left"], figures["hard"]) == (3.0, 1.0, 4.0)


def test_the_webhook_cache_keeps_a_claim_as_the_rules_read_it() -> None:
    from cozyrender.webhook.cache import compact

    obj = claim("tenant-a", "c", 3)
    obj["metadata"].update(uid="u1", generation=1, resourceVersion="7", managedFields=[{"manager": "kubectl"}])
    obj["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.cozyrender.io",
                                                              "pool": "node-1", "device": f"gpu-{i}"} for i in range(3)]}}}
    kept = compact(obj)
    assert read_door(kept) == read_door(obj)
    assert {k: kept["metadata"][k] for k in ("uid", "generation", "resourceVersion")} == {
        "uid": "u1", "generation": 1, "resourceVersion": "7"}
    assert "status" not in kept and "managedFields" not in kept["metadata"]
