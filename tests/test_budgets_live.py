"""The live index (issue 16: "a watch event updates the index in time
proportional to the objects it touches, never a full re-index"): after any
sequence of upserts and removes, `live.state` equals
`index_state(live.objects())` field by field, every check and the audit
answer the same on both, and an event the rules cannot read raises exactly
when `index_state` would and changes nothing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_budgets_builders import gpuclass, kubernetes, node_group, nodes, pod, quota, tenant, vm

from cozyrender.budgets import BudgetInputError, audit, check_write, index_state
from cozyrender.budgets.live import LiveIndex
from cozyrender.namespaces import ROOT_NAMESPACE

BUDGET_KEYS = ("gpuclass.cozystack.io/devices", "a100.gpuclass.cozystack.io/devices", "h100.gpuclass.cozystack.io/devices")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PATHS = [(), ("a",), ("a", "b"), ("a", "b", "a"), ("b",)]


def namespace_of(path: tuple[str, ...]) -> str:
    namespace = ROOT_NAMESPACE
    for name in path:
        namespace = "tenant-" + name if namespace == ROOT_NAMESPACE else f"{namespace}-{name}"
    return namespace


def tenant_at(path: tuple[str, ...], quotas: dict, vgpu: bool | None = None) -> dict:
    if not path:
        return tenant("root", ROOT_NAMESPACE, quotas=quotas, vgpu=vgpu)
    return tenant(path[-1], namespace_of(path[:-1]), quotas=quotas, vgpu=vgpu)


tree_namespaces = st.sampled_from([namespace_of(p) for p in PATHS])
namespaces = st.one_of(tree_namespaces, tree_namespaces, tree_namespaces, st.sampled_from(["kube-system", "tenant--x"]))
quota_maps = st.dictionaries(
    st.sampled_from(BUDGET_KEYS + ("cpu", "memory", "A100.gpuclass.cozystack.io/devices")),
    st.one_of(st.integers(0, 3), st.integers(0, 3), st.just("1.5"), st.just("2Gi")), max_size=3)
entries = st.one_of(
    st.fixed_dictionaries({"class": st.sampled_from(["a100", "h100"]), "count": st.integers(0, 3)}),
    st.fixed_dictionaries({"class": st.sampled_from(["a100", "h100"]), "count": st.integers(0, 3)}),
    st.fixed_dictionaries({"name": st.just("vendor.example/fpga")}),
)


def values_secret(vgpu: bool | None, nest: bool = False) -> dict:
    text = "_cluster: {}\n" if vgpu is None else f"_cluster:\n  gpu-vgpu: {str(vgpu).lower()}\n"
    if nest:  # the platform's switch making GPU budgets nest (issue 28 item 5)
        text = text.replace("_cluster: {}\n", "_cluster:\n") + "  gpu-budgets-nest: true\n"
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": ROOT_NAMESPACE},
            "stringData": {"values.yaml": text}}


def namespace_object(name: str, label: str | None) -> dict:
    labels = {} if label is None else {"namespace.cozystack.io/vgpu": label}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


tenants = st.builds(tenant_at, st.sampled_from(PATHS), quota_maps, st.one_of(st.none(), st.booleans()))
workloads = st.one_of(
    st.builds(lambda ns, i, g: vm(ns, f"vm{i}", g), namespaces, st.integers(0, 2), st.lists(entries, max_size=2)),
    st.builds(lambda ns, i, g, r: nodes(ns, f"pool{i}", g, max_replicas=r), namespaces, st.integers(0, 1),
              st.lists(entries, max_size=2), st.integers(0, 3)),
    st.builds(lambda ns, i, groups: kubernetes(ns, f"k{i}", groups), namespaces, st.integers(0, 1),
              st.dictionaries(st.sampled_from(["md0", "md1"]), st.builds(node_group, st.lists(entries, max_size=2),
                                                                         st.integers(0, 3)), max_size=2)),
)
usage_objects = st.one_of(
    st.builds(lambda ns, i, cpu: pod(ns, f"p{i}", {"cpu": cpu, "memory": "1Gi"}), namespaces, st.integers(0, 2),
              st.sampled_from(["1", "500m", "2"])),
    st.builds(lambda ns, cpu: quota(ns, "q", {"limits.cpu": cpu}), namespaces, st.sampled_from(["0", "3", "10"])),
)
objects = st.one_of(
    tenants, tenants, tenants, workloads, workloads, workloads, usage_objects, usage_objects,
    st.builds(tenant_at, st.sampled_from(PATHS), quota_maps, st.one_of(st.none(), st.booleans())),
    st.builds(lambda ns, i, g: vm(ns, f"vm{i}", g), namespaces, st.integers(0, 2), st.lists(entries, max_size=2)),
    st.builds(lambda ns, i, g, r: nodes(ns, f"pool{i}", g, max_replicas=r), namespaces, st.integers(0, 1),
              st.lists(entries, max_size=2), st.integers(0, 3)),
    st.builds(lambda ns, i, cpu: pod(ns, f"p{i}", {"cpu": cpu, "memory": "1Gi"}), namespaces, st.integers(0, 2),
              st.sampled_from(["1", "500m", "2"])),
    st.builds(lambda ns, i, phase: pod(ns, f"p{i}", {"cpu": "1"}, phase=phase), namespaces, st.integers(0, 2),
              st.sampled_from(["Running", "Succeeded"])),
    st.builds(lambda ns, cpu: quota(ns, "q", {"limits.cpu": cpu}), namespaces, st.sampled_from(["0", "3", "10"])),
    st.builds(lambda name, resource: gpuclass(name, resource), st.sampled_from(["a100", "h100"]),
              st.sampled_from(["nvidia.com/a100", "nvidia.com/h100"])),
    st.builds(namespace_object, st.sampled_from([ROOT_NAMESPACE, "tenant-a", "tenant-a-b"]),
              st.sampled_from([None, "true", "false"])),
    st.builds(values_secret, st.one_of(st.none(), st.booleans()), st.booleans()),
    # What the rules cannot read: a pod's limit, a count, a tenant name, a
    # second owner of tenant-root, two owners of one namespace.
    st.builds(lambda ns: pod(ns, "bad", {"cpu": "lots"}), namespaces),
    st.builds(lambda ns: vm(ns, "bad", [{"class": "a100", "count": -1}]), namespaces),
    st.just(tenant("Bad", ROOT_NAMESPACE, quotas={})),
    st.just(tenant("root", "tenant", quotas={"cpu": 1})),
)
ops = st.lists(st.tuples(st.sampled_from(["upsert", "upsert", "upsert", "remove"]), objects), min_size=8, max_size=40)


def _key(obj: dict) -> tuple:
    return (obj["apiVersion"].rpartition("/")[0], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])


def assert_same_state(live_state, full) -> None:
    for f in dataclasses.fields(full):
        assert getattr(live_state, f.name) == getattr(full, f.name), f.name


def _replay(live: LiveIndex, sequence) -> dict:
    """Apply `sequence` to `live`, checking the contract after every event;
    returns the objects it holds."""
    expected: dict[tuple, dict] = {_key(o): o for o in live.objects()}
    for op, obj in sequence:
        after = dict(expected)
        if op == "upsert":
            after[_key(obj)] = obj
        else:
            after.pop(_key(obj), None)
        try:
            full = index_state(after.values())
        except BudgetInputError:
            full = None
        try:
            (live.upsert if op == "upsert" else live.remove)(obj)
        except BudgetInputError:
            assert full is None, (op, obj)  # refused exactly when a full index would be
            assert_same_state(live.state, index_state(expected.values()))  # and nothing half-applied
            continue
        assert full is not None, (op, obj)
        expected = after
        assert_same_state(live.state, full)
        assert {_key(o) for o in live.objects()} == set(expected) and len(live) == len(expected)
    return expected


A100, ALL = "a100.gpuclass.cozystack.io/devices", "gpuclass.cozystack.io/devices"


@SETTINGS
@given(ops)
# Rare for random draws: a tenant in the middle of a chain becoming a pool
# root (its subtree leaves the pool above) and leaving again, in both senses,
# with reservations, usage and a carving tenant below it.
@example([("upsert", tenant_at(("a",), {ALL: 4, "cpu": 3})), ("upsert", tenant_at(("a", "b"), {})),
          ("upsert", tenant_at(("a", "b", "a"), {A100: 2, "cpu": 1})),
          ("upsert", vm("tenant-a-b", "vm0", [{"class": "a100", "count": 1}])),
          ("upsert", vm("tenant-a-b-a", "vm1", [{"class": "a100", "count": 1}])),
          ("upsert", pod("tenant-a-b", "p0", {"cpu": "2"})), ("upsert", pod("tenant-a-b-a", "p0", {"cpu": "2"})),
          ("upsert", tenant_at(("a", "b"), {A100: 3})), ("upsert", tenant_at(("a", "b"), {"cpu": 3})),
          ("upsert", tenant_at(("a", "b"), {A100: 3, "cpu": 4})), ("upsert", tenant_at(("a", "b"), {})),
          ("upsert", tenant_at(("a", "b"), {"cpu": 1})), ("remove", tenant_at(("a", "b"), {})),
          ("remove", pod("tenant-a-b", "p0", {})), ("remove", vm("tenant-a-b", "vm0"))])
# A subtree escaping by declaring only cpu: the charge of the pool it leaves
# drops, and so the figures above that.
@example([("upsert", tenant_at((), {ALL: 10})), ("upsert", tenant_at(("a",), {A100: 1})),
          ("upsert", vm("tenant-a-b", "vm0", [{"class": "a100", "count": 3}])),
          ("upsert", tenant_at(("a", "b"), {"cpu": 1})), ("upsert", tenant_at(("a", "b"), {}))])
# The platform's nesting switch flipped under a cpu-only sub-tenant holding devices: its subtree
# joins, then leaves, the GPU pool above.
@example([("upsert", tenant_at(("a",), {A100: 4})), ("upsert", tenant_at(("a", "b"), {"cpu": 1})),
          ("upsert", vm("tenant-a-b", "vm0", [{"class": "a100", "count": 3}])),
          ("upsert", values_secret(None, True)), ("upsert", tenant_at(("a", "b"), {"cpu": 2, A100: 3})),
          ("upsert", tenant_at(("a", "b"), {"cpu": 2})), ("upsert", values_secret(True, False)),
          ("upsert", values_secret(None, True)), ("remove", values_secret(None))])
def test_the_live_state_equals_a_full_index_after_every_event(sequence):
    _replay(LiveIndex([gpuclass("a100", "nvidia.com/a100")]), [("remove", gpuclass("a100", "nvidia.com/a100"))] + sequence)


@SETTINGS
@given(st.lists(objects, max_size=12), ops, st.lists(objects, min_size=1, max_size=5))
def test_checks_and_the_audit_agree_with_a_full_index(first_list, sequence, writes):
    """From a first list and then events, every write and the audit get the
    same answer from the live state as from a full index of its objects."""
    try:
        live = LiveIndex(first_list)
    except BudgetInputError:
        return
    _replay(live, sequence)
    full = index_state(live.objects())
    assert [f.as_dict() for f in audit(live.state)] == [f.as_dict() for f in audit(full)]
    for write in writes:
        if write["kind"] in ("Pod", "ResourceQuota", "Namespace", "Secret"):
            continue
        answers = []
        for state in (live.state, full):
            try:
                answers.append(check_write(state, write).as_dict())
            except BudgetInputError as err:
                answers.append(("bad input", str(err)))
        assert answers[0] == answers[1]


def test_an_upsert_replaces_by_identity_whatever_the_version():
    live = LiveIndex([*[gpuclass(n, f"nvidia.com/{n}") for n in ("a100", "h100")],
                      tenant("a", quotas={"a100.gpuclass.cozystack.io/devices": 4})])
    first = vm("tenant-a", "v", [{"class": "a100", "count": 1}])
    live.upsert(first)
    second = dict(vm("tenant-a", "v", [{"class": "a100", "count": 3}]), apiVersion="apps.cozystack.io/v1beta1")
    live.upsert(second)  # a new version of the object, never "two different copies"
    assert len(live) == 4 and live.get(first) is second
    assert live.state.pool_reserved["tenant-a"] == {"a100": 3}
    assert not check_write(live.state, vm("tenant-a", "w", [{"class": "a100", "count": 2}])).allowed
    live.remove(first)
    assert "tenant-a" not in live.state.pool_reserved
    assert check_write(live.state, vm("tenant-a", "w", [{"class": "a100", "count": 2}])).allowed


def test_an_unreadable_event_changes_nothing():
    live = LiveIndex([tenant("a", quotas={"cpu": 2}), pod("tenant-a", "p", {"cpu": "1"})])
    before = dataclasses.replace(live.state)
    with pytest.raises(BudgetInputError, match="lots"):
        live.upsert(pod("tenant-a", "bad", {"cpu": "lots"}))
    with pytest.raises(BudgetInputError, match="also owned"):
        live.upsert(tenant("root", "tenant", quotas={}) | {"metadata": {"name": "a", "namespace": "tenant"}})
    assert len(live) == 2
    assert_same_state(live.state, before)
    assert_same_state(live.state, index_state(live.objects()))
