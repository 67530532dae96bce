"""The Kubernetes kind (apps.cozystack.io/v1alpha1, plural kuberneteses):
each node group of `spec.nodeGroups` is a worker pool reserving count times
its maxReplicas per class, as a KubernetesNodes pool does; growth on update
is per class over the whole cluster; reasons name the group's field. Shapes
as Cozystack's `packages/apps/kubernetes/values.schema.json` (3c780acd)
types them: `nodeGroups` a map of groups, `minReplicas`/`maxReplicas`
integers, `gpus` a list (the class entries are this project's)."""

from __future__ import annotations

import pytest
from test_budgets_builders import classes, kubernetes, node_group, nodes, run_check, run_check_json, tenant, vm

from cozyrender.budgets import BudgetInputError, audit, check_write, growth, index_state, parse_workload

A100 = "a100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"


def cluster(groups: dict, name: str = "k", namespace: str = "tenant-a") -> dict:
    return kubernetes(namespace, name, groups)


def test_each_node_group_reserves_count_times_its_max_replicas():
    workload = parse_workload(cluster({
        "md0": node_group([{"class": "a100", "count": 2}], max_replicas=3),
        "md1": node_group([{"class": "a100"}, {"class": "h100", "count": 1}], max_replicas=2),
        "cpu": node_group(max_replicas=10),
        "plugin": node_group([{"name": "nvidia.com/GA102"}], max_replicas=4),
    }))
    assert workload.reservations == {"a100": 8, "h100": 2}
    assert [e.path for e in workload.entries] == [
        "spec.nodeGroups.md0.gpus[0]", "spec.nodeGroups.md1.gpus[0]", "spec.nodeGroups.md1.gpus[1]"]
    assert workload.raw_names == (("spec.nodeGroups.plugin.gpus[0]", "nvidia.com/GA102"),)
    assert parse_workload(kubernetes("tenant-a", "k", {})).reservations == {}
    assert parse_workload({**kubernetes("tenant-a", "k", {}), "spec": {}}).reservations == {}


@pytest.mark.parametrize("obj,why", [
    (cluster({"md0": node_group([{"class": "a100"}], max_replicas=None)}), "spec.nodeGroups.md0.maxReplicas is required"),
    (cluster({"md0": node_group([{"class": "a100"}], max_replicas=-2)}), "spec.nodeGroups.md0.maxReplicas"),
    (cluster({"md0": node_group([{"class": "a100", "count": -1}])}), r"spec.nodeGroups.md0.gpus\[0\].count"),
    (cluster({"md0": node_group([{"count": 1}])}), "neither a class nor a device name"),
    (cluster({"md0": node_group([{"class": "A100"}])}), "DNS-1123"),
    (cluster({"md0": node_group("a100")}), "spec.nodeGroups.md0.gpus is not a list"),
    (cluster({"md0": ["a100"]}), "spec.nodeGroups.md0 is not an object"),
    (kubernetes("tenant-a", "k", ["md0"]), "spec.nodeGroups"),
    (cluster({"md0": node_group([{"class": "a100"}], max_replicas=2**40)}), "maxReplicas is too large"),
])
def test_unreadable_clusters(obj, why):
    with pytest.raises(BudgetInputError, match=why):
        parse_workload(obj)


def test_a_cluster_is_checked_against_its_pool_like_a_worker_pool():
    state = index_state([*classes(), tenant("a", quotas={A100: 4}), vm("tenant-a", "vm1", [{"class": "a100", "count": 3}])])
    fits = cluster({"md0": node_group([{"class": "a100"}], max_replicas=1)})
    assert check_write(state, fits).allowed
    over = cluster({"md0": node_group(max_replicas=5), "md1": node_group([{"class": "a100", "count": 1}], max_replicas=2)})
    decision = check_write(state, over)
    assert not decision.allowed
    [reason] = decision.reasons
    assert reason.field == "spec.nodeGroups.md1.gpus[0].count"
    assert "requested 2, reserved 3, carved out 0, budget 4" in reason.message


def test_growth_is_per_class_over_the_whole_cluster():
    old = parse_workload(cluster({"md0": node_group([{"class": "a100", "count": 2}], max_replicas=2)}))
    moved = parse_workload(cluster({"md0": node_group(max_replicas=2),
                                    "md1": node_group([{"class": "a100", "count": 1}], max_replicas=4)}))
    assert growth(moved, old) == {}  # 4 devices moved from one group to another: no growth
    grown = parse_workload(cluster({"md0": node_group([{"class": "a100", "count": 2}], max_replicas=2),
                                    "md1": node_group([{"class": "h100"}], max_replicas=1)}))
    assert growth(grown, old) == {"h100": 1}
    state = index_state([*classes(), tenant("a", quotas={A100: 4}), cluster({"md0": node_group([{"class": "a100", "count": 2}], max_replicas=2)})])
    assert check_write(state, cluster({"md0": node_group(max_replicas=2),
                                       "md1": node_group([{"class": "a100", "count": 1}], max_replicas=4)})).allowed


def test_growth_by_a_groups_replicas_names_its_max_replicas():
    state = index_state([*classes(), tenant("a", quotas={A100: 4}),
                         cluster({"md0": node_group([{"class": "a100"}], max_replicas=2), "md1": node_group(max_replicas=1)})])
    decision = check_write(state, cluster({"md0": node_group([{"class": "a100"}], max_replicas=5), "md1": node_group(max_replicas=1)}))
    assert not decision.allowed and decision.reasons[0].field == "spec.nodeGroups.md0.maxReplicas"
    decision = check_write(state, cluster({"md0": node_group([{"class": "a100", "count": 3}], max_replicas=2), "md1": node_group(max_replicas=1)}))
    assert not decision.allowed and decision.reasons[0].field == "spec.nodeGroups.md0.gpus[0].count"


def test_a_shrinking_cluster_is_admitted_over_a_lowered_budget():
    state = index_state([*classes(), tenant("a", quotas={A100: 1}),
                         cluster({"md0": node_group([{"class": "a100"}], max_replicas=3)})])
    assert check_write(state, cluster({"md0": node_group([{"class": "a100"}], max_replicas=2)})).allowed
    assert not check_write(state, cluster({"md0": node_group([{"class": "a100"}], max_replicas=4)})).allowed


def test_a_cluster_counts_in_its_pool_for_every_other_write_and_the_audit():
    k8s = cluster({"md0": node_group([{"class": "a100", "count": 2}], max_replicas=2)})
    state = index_state([*classes(), tenant("a", quotas={ALL: 5}), k8s])
    assert state.pool_reserved["tenant-a"] == {"a100": 4}
    assert not check_write(state, vm("tenant-a", "v", [{"class": "h100", "count": 2}])).allowed
    assert not check_write(state, nodes("tenant-a", "p", [{"class": "h100"}], max_replicas=2)).allowed
    assert not check_write(state, tenant("b", "tenant-a", quotas={ALL: 2})).allowed
    findings = audit(index_state([*classes(), tenant("a", quotas={ALL: 3}), k8s]))
    assert [(f.kind, f.namespace) for f in findings] == [("over-committed", "tenant-a")]


def test_min_above_max_in_a_group_is_refused_naming_it(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 8})]
    inverted = cluster({"md0": node_group([{"class": "a100"}], max_replicas=2, minReplicas=3)})
    code, answer = run_check_json(tmp_path, state, inverted)
    assert code == 1 and answer["reasons"][0] == {
        "field": "spec.nodeGroups.md0.minReplicas",
        "message": "Invalid: spec.nodeGroups.md0.minReplicas 3 is more than spec.nodeGroups.md0.maxReplicas 2"}
    code, findings = run_check_json(tmp_path, state + [inverted])
    assert code == 1 and [(f["kind"], f["field"]) for f in findings] == [
        ("invalid-workload", "Kubernetes k: spec.nodeGroups.md0.minReplicas")]


def test_class_and_device_name_rules_name_the_groups_field(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 8})]
    code, answer = run_check_json(tmp_path, state, cluster({"md0": node_group([{"class": "b200"}])}))
    assert code == 1 and answer["reasons"][0]["field"] == "spec.nodeGroups.md0.gpus[0].class"
    code, answer = run_check_json(tmp_path, state, cluster({"md0": node_group([{"name": "nvidia.com/a100"}])}))
    assert code == 1 and answer["reasons"][0]["field"] == "spec.nodeGroups.md0.gpus[0].name"
    code, answer = run_check_json(tmp_path, state, cluster({"md0": node_group([{"class": "a100", "name": "nvidia.com/h100"}])}))
    assert code == 1 and answer["reasons"][0]["field"] == "spec.nodeGroups.md0.gpus[0].name"
    code, answer = run_check_json(tmp_path, state, cluster({"md0": node_group([{"class": "a100", "count": 4}], max_replicas=2)}))
    assert (code, answer["allowed"]) == (0, True)
    code, answer = run_check_json(tmp_path, state, cluster({"md0": node_group([{"class": "a100", "count": 3}], max_replicas=3)}))
    assert code == 1 and answer["reasons"][0]["field"] == "spec.nodeGroups.md0.gpus[0].count"


def test_a_string_count_or_replica_number_is_refused_as_the_schema_does(tmp_path):
    """Issue 19 item 4, for node groups and through the command: `count: "2"`
    is bad input naming the field, in the state and in the write."""
    state = [*classes(), tenant("a", quotas={A100: 8})]
    for write, field in (
        (cluster({"md0": node_group([{"class": "a100", "count": "2"}])}), "spec.nodeGroups.md0.gpus[0].count"),
        (cluster({"md0": node_group([{"class": "a100"}], max_replicas="2")}), "spec.nodeGroups.md0.maxReplicas"),
        (vm("tenant-a", "v", [{"class": "a100", "count": "2"}]), "spec.gpus[0].count"),
        (nodes("tenant-a", "p", [{"class": "a100"}], max_replicas="2"), "spec.maxReplicas"),
    ):
        for result in (run_check(tmp_path, state, write), run_check(tmp_path, state + [write])):
            assert result.exit_code == 2, result.output
            assert f"{field} is not an integer" in result.output
