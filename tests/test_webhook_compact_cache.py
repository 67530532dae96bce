"""The webhook's cache keeps only what the rules read (issue 26 item 3): a pod
as its name and a shared reading of its resource fields
(`LiveIndex(compact_pods=True)`, `budgets.usage.compact_pod`), other objects
without the metadata no rule reads, and no finished pod at all (its watch
leaves them out with a field selector). Every decision, figure and error
must be the one the whole objects give: these properties replay random
events on a compact index and on a full index of the whole objects and
compare them after every event."""

from __future__ import annotations

import dataclasses
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_budgets_builders import pod, tenant, vm
from test_budgets_live import _key, objects, tenant_at
from test_pod_usage_fast_path import odd_pods, pods

from cozyrender.budgets import BudgetInputError, audit, check_write, index_state
from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.usage import TERMINATED_POD, compact_pod, pod_usage
from cozyrender.kube.client import WATCHED
from cozyrender.kube.pods import is_terminated, read_fields, reading_key
from cozyrender.kube.shape import ShapeError
from cozyrender.webhook.cache import Cache, compact, scope
from cozyrender.webhook.metrics import Metrics

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMESPACES = st.sampled_from(["tenant-a", "tenant-a-b", "tenant-b", "tenant--x", "kube-system"])


@st.composite
def named_pods(draw) -> dict:
    """A pod from the fast path's strategies (every field the rule reads,
    odd values included), named and placed."""
    found = draw(st.one_of(pods(), pods(), odd_pods()))
    found = dict(found, metadata={"name": f"q{draw(st.integers(0, 3))}", "namespace": draw(NAMESPACES)})
    if draw(st.booleans()):  # what the API server adds and no rule reads
        found["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
        found["metadata"]["labels"] = {"app": "x"}
    return found


events = st.one_of(objects, named_pods(), named_pods())
ops = st.lists(st.tuples(st.sampled_from(["upsert", "upsert", "upsert", "remove"]), events), min_size=6, max_size=35)
writes = st.lists(st.one_of(
    st.builds(lambda ns, c: vm(ns, "w", [{"class": "a100", "count": c}]), NAMESPACES, st.integers(0, 3)),
    st.builds(lambda q: tenant_at(("a",), q), st.sampled_from([{"cpu": 1}, {"cpu": 40, "memory": "1Gi"}, {}])),
    st.builds(lambda q: tenant("b", quotas=q), st.sampled_from([{"cpu": 2}, {"limits.cpu": 5, "pods": 3}])),
), min_size=1, max_size=4)


def _answer(fn, *args):
    try:
        return ("ok", fn(*args))
    except BudgetInputError as err:
        return ("bad input", str(err))


def _decisions(state, write_list) -> list:
    return [_answer(lambda w: check_write(state, w).as_dict(), w) for w in write_list]


def assert_same_but_pods(compact_state, full) -> None:
    """Every field equal; pods: the same namespaces, each with the same
    usage (or the same error) from its readings as from its pods."""
    for field in dataclasses.fields(full):
        if field.name != "pods":
            assert getattr(compact_state, field.name) == getattr(full, field.name), field.name
    assert compact_state.pods.keys() == full.pods.keys()
    for namespace, listed in full.pods.items():
        assert len(compact_state.pods[namespace]) == len(listed)
        assert _answer(pod_usage, compact_state.pods[namespace]) == _answer(pod_usage, listed), namespace


@SETTINGS
@given(ops, writes)
def test_a_compact_index_decides_as_the_whole_objects(sequence, write_list):
    live = LiveIndex(compact_pods=True)
    expected: dict[tuple, dict] = {}
    for op, obj in sequence:
        after = dict(expected)
        if op == "upsert":
            after[_key(obj)] = obj
        else:
            after.pop(_key(obj), None)
        full = _answer(index_state, after.values())
        got = _answer(live.upsert if op == "upsert" else live.remove, obj)
        if full[0] == "bad input":
            assert got == full, (op, obj)  # refused exactly when, and saying exactly what, the whole objects are
            continue
        assert got[0] == "ok", (op, obj, got)
        expected = after
        assert_same_but_pods(live.state, full[1])
        assert {_key(o) for o in live.objects()} == set(expected) and len(live) == len(expected)
    full_state = index_state(expected.values())
    assert _decisions(live.state, write_list) == _decisions(full_state, write_list)
    assert [f.as_dict() for f in audit(live.state)] == [f.as_dict() for f in audit(full_state)]
    # Built at once from the same objects (a first list): the same again.
    assert_same_but_pods(LiveIndex(expected.values(), compact_pods=True).state, full_state)


@SETTINGS
@given(st.lists(events, max_size=25), writes)
def test_finished_pods_left_out_change_no_decision(first_list, write_list):
    """What the pods' field selector sends (no finished pod), compact,
    against every object whole: the same decisions."""
    whole: dict[tuple, dict] = {_key(o): o for o in first_list}
    try:
        full = index_state(whole.values())
    except BudgetInputError:
        return
    def finished(obj):
        status = obj.get("status")
        return obj["kind"] == "Pod" and isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")
    live = LiveIndex([o for o in whole.values() if not finished(o)], compact_pods=True)
    assert _decisions(live.state, write_list) == _decisions(full, write_list)


@settings(max_examples=300, deadline=None)
@given(st.one_of(pods(), odd_pods()))
def test_a_reading_gives_the_pods_figures_and_is_shared(found):
    reading, shared = compact_pod(found)
    assert _answer(pod_usage, [reading]) == _answer(pod_usage, [found])
    if shared:
        assert "metadata" not in reading
        assert compact_pod(dict(found, metadata={"name": "other"}))[0] is reading  # one per shape
        if reading is not TERMINATED_POD:
            assert reading_key(reading) == reading_key(found)  # read again, the very same fields
            assert read_fields(reading_key(found)) == reading
    else:  # kept whole where the rules refuse it or read it field by field
        assert reading["spec"] is found.get("spec") and reading.get("status") is found.get("status")


def _cache() -> Cache:
    """A cache of VMs and pods, both first lists done (empty)."""
    cache = Cache(lambda: None, LiveIndex(), threading.Lock(), Metrics(),
                  watched=(_watched("VMInstance"), _watched("Pod")))
    return cache


def _watched(kind: str):
    return next(w for w in WATCHED if w.kind == kind)


def test_the_cache_keeps_no_unread_metadata_and_no_object_twice():
    cache = _cache()
    heavy = vm("tenant-a", "v", [{"class": "a100", "count": 1}])
    heavy["metadata"].update(uid="u1", generation=2, resourceVersion="7", labels={"a": "b"},
                             managedFields=[{"manager": "m", "time": "2026-01-01T00:00:00Z"}],
                             annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}" * 100})
    cache.replace_all(_watched("VMInstance"), iter([heavy]))
    assert cache.index.get(heavy) is None and len(cache.index) == 0  # indexed once every kind has listed
    pods_kind = _watched("Pod")
    first = [pod("tenant-a", f"p{i}", {"cpu": "1"}) for i in range(50)]
    cache.replace_all(pods_kind, iter(first))
    stored = cache.index.get(heavy)
    assert stored["metadata"] == {"name": "v", "namespace": "tenant-a", "uid": "u1", "generation": 2,
                                  "resourceVersion": "7"}
    assert stored["spec"] == heavy["spec"] and cache.seen("u1", 2)
    readings = {id(cache.index.get(p)) for p in first}
    assert len(readings) == 1 and cache.size()["Pod"] == 50  # fifty pods, one reading
    # A relist: one pod gone, one changed, one new; the index changes only there.
    second = first[1:] + [pod("tenant-a", "p1", {"cpu": "2"}), pod("tenant-a", "new", {"cpu": "1"})]
    cache.replace_all(pods_kind, iter(second))
    assert cache.index.get(first[0]) is None and cache.size()["Pod"] == 50
    assert cache.index.state.pods["tenant-a"].count(cache.index.get(first[2])) == 49
    # Watch events; a pod the rules cannot read is set aside and named.
    cache.index.upsert(tenant("a", quotas={"cpu": 100}))  # tenant-a's pods are now read
    cache.apply(pods_kind, "ADDED", pod("tenant-a", "bad", {"cpu": "lots"}))
    assert set(cache.unreadable) == {("Pod", "tenant-a", "bad")}
    cache.apply(pods_kind, "DELETED", pod("tenant-a", "p3", {"cpu": "1"}))
    assert cache.size()["Pod"] == 49
    assert cache.index.state.usage["tenant-a"]["limits.cpu"] == 50  # 47 pods of one cpu, p1 of two, new of one
    cache.apply(pods_kind, "DELETED", pod("tenant-a", "bad", {"cpu": "lots"}))
    assert not cache.unreadable


def test_a_first_list_holding_an_unreadable_object_sets_that_one_aside():
    cache = _cache()
    cache.index.upsert(tenant("a", quotas={"cpu": 100}))
    listed = [pod("tenant-a", "p0", {"cpu": "1"}), pod("tenant-a", "bad", {"cpu": "lots"}),
              pod("tenant-a", "p1", {"cpu": "3"})]
    cache.replace_all(_watched("Pod"), iter(listed))
    cache.replace_all(_watched("VMInstance"), iter([]))
    assert set(cache.unreadable) == {("Pod", "tenant-a", "bad")}
    assert cache.size()["Pod"] == 2
    assert cache.index.state.usage["tenant-a"]["limits.cpu"] == 4


def test_pods_are_watched_without_finished_ones_and_objects_lose_unread_metadata():
    from lightkube.core.selector import build_selector

    selector = build_selector(scope(_watched("Pod"))["fields"], for_fields=True)
    assert sorted(selector.split(",")) == ["status.phase!=Failed", "status.phase!=Succeeded"]
    assert "fields" not in scope(_watched("VMInstance"))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "tenant-a", "labels": {"namespace.cozystack.io/vgpu": "true"}, "annotations": {"x": "y"}}}
    assert compact(namespace)["metadata"] == {"name": "tenant-a", "labels": {"namespace.cozystack.io/vgpu": "true"}}
    for finished in ("Succeeded", "Failed"):
        assert is_terminated({"status": {"phase": finished}})
    odd = {"kind": "Pod", "metadata": {"name": "x", "namespace": "tenant-a"}, "status": {"phase": 5}}
    reading, shared = compact_pod(odd)  # kept whole (named), refused where the rules read it
    assert not shared and reading["metadata"] == odd["metadata"]
    try:
        pod_usage([reading])
    except ShapeError as err:
        assert "Pod tenant-a/x" in str(err) and "status.phase" in str(err)
    else:
        raise AssertionError("a pod of phase 5 was read")
