"""Regressions from the budgets review, each through `cozyrender check`:
R1 the root tenant's own pool, R2 a tenant that stops being a pool root,
R3 an ordinary value below the tenant's own usage, R5 keys compared by the
quota key they render to, R6 readable byte figures. (R4, a state without
GPUClass objects, is in test_check_vgpu.py.)"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_budgets_builders import (
    classes, klist, pod, quota, root_namespace, run_check, run_check_json, tenant, vm, write_json,
)

from cozyrender.commands.check import command
from cozyrender.kube.client import state_export

A100 = "a100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"
H100 = "h100.gpuclass.cozystack.io/devices"


# -- R1: the root tenant gates its own pool too ---------------------------------------

def _r1_state() -> list[dict]:
    return [tenant("root", quotas=None), vm("tenant-root", "v", [{"class": "a100", "count": 5}]),
            tenant("a", quotas={A100: 3})]


def test_r1_root_tenant_newly_declaring_a_budget_below_its_pool_is_refused(tmp_path):
    code, answer = run_check_json(tmp_path, _r1_state(), tenant("root", quotas={A100: 2}))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == f'spec.resourceQuotas["{A100}"]'
    assert "own pool already holds" in reason["message"] and "requested 2, reserved 5, carved out 3" in reason["message"]
    assert run_check_json(tmp_path, _r1_state(), tenant("root", quotas={A100: 8}))[0] == 0
    # the class-less key counts every class, carve-outs included
    code, answer = run_check_json(tmp_path, _r1_state(), tenant("root", quotas={ALL: 7}))
    assert code == 1 and "requested 7, reserved 5, carved out 3" in answer["reasons"][0]["message"]


def test_r1_root_tenant_declaring_nothing_before(tmp_path):
    # The root Tenant as the cluster lists it (`as_listed`: declaring nothing).
    state = [vm("tenant-root", "v", [{"class": "a100", "count": 5}])]
    assert run_check_json(tmp_path, state, tenant("root", quotas={A100: 4}))[0] == 1
    assert run_check_json(tmp_path, state, tenant("root", quotas={A100: 5}))[0] == 0


def test_r1_a_state_without_any_tenant_is_bad_input_not_an_implicit_root(tmp_path):
    """Issue 19 item 2: a cluster always lists the root Tenant; a state with
    none was read without `tenants` and would admit any write for want of a
    budget."""
    state = write_json(tmp_path / "state.json", klist([root_namespace(None),
                                                      vm("tenant-root", "v", [{"class": "a100", "count": 5}])]))
    write = write_json(tmp_path / "write.json", tenant("root", quotas={A100: 4}))
    result = CliRunner().invoke(command, ["--state", str(state), "--write", str(write)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"cozyrender check: error: the state holds no Tenant (1 file read ({state}), "
                                    "2 objects); a write is checked against the tenants' budgets")
    assert state_export() in result.stderr and result.stderr.count("\n") == 1


def test_r1_root_tenant_ordinary_key_below_its_usage_is_refused(tmp_path):
    state = [tenant("root", quotas=None), pod("tenant-root", "p", {"cpu": "6"}), tenant("a", quotas={"cpu": 3})]
    code, answer = run_check_json(tmp_path, state, tenant("root", quotas={"cpu": 8}))
    assert code == 1 and "used and carved out 9 (limits.cpu)" in answer["reasons"][0]["message"]
    assert run_check_json(tmp_path, state, tenant("root", quotas={"cpu": 9}))[0] == 0


# -- R2: an update that stops a tenant being a pool root ------------------------------

def _r2_state() -> list[dict]:
    return [*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={"cpu": 2}),
            vm("tenant-a-b", "v", [{"class": "a100", "count": 10}])]


@pytest.mark.parametrize("quotas", [{}, None], ids=["empty-map", "no-map"])
def test_r2_dropping_the_only_key_returns_reservations_to_the_parent_pool(tmp_path, quotas):
    result = run_check(tmp_path, _r2_state(), tenant("b", "tenant-a", quotas=quotas), "-o", "text")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[0] == "refused"
    assert ("spec.resourceQuotas: Forbidden: declaring no quotas returns the tenant's pool to pool tenant-a, "
            f"which it would take over its GPU budget {A100!r}: rejoining 10") in result.output
    assert "budget 4, reserved 0, carved out 0 (10 > 4)" in result.output


def test_r2_dropping_keys_is_admitted_when_the_pool_fits(tmp_path):
    state = _r2_state()
    state[-1] = vm("tenant-a-b", "v", [{"class": "a100", "count": 4}])
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={}))[0] == 0
    # a tenant whose pool holds nothing is never refused for leaving it
    assert run_check_json(tmp_path, _r2_state()[:-1], tenant("b", "tenant-a", quotas={}))[0] == 0


def test_r2_a_carving_tenant_dropping_its_keys_is_charged_what_its_pool_holds(tmp_path):
    # b caps only H100, so its pool's A100s (3 reserved, and c's carve-out of 1)
    # count against no key of a until b drops its keys: then all 4 rejoin.
    state = [*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={H100: 3}),
             vm("tenant-a-b", "v", [{"class": "a100", "count": 3}]), tenant("c", "tenant-a-b", quotas={A100: 1}),
             vm("tenant-a", "w", [{"class": "a100", "count": 1}])]
    code, answer = run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={}))
    assert code == 1 and "rejoining 4" in answer["reasons"][0]["message"]
    # b capping A100 at 3 while its pool holds 4 is already charged 4 (issue 11 item 1): a is
    # over in the state, and dropping b's keys adds nothing to it.
    state[3] = tenant("b", "tenant-a", quotas={A100: 3})
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={}))[0] == 0
    assert "budget 4, reserved 1, carved out 0 (5 > 4)" in answer["reasons"][0]["message"]
    assert run_check_json(tmp_path, state[:-1], tenant("b", "tenant-a", quotas={}))[0] == 0


def test_r2_dropping_ordinary_keys_returns_usage_to_the_parent_ordinary_pool(tmp_path):
    # b declares cpu only: its memory use is in no pool until it drops cpu.
    state = [tenant("a", quotas={"cpu": 10, "memory": "4Gi"}), tenant("b", "tenant-a", quotas={"cpu": 2}),
             pod("tenant-a-b", "p", {"cpu": "1", "memory": "6Gi"})]
    code, answer = run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={A100: 1}))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == "spec.resourceQuotas"
    assert "over 'memory': rejoining 6Gi (limits.memory" in reason["message"]
    assert "budget 4Gi, used 0, carved out 0 (6Gi > 4Gi)" in reason["message"]
    # cpu rejoins too, but 1 is less than the 2 it was charged: no reason for cpu
    state[-1] = pod("tenant-a-b", "p", {"cpu": "1", "memory": "3Gi"})
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={A100: 1}))[0] == 0


def test_r2_the_audit_after_an_admitted_drop_is_clean(tmp_path):
    state = _r2_state()
    state[-1] = vm("tenant-a-b", "v", [{"class": "a100", "count": 4}])
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={}))[0] == 0
    state[3] = tenant("b", "tenant-a", quotas={})
    code, findings = run_check_json(tmp_path, state)
    assert (code, findings) == (0, [])


# -- R3: an ordinary value must cover the tenant's own usage ---------------------------

def _r3_state(c_quotas: dict) -> list[dict]:
    return [tenant("a", quotas={"cpu": 10}), tenant("c", "tenant-a", quotas=c_quotas),
            pod("tenant-a-c", "p1", {"cpu": "8"})]


def test_r3_declaring_cpu_below_the_subtrees_usage_is_refused(tmp_path):
    code, answer = run_check_json(tmp_path, _r3_state({ALL: 2}), tenant("c", "tenant-a", quotas={"cpu": 3, ALL: 2}))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == 'spec.resourceQuotas["cpu"]'
    assert reason["message"] == ("Forbidden: below what the tenant's own subtree already uses of 'cpu': "
                                 "requested 3, used and carved out 8 (limits.cpu)")
    assert run_check_json(tmp_path, _r3_state({ALL: 2}), tenant("c", "tenant-a", quotas={"cpu": 8, ALL: 2}))[0] == 0


def test_r3_sub_tenants_carve_outs_count_as_used(tmp_path):
    state = [tenant("a", quotas={"cpu": 10}), tenant("c", "tenant-a"), tenant("d", "tenant-a-c", quotas={"cpu": 5}),
             pod("tenant-a-c", "p", {"cpu": "2"})]
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 6}))[0] == 1
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 7}))[0] == 0


def test_r3_changed_values_are_checked_unchanged_ones_are_not(tmp_path):
    state = _r3_state({"cpu": 3})  # already below its usage (lowered by its parent, say)
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 3, A100: 0}))[0] == 0
    # raising it never makes things worse than keeping it (issue 11 item 9)
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 4}))[0] == 0
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 8}))[0] == 0
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 2}))[0] == 1  # lowering is checked


def test_r3b_a_sibling_counts_what_an_over_using_tenant_really_holds(tmp_path):
    # The state R3 used to admit: c declares 3 but holds 8, so only 2 are left for a sibling.
    code, answer = run_check_json(tmp_path, _r3_state({"cpu": 3, ALL: 2}), tenant("d", "tenant-a", quotas={"cpu": 7}))
    assert code == 1
    assert "requested 7, budget 10, carved out 8, used 0 (limits.cpu) (available 2)" in answer["reasons"][0]["message"]
    assert run_check_json(tmp_path, _r3_state({"cpu": 3, ALL: 2}), tenant("d", "tenant-a", quotas={"cpu": 2}))[0] == 0
    # and as the sequence goes now: R3's write is refused, c stays in a's pool, the sibling gets 2
    assert run_check_json(tmp_path, _r3_state({ALL: 2}), tenant("d", "tenant-a", quotas={"cpu": 7}))[0] == 1


# -- R5: keys compared by the quota key they render to ---------------------------------

@pytest.mark.parametrize("parent_key,child_key,budget,ask", [
    ("cpu", "limits.cpu", "10", "100"),
    ("limits.cpu", "cpu", "10", "100"),
    ("storage", "requests.storage", "100Gi", "1Ti"),
    ("memory", "limits.memory", "10Gi", "11Gi"),
])
def test_r5_aliases_are_one_key(tmp_path, parent_key, child_key, budget, ask):
    state = [tenant("a", quotas={parent_key: budget})]
    code, answer = run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={child_key: ask}))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == f'spec.resourceQuotas["{child_key}"]'
    assert f"declared as {parent_key!r} there" in reason["message"]


def test_r5_sibling_charges_and_usage_add_up_across_spellings(tmp_path):
    state = [tenant("a", quotas={"cpu": 10}), tenant("b", "tenant-a", quotas={"limits.cpu": 6}),
             pod("tenant-a", "p", {"cpu": "2"})]
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"cpu": 3}))[0] == 1
    assert run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={"limits.cpu": "2"}))[0] == 0
    state.append(tenant("c", "tenant-a", quotas={"cpu": 3}))  # over: the audit sees it under one key
    code, findings = run_check_json(tmp_path, state)
    assert code == 1 and findings[0]["message"] == (
        "pool tenant-a of Tenant tenant-root/a is over 'cpu': used 2 (limits.cpu) + carved out 9 = 11 > 10; "
        "carved out by Tenant tenant-a/b 6, Tenant tenant-a/c 3")


def test_r5_two_spellings_of_one_key_in_a_declaration_are_refused(tmp_path):
    code, answer = run_check_json(tmp_path, [], tenant("b", quotas={"cpu": 4, "limits.cpu": 8}))
    assert code == 1
    assert answer["reasons"][0] == {
        "field": 'spec.resourceQuotas["limits.cpu"]',
        "message": "Invalid: 'limits.cpu' renders to the same quota key as 'cpu' (limits.cpu)",
    }


# -- R6: readable byte figures ------------------------------------------------------------

def test_r6_memory_figures_are_readable_in_messages_and_exact_in_json_numbers(tmp_path):
    state = [tenant("a", quotas={"memory": "10Gi"}), pod("tenant-a", "p", {"memory": "6465Mi"})]
    result = run_check(tmp_path, state, tenant("b", "tenant-a", quotas={"memory": "4Gi"}))
    assert result.exit_code == 1
    assert ("requested 4Gi, budget 10Gi, carved out 0, used 6465Mi (limits.memory) (available 3775Mi)"
            in result.output)
    state.append(tenant("b", "tenant-a", quotas={"memory": "4Gi"}))
    code, findings = run_check_json(tmp_path, state)
    assert code == 1
    assert findings[0]["message"] == ("pool tenant-a of Tenant tenant-root/a is over 'memory': used 6465Mi "
                                      "(limits.memory) + carved out 4Gi = 10561Mi > 10Gi; carved out by Tenant tenant-a/b 4Gi")
    assert findings[0]["numbers"] == {"budget": "10737418240", "used": "6779043840", "carvedOut": "4294967296"}


def test_r6_counts_and_cpu_keep_plain_figures(tmp_path):
    state = [tenant("a", quotas={"cpu": 2048, "pods": 1024}), quota("tenant-a", "q", {"limits.cpu": "2", "pods": "4"})]
    code, answer = run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 4000, "pods": 2000}))
    assert code == 1
    messages = " ".join(r["message"] for r in answer["reasons"])
    assert "requested 4000, budget 2048" in messages and "requested 2000, budget 1024" in messages
