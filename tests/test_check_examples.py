"""Every worked example of the design page (gpu-budgets.md), through
`cozyrender check`, plus the reviewer's regression for cpu, memory and
ephemeral-storage."""

from __future__ import annotations

import pytest
from test_budgets_builders import classes, nodes, pod, run_check, run_check_json, tenant, vm

A100 = "a100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"


# -- Example 1 and the reviewer's regression ---------------------------------

REGRESSION = [
    # key, parent budget, child pods' limits (two pods), new sibling's ask
    ("cpu", "10", ["4", "4000m"], "10"),
    ("memory", "10Gi", ["4Gi", "4096Mi"], "10Gi"),
    ("ephemeral-storage", "10Gi", ["4Gi", "4Gi"], "10Gi"),
]


def _example1_state(key: str, budget: str, pod_limits: list[str], child_quotas: dict | None) -> list[dict]:
    return [
        tenant("a", quotas={key: budget}),
        tenant("c", "tenant-a", quotas=child_quotas),
        *(pod("tenant-a-c", f"p{i}", {key: value}) for i, value in enumerate(pod_limits)),
    ]


@pytest.mark.parametrize("key,budget,pod_limits,ask", REGRESSION)
@pytest.mark.parametrize("child_quotas", [{ALL: 2}, None], ids=["gpu-only-child", "child-declares-nothing"])
def test_example1_gpu_only_child_stays_in_parent_ordinary_pool(tmp_path, key, budget, pod_limits, ask, child_quotas):
    state = _example1_state(key, budget, pod_limits, child_quotas)
    code, answer = run_check_json(tmp_path, state, tenant("d", "tenant-a", quotas={key: ask}))
    assert code == 1 and answer["allowed"] is False
    [reason] = answer["reasons"]
    assert reason["field"] == f'spec.resourceQuotas["{key}"]'
    assert f"limits.{key}" in reason["message"] and "pool tenant-a" in reason["message"]


def test_example1_message_names_the_numbers(tmp_path):
    state = _example1_state("cpu", "10", ["4", "4"], {ALL: 2})
    result = run_check(tmp_path, state, tenant("d", "tenant-a", quotas={"cpu": 10}))
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == "refused"
    assert "requested 10, budget 10, carved out 0, used 8 (limits.cpu) (available 2)" in result.output


def test_example1_what_is_left_is_admitted(tmp_path):
    state = _example1_state("cpu", "10", ["4", "4"], {ALL: 2})
    code, answer = run_check_json(tmp_path, state, tenant("d", "tenant-a", quotas={"cpu": 2}))
    assert (code, answer["allowed"]) == (0, True)


def test_example1_child_with_its_own_cpu_leaves_the_pool(tmp_path):
    # Declaring cpu makes c an ordinary pool root: its usage leaves tenant-a's
    # pool and its declaration is charged instead.
    state = _example1_state("cpu", "10", ["4", "4"], {"cpu": 8})
    code, answer = run_check_json(tmp_path, state, tenant("d", "tenant-a", quotas={"cpu": 2}))
    assert code == 0
    code, answer = run_check_json(tmp_path, state, tenant("d", "tenant-a", quotas={"cpu": 3}))
    assert code == 1 and "carved out 8, used 0" in answer["reasons"][0]["message"]


# -- Example 2 ----------------------------------------------------------------

def test_example2(tmp_path):
    parent = tenant("a", quotas={A100: 4})
    first = vm("tenant-a", "vm1", [{"class": "a100", "count": 3}])
    assert run_check_json(tmp_path, [*classes(), parent], first)[0] == 0
    code, answer = run_check_json(tmp_path, [*classes(), parent, first], vm("tenant-a", "vm2", [{"class": "a100", "count": 2}]))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == "spec.gpus[0].count"
    assert "requested 2, reserved 3, carved out 0, budget 4" in reason["message"]
    assert A100 in reason["message"]
    pool = nodes("tenant-a", "workers", [{"class": "a100", "count": 1}], max_replicas=2)
    code, answer = run_check_json(tmp_path, [*classes(), parent, first], pool)
    assert code == 1 and "requested 2, reserved 3" in answer["reasons"][0]["message"]


# -- Example 3 ----------------------------------------------------------------

def test_example3_no_growth_is_admitted_over_a_lowered_budget(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 2}), vm("tenant-a", "vm1", [{"class": "a100", "count": 3}], memory="4Gi")]
    resized = vm("tenant-a", "vm1", [{"class": "a100", "count": 3}], memory="8Gi")
    code, answer = run_check_json(tmp_path, state, resized)
    assert (code, answer["allowed"], answer["reasons"]) == (0, True, [])
    grown = vm("tenant-a", "vm1", [{"class": "a100", "count": 4}], memory="4Gi")
    code, answer = run_check_json(tmp_path, state, grown)
    assert code == 1 and "requested 4, reserved 0, carved out 0, budget 2" in answer["reasons"][0]["message"]


# -- Example 4 ----------------------------------------------------------------

def test_example4(tmp_path):
    parent = tenant("a", quotas={ALL: 8})
    child = tenant("b", "tenant-a", quotas={A100: 6})
    assert run_check_json(tmp_path, [parent], child)[0] == 0
    code, answer = run_check_json(tmp_path, [*classes(), parent, child], vm("tenant-a", "vm", [{"class": "h100", "count": 3}]))
    assert code == 1
    assert f"{ALL!r}" in answer["reasons"][0]["message"]
    assert "requested 3, reserved 0, carved out 6, budget 8" in answer["reasons"][0]["message"]


# -- Example 5 ----------------------------------------------------------------

def test_example5_escape_is_admitted_and_the_audit_warns(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={"cpu": 2})]
    code, answer = run_check_json(tmp_path, state, vm("tenant-a-b", "vm", [{"class": "a100", "count": 10}]))
    assert (code, answer["allowed"]) == (0, True)
    state.append(vm("tenant-a-b", "vm", [{"class": "a100", "count": 10}]))
    code, findings = run_check_json(tmp_path, state)
    assert code == 0
    [warning] = findings
    assert warning["severity"] == "warning" and warning["kind"] == "escapes-budget"
    assert warning["namespace"] == "tenant-a-b" and A100 in warning["message"]


# -- Example 6 ----------------------------------------------------------------

@pytest.mark.parametrize("key,why", [
    ("A100.gpuclass.cozystack.io/devices", "lower case"),
    ("a100.gpuclass.cozystack.io/memory", "'devices'"),
    ("x.y.gpuclass.cozystack.io/devices", "one class label"),
    ("requests.gpuclass.cozystack.io/devices", "prefix"),
])
def test_example6_malformed_budget_keys_are_refused(tmp_path, key, why):
    code, answer = run_check_json(tmp_path, [tenant("a", quotas={"cpu": 10})], tenant("b", "tenant-a", quotas={key: 1}))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == f'spec.resourceQuotas["{key}"]'
    assert key in reason["message"] and why in reason["message"]


@pytest.mark.parametrize("key,budget,pod_limits,ask", REGRESSION)
def test_regression_same_answer_as_when_the_child_declares_nothing(tmp_path, key, budget, pod_limits, ask):
    write = tenant("d", "tenant-a", quotas={key: ask})
    gpu_only = run_check_json(tmp_path, _example1_state(key, budget, pod_limits, {ALL: 2}), write)
    undeclared = run_check_json(tmp_path, _example1_state(key, budget, pod_limits, None), write)
    assert gpu_only == undeclared
