"""Unit tests, one rule at a time: namespace naming, pool roots in both
senses, charges, reservations, ordinary usage, growth, the gate's subtree
exclusion, the audit, and the library's input errors."""

from __future__ import annotations

from fractions import Fraction

import pytest
from test_budgets_builders import classes, nodes, pod, quota, tenant, vm

from cozyrender.budgets import (
    BudgetInputError,
    audit,
    budget_charge,
    check_tenant_declaration,
    check_write,
    growth,
    index_state,
    parse_declaration,
    parse_workload,
)
from cozyrender.namespaces import ancestors, owned_namespace, parent_namespace
from cozyrender.budgets.usage import pod_usage, quota_usage, usage_key
from cozyrender.keys import BudgetKey

ALL = "gpuclass.cozystack.io/devices"
A100 = "a100.gpuclass.cozystack.io/devices"
H100 = "h100.gpuclass.cozystack.io/devices"


# -- the tree -------------------------------------------------------------------

def test_namespace_naming():
    assert owned_namespace("a", "tenant-root") == "tenant-a"
    assert owned_namespace("b", "tenant-a") == "tenant-a-b"
    assert owned_namespace("root", "tenant-root") == "tenant-root"
    assert parent_namespace("tenant-a-b") == "tenant-a"
    assert parent_namespace("tenant-a") == "tenant-root"
    assert parent_namespace("tenant-root") is None
    assert parent_namespace("kube-system") is None
    assert list(ancestors("tenant-a-b")) == ["tenant-a-b", "tenant-a", "tenant-root"]
    assert list(ancestors("cozy-system")) == []


# -- pool roots -------------------------------------------------------------------

def test_gpu_only_tenant_is_a_budget_root_but_not_an_ordinary_root():
    state = index_state([tenant("a", quotas={"cpu": 1}), tenant("c", "tenant-a", quotas={ALL: 2})])
    assert state.budget_root("tenant-a-c-x") == "tenant-a-c"
    assert state.ordinary_root("tenant-a-c-x") == "tenant-a"


def test_cpu_only_tenant_is_a_budget_root_with_no_budget():
    state = index_state([tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={"cpu": 2})])
    assert state.budget_root("tenant-a-b") == "tenant-a-b"
    assert state.charges.get("tenant-a", {}) == {}


def test_empty_quota_map_makes_no_root():
    state = index_state([tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={})])
    assert state.budget_root("tenant-a-b") == "tenant-a"


# -- charges --------------------------------------------------------------------

@pytest.mark.parametrize("declared,key,charge", [
    ({A100: 3}, A100, 3),
    ({A100: 3}, H100, 0),
    ({A100: 3, H100: 2}, ALL, 5),         # class-less: the sum of class-scoped values
    ({A100: 3, H100: 2, ALL: 4}, ALL, 4),  # ...or its own class-less value, never both
    ({ALL: 4}, A100, 4),                   # it may spend it on any class (issue 11 item 2)
])
def test_budget_charge(declared, key, charge):
    declaration = parse_declaration(tenant("b", "tenant-a", quotas=declared))
    from cozyrender.keys import parse_budget_key

    assert budget_charge(declaration, parse_budget_key(key)) == charge


def test_charges_go_to_the_parents_nearest_pool_root():
    state = index_state([
        tenant("a", quotas={ALL: 10}), tenant("b", "tenant-a"), tenant("c", "tenant-a-b", quotas={A100: 3}),
    ])
    charge = state.charges["tenant-a"]
    assert (charge.for_key(BudgetKey("a100")), charge.for_key(BudgetKey(None)), charge.for_key(BudgetKey("h100"))) == (3, 3, 0)


# -- reservations -------------------------------------------------------------------

def test_reservations():
    assert parse_workload(vm("ns", "v", [{"class": "a100"}, {"class": "a100", "count": 2}])).reservations == {"a100": 3}
    assert parse_workload(vm("ns", "v", [{"name": "nvidia.com/GA102"}])).reservations == {}
    pool = parse_workload(nodes("ns", "p", [{"class": "a100", "count": 2}], max_replicas=3))
    assert pool.reservations == {"a100": 6}


@pytest.mark.parametrize("obj,why", [
    (vm("ns", "v", [{"class": "a100", "count": -1}]), "spec.gpus[0].count"),
    (vm("ns", "v", [{"class": "a100", "count": 1.5}]), "spec.gpus[0].count"),
    (vm("ns", "v", [{"class": "a100", "count": "500m"}]), "spec.gpus[0].count"),
    # Issue 19 item 4: integers, as the apps' schemas type them; never a string read as a number.
    (vm("ns", "v", [{"class": "a100", "count": "2"}]), "spec.gpus[0].count is not an integer .got '2'."),
    (vm("ns", "v", [{"class": "a100", "count": 2.0}]), "spec.gpus[0].count is not an integer .got 2.0."),
    (vm("ns", "v", [{"class": "a100", "count": True}]), "spec.gpus[0].count is not an integer .got True."),
    (nodes("ns", "p", [{"class": "a100", "count": 2}], max_replicas="3"), "spec.maxReplicas is not an integer"),
    (nodes("ns", "p", [{"class": "a100"}], max_replicas=3, minReplicas="1"), "spec.minReplicas is not an integer"),
    (nodes("ns", "p", [], max_replicas="3"), "spec.maxReplicas is not an integer"),
    (vm("ns", "v", [{"count": 1}]), "neither a class nor a device name"),
    (vm("ns", "v", [{"class": "A100"}]), "DNS-1123"),
    (nodes("ns", "p", [{"class": "a100"}], max_replicas=None), "spec.maxReplicas is required"),
    (nodes("ns", "p", [{"class": "a100"}], max_replicas=-2), "spec.maxReplicas"),
    ({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "VMInstance", "metadata": {"name": "v"}}, "metadata.namespace"),
])
def test_unreadable_workloads(obj, why):
    with pytest.raises(BudgetInputError, match=why.replace("[", r"\[").replace("]", r"\]")):
        parse_workload(obj)


def test_growth_is_per_class_and_never_negative():
    old = parse_workload(vm("ns", "v", [{"class": "a100", "count": 3}]))
    new = parse_workload(vm("ns", "v", [{"class": "a100", "count": 1}, {"class": "h100", "count": 2}]))
    assert growth(new, old) == {"h100": 2}
    assert growth(old, None) == {"a100": 3}


def test_worker_pool_growth_by_replicas_names_max_replicas():
    state = index_state([*classes(), tenant("a", quotas={A100: 4}), nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=2)])
    decision = check_write(state, nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=5))
    assert not decision.allowed and decision.reasons[0].field == "spec.maxReplicas"


def test_moving_devices_between_classes_checks_the_class_less_key():
    state = index_state([*classes(), tenant("a", quotas={ALL: 4}), vm("tenant-a", "v", [{"class": "a100", "count": 4}])])
    assert check_write(state, vm("tenant-a", "v", [{"class": "h100", "count": 4}])).allowed
    assert not check_write(state, vm("tenant-a", "v", [{"class": "h100", "count": 5}])).allowed


def test_no_pool_root_or_no_covering_key_means_no_budget():
    assert check_write(index_state(classes()), vm("tenant-a", "v", [{"class": "a100", "count": 99}])).allowed
    state = index_state([*classes(), tenant("a", quotas={A100: 1})])
    assert check_write(state, vm("tenant-a", "v", [{"class": "h100", "count": 99}])).allowed


def test_workload_deep_in_a_pool_counts_against_its_root():
    state = index_state([*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a"),
                         vm("tenant-a-b", "v", [{"class": "a100", "count": 3}])])
    assert not check_write(state, vm("tenant-a", "w", [{"class": "a100", "count": 2}])).allowed


# -- ordinary usage -----------------------------------------------------------------

def test_usage_keys():
    assert usage_key("cpu") == "limits.cpu"
    assert usage_key("memory") == "limits.memory"
    assert usage_key("storage") == "requests.storage"
    assert usage_key("pods") == "pods"
    assert usage_key("count/deployments.apps") == "count/deployments.apps"
    assert usage_key("requests.cpu") == "requests.cpu"
    assert usage_key("nvidia.com/gpu") == "limits.nvidia.com/gpu"
    assert usage_key("hugepages-2Mi") == "limits.hugepages-2Mi"


def test_quota_usage_takes_the_largest_across_quotas():
    used = quota_usage([quota("n", "q1", {"limits.cpu": "2"}), quota("n", "q2", {"limits.cpu": "3500m", "pods": "4"})])
    assert used == {"limits.cpu": Fraction(7, 2), "pods": 4}


def test_pod_usage_counts_init_containers_sidecars_overhead_extended_and_hugepages():
    busy = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "overhead": {"cpu": "100m"},
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
                {"name": "init", "resources": {"limits": {"cpu": "3"}}},
            ],
            "containers": [{"name": "m", "resources": {"limits": {
                "cpu": "1", "nvidia.com/gpu": "1", "hugepages-2Mi": "64Mi", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }
    used = pod_usage([busy, pod("n", "done", {"cpu": "9"}, phase="Succeeded")])
    # max(app 1 + sidecar 1, init 3 + sidecar 1) + overhead
    assert used["limits.cpu"] == Fraction(41, 10)
    assert used["limits.nvidia.com/gpu"] == 1 and used["limits.hugepages-2Mi"] == 64 * 2**20
    assert used["requests.cpu"] == Fraction(41, 10)  # requests default to limits
    assert used["pods"] == 1


def test_quota_wins_over_pods_and_pods_fill_keys_no_quota_tracks():
    state = index_state([
        tenant("a", quotas={"cpu": 10, "memory": "10Gi"}),
        quota("tenant-a", "q", {"limits.cpu": "5"}),
        pod("tenant-a", "p", {"cpu": "1", "memory": "1Gi"}),
    ])
    assert state.pool_usage["tenant-a"] == {"limits.cpu": 5, "limits.memory": 2**30}


def test_namespaces_outside_the_tenant_tree_are_in_no_pool():
    state = index_state([tenant("root", quotas={"cpu": 1}), pod("kube-system", "p", {"cpu": "50"})])
    assert state.pool_usage.get("tenant-root", {}).get("limits.cpu", 0) == 0


# -- the declaration gate ---------------------------------------------------------------

def test_gate_counts_siblings_and_pool_reservations():
    state = index_state([
        tenant("a", quotas={A100: 6}), tenant("b", "tenant-a", quotas={A100: 2}),
        vm("tenant-a", "v", [{"class": "a100", "count": 3}]),
    ])
    assert check_write(state, tenant("c", "tenant-a", quotas={A100: 1})).allowed
    decision = check_write(state, tenant("c", "tenant-a", quotas={A100: 2}))
    assert [r.field for r in decision.reasons] == [f'spec.resourceQuotas["{A100}"]']
    assert "requested 2, budget 6, carved out 2, reserved 3 (available 1)" in decision.reasons[0].message


def test_gate_checks_the_class_less_key_for_a_class_scoped_declaration():
    state = index_state([tenant("a", quotas={ALL: 4, A100: 10})])
    decision = check_write(state, tenant("b", "tenant-a", quotas={A100: 5}))
    assert [m.message.split(" of ")[1].split(":")[0] for m in decision.reasons] == [f"{ALL!r}"]


def test_gate_against_the_pool_root_when_the_direct_parent_declares_nothing():
    state = index_state([tenant("a", quotas={A100: 4}), tenant("b", "tenant-a")])
    assert not check_write(state, tenant("c", "tenant-a-b", quotas={A100: 5})).allowed


def test_gate_update_excludes_the_tenants_own_subtree():
    # b holds 3 devices through its VM; declaring a100: 3 moves them out of
    # a's pool and charges 3 instead: admitted, not double counted.
    state = index_state([
        tenant("a", quotas={A100: 4}), tenant("b", "tenant-a"),
        vm("tenant-a-b", "v", [{"class": "a100", "count": 3}]),
    ])
    assert check_write(state, tenant("b", "tenant-a", quotas={A100: 3})).allowed
    assert check_write(state, tenant("b", "tenant-a", quotas={A100: 4})).allowed
    assert not check_write(state, tenant("b", "tenant-a", quotas={A100: 5})).allowed


def test_gate_refuses_a_new_budget_below_what_the_subtree_holds():
    state = index_state([tenant("b", "tenant-root"), vm("tenant-b", "v", [{"class": "a100", "count": 3}])])
    decision = check_write(state, tenant("b", "tenant-root", quotas={A100: 2}))
    assert not decision.allowed and "reserved 3" in decision.reasons[0].message


def test_gate_update_of_an_unchanged_carving_tenant():
    state = index_state([tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={A100: 4})])
    assert check_write(state, tenant("b", "tenant-a", quotas={A100: 4})).allowed


def test_gate_refuses_invalid_values_and_dashed_names():
    state = index_state([tenant("a", quotas={"cpu": 4})])
    decision = check_write(state, tenant("b", "tenant-a", quotas={A100: "1.5", "cpu": "lots"}))
    assert sorted(r.field for r in decision.reasons) == [f'spec.resourceQuotas["{A100}"]', 'spec.resourceQuotas["cpu"]']
    # A name outside Cozystack's grammar is bad input (issue 11 item 10), through the dispatcher
    # and the exported gate alike.
    for name in ("b-c", "B", "1b", "b_c"):
        with pytest.raises(BudgetInputError, match="metadata.name .* is not a tenant name"):
            check_write(state, tenant(name, "tenant-a"))
        with pytest.raises(BudgetInputError, match="is not a tenant name"):
            check_tenant_declaration(state, tenant(name, "tenant-a"))


def test_root_tenant_has_nothing_above_it():
    assert check_write(index_state([]), tenant("root", quotas={A100: 1, "cpu": 1})).allowed


# -- the state --------------------------------------------------------------------

def test_identical_duplicates_are_fine_and_different_ones_are_an_error():
    one = tenant("a", quotas={A100: 1})
    assert index_state([one, dict(one)]).declarations["tenant-a"].budgets == {BudgetKey("a100"): 1}
    with pytest.raises(BudgetInputError, match="two different copies of one object"):
        index_state([one, tenant("a", quotas={A100: 2})])


def test_a_dashed_tenant_name_in_the_state_is_an_error():
    # (it was how two Tenants could own one namespace: `a-b` in tenant-root and `b` in tenant-a)
    with pytest.raises(BudgetInputError, match="is not a tenant name"):
        index_state([tenant("a-b"), tenant("b", "tenant-a")])


def test_unknown_kind_is_an_input_error():
    with pytest.raises(BudgetInputError, match="cannot check this kind"):
        check_write(index_state([]), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


# -- the audit ----------------------------------------------------------------------

def test_audit_reports_over_committed_pools_with_numbers():
    state = index_state([
        tenant("a", quotas={A100: 2, "cpu": 1}), tenant("b", "tenant-a", quotas={A100: 1}),
        vm("tenant-a", "v", [{"class": "a100", "count": 3}]), pod("tenant-a", "p", {"cpu": "2"}),
    ])
    findings = [f for f in audit(state) if f.severity == "error"]
    assert {(f.namespace, f.field) for f in findings} == {
        ("tenant-a", f'spec.resourceQuotas["{A100}"]'), ("tenant-a", 'spec.resourceQuotas["cpu"]')}
    gpu = next(f for f in findings if A100 in f.field)
    assert dict(gpu.numbers) == {"budget": "2", "reserved": "3", "carvedOut": "1"}


def test_audit_warns_about_class_scoped_child_under_class_less_budget():
    state = index_state([tenant("a", quotas={ALL: 8}), tenant("b", "tenant-a", quotas={A100: 6})])
    [warning] = audit(state)
    assert warning.kind == "escapes-budget" and "classes it declares no budget for" in warning.message


def test_audit_reports_malformed_declarations():
    state = index_state([tenant("a", quotas={"A100.gpuclass.cozystack.io/devices": 1})])
    [finding] = audit(state)
    assert finding.severity == "error" and finding.kind == "invalid-declaration"


def test_unchanged_tenant_update_under_an_over_committed_pool_is_refused():
    # The parent lowered a's budget below b's carve-out: re-applying b as it is
    # is refused until the pool fits again (the gate checks every declared key).
    state = index_state([tenant("a", quotas={A100: 2}), tenant("b", "tenant-a", quotas={A100: 4})])
    assert not check_write(state, tenant("b", "tenant-a", quotas={A100: 4})).allowed
    assert check_write(state, tenant("b", "tenant-a", quotas={A100: 2})).allowed


def test_a_malformed_object_in_the_state_is_a_budget_input_error_naming_it():
    # The library's one error type: a platform's admission code catches BudgetInputError.
    from test_budgets_builders import pod, quota

    bad_pod = pod("tenant-a", "p", {"cpu": "1"})
    bad_pod["spec"]["containers"] = 5
    with pytest.raises(BudgetInputError, match=r"^Pod tenant-a/p: spec\.containers is not a list \(got 5\)$"):
        index_state([tenant("a", quotas={"cpu": 1}), bad_pod])
    with pytest.raises(BudgetInputError, match=r"^ResourceQuota tenant-a/q: status\.used\.limits\.cpu is not a Kubernetes"):
        index_state([tenant("a", quotas={"cpu": 1}), quota("tenant-a", "q", {"limits.cpu": "lots"})])
    with pytest.raises(BudgetInputError, match=r"^Tenant: metadata is not an object"):
        index_state([{"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant", "metadata": 5}])
