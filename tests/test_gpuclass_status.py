"""GPUClass status (cozyrender.gpuclass.status): the incremental index the
controller keeps equals `cozyrender catalog` over the same objects, for any
cluster state reached by any sequence of adds, updates and deletes; the
status it writes carries the catalog's figures and conflict; an unchanged
class yields an identical status (no write)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.gpuclass.catalog import catalog_rows
from cozyrender.gpuclass.status import ClassIndex, Figures, desired_status, pod_demand, small_node

RESOURCES = ("nvidia.com/A100", "nvidia.com/L4", "example.com/fpga")
TAINT = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}


def _class(name, resource, minute, tolerate, device_class=None):
    spec = {"vendor": "NVIDIA", "model": "m", "mode": "passthrough", "memory": "40Gi",
            "sourceKind": "PCIHostDevice", "resourceName": resource}
    if device_class:
        spec["deviceClassName"] = device_class
    if tolerate:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": name, "generation": 1, "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z"},
            "spec": spec}


def _node(name, units, ready, cordoned, tainted):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"unschedulable": cordoned, **({"taints": [TAINT]} if tainted else {})},
            "status": {"allocatable": {"cpu": "8", **units},
                       "conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": "True" if ready else "False"}]}}


def _pod(name, node, phase, requests, init):
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", **requests}}}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init, "limits": init}}]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": name},
            "spec": spec, "status": {"phase": phase}}


units = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 8).map(str), max_size=3)
# (resource name, minute created, tolerates the taint, DRA DeviceClass): classes share either.
classes = st.lists(st.tuples(st.sampled_from(RESOURCES), st.integers(0, 5), st.booleans(),
                             st.sampled_from([None, "gpu.example.com", "tpu.example.com"])), min_size=1, max_size=5)
nodes = st.lists(st.tuples(units, st.booleans(), st.booleans(), st.booleans()), max_size=5)
pods = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
                          units, st.one_of(st.just({}), units)), max_size=12)


def _objects(draw_classes, draw_nodes, draw_pods):
    cls = [_class(f"c{i}", r, m, t, d) for i, (r, m, t, d) in enumerate(draw_classes)]
    nds = [_node(f"n{i}", u, ready, cordoned, tainted) for i, (u, ready, cordoned, tainted) in enumerate(draw_nodes)]
    pds = [_pod(f"p{i}", f"n{n}" if n < 5 else None, phase, req, init)
           for i, (n, phase, req, init) in enumerate(draw_pods)]
    return cls, nds, pds


def _feed(index: ClassIndex, obj: dict, delete: bool = False) -> set[str]:
    name = obj["metadata"]["name"]
    if obj["kind"] == "GPUClass":
        return index.set_class(None if delete else obj, name)
    if obj["kind"] == "Node":
        return index.set_node(None if delete else small_node(obj), name)
    key = (obj["metadata"]["namespace"], name)
    return index.set_pod(key, None if delete else pod_demand(obj))


def _catalog(objects):
    return {row.name: (row.free_units, row.allocatable_units, row.eligible_nodes, row.conflict_holder)
            for row in catalog_rows(objects)}


def _index_answer(index: ClassIndex):
    answer = {}
    for name in index.classes:
        status = desired_status(index.classes[name], index.figures(name), "2026-01-01T00:00:00Z")
        answer[name] = (str(status["free"]), str(status["allocatable"]), status["nodes"],
                        status.get("conflictWith"))
    return answer


@settings(max_examples=300, deadline=None)
@given(classes, nodes, pods, classes, nodes, pods, st.randoms(use_true_random=False))
def test_the_index_after_any_events_equals_the_catalog(c1, n1, p1, c2, n2, p2, rnd):
    """Start from one state, move to another through adds, updates and
    deletes in a random order; the index answers what the catalog answers
    for the final objects, for every class."""
    first, final = _objects(c1, n1, p1), _objects(c2, n2, p2)
    index = ClassIndex()
    start = [obj for group in first for obj in group]
    rnd.shuffle(start)
    for obj in start:
        _feed(index, obj)
    final_objects = [obj for group in final for obj in group]
    final_keys = {(o["kind"], o["metadata"]["name"]) for o in final_objects}
    events = [(obj, True) for obj in start if (obj["kind"], obj["metadata"]["name"]) not in final_keys]
    events += [(obj, False) for obj in final_objects]
    rnd.shuffle(events)
    for obj, delete in events:
        _feed(index, obj, delete)
    assert _index_answer(index) == _catalog(final_objects)


@settings(max_examples=200, deadline=None)
@given(classes, classes, nodes, pods, st.randoms(use_true_random=False))
def test_every_event_reports_each_class_whose_figures_it_moved(c, c_later, n, p, rnd):
    """A class not in an event's touched set keeps its figures and conflict:
    the controller may reconcile only the touched classes. Events are node
    and pod adds, classes changing resource name, and class deletes."""
    cls, nds, pds = _objects(c, n, p)
    later = _objects(c_later, [], [])[0]
    index = ClassIndex()
    for obj in cls:
        index.set_class(obj, obj["metadata"]["name"])
    events = [(obj, False) for obj in nds + pds + later] + [(obj, True) for obj in cls[::2]]
    rnd.shuffle(events)
    for obj, delete in events:
        before = {name: index.figures(name) for name in index.classes}
        touched = _feed(index, obj, delete)
        for name in index.classes:
            if name not in touched and name in before:
                assert index.figures(name) == before[name], (name, obj["metadata"]["name"])


def test_the_status_names_the_older_class_and_keeps_transition_times():
    older = _class("old", RESOURCES[0], 1, False)
    newer = _class("new", RESOURCES[0], 2, False)
    index = ClassIndex()
    index.set_class(older, "old")
    index.set_class(newer, "new")
    index.set_node(small_node(_node("n0", {RESOURCES[0]: "4"}, True, False, False)), "n0")
    index.set_pod(("ns", "p"), pod_demand(_pod("p", "n0", "Running", {RESOURCES[0]: "1"}, {})))
    status = desired_status(newer, index.figures("new"), "2026-01-01T00:00:00Z")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert status["conflictWith"] == "old"
    assert conditions["Conflict"]["status"] == "True" and "'old'" in conditions["Conflict"]["message"]
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "Conflict"
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    held = desired_status(older, index.figures("old"), "2026-01-01T00:00:00Z")
    assert (held["free"], held["allocatable"], held["nodes"]) == (3, 4, 1)
    assert "conflictWith" not in held
    # An hour later nothing changed: the same status, transition times kept (no write).
    assert desired_status(older, index.figures("old"), "2026-01-01T01:00:00Z", held) == held
    # The node cordoned: Ready goes False with a new transition time.
    index.set_node(small_node(_node("n0", {RESOURCES[0]: "4"}, True, True, False)), "n0")
    later = desired_status(older, index.figures("old"), "2026-01-01T02:00:00Z", held)
    ready = {c["type"]: c for c in later["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == ("False", "NoNodes",
                                                                               "2026-01-01T02:00:00Z")


def test_a_pod_without_devices_is_not_kept():
    assert pod_demand(_pod("p", "n0", "Running", {}, {})) is None
    assert pod_demand(_pod("p", None, "Running", {RESOURCES[0]: "1"}, {})) is None
    assert pod_demand(_pod("p", "n0", "Succeeded", {RESOURCES[0]: "1"}, {})) is None
    node, demand = pod_demand(_pod("p", "n0", "Running", {RESOURCES[0]: "1"}, {RESOURCES[0]: "3"}))
    assert node == "n0" and demand == {RESOURCES[0]: 3}


def test_unreadable_figures_make_the_class_not_ready():
    gpuclass = _class("c", RESOURCES[0], 1, False)
    status = desired_status(gpuclass, Figures(None, None, "node n0: status.allocatable is not a map"),
                            "2026-01-01T00:00:00Z")
    ready = status["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "Unreadable")
    assert "free" not in status
