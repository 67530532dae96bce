"""DRA devices in a GPU class's free units (cozyrender.gpuclass.dra, cozyrender.kube.cel.devices):
DeviceClass selectors evaluated by cel-cpp as the allocator evaluates them (a table of
expressions and devices); which devices of which slices a class counts and which of them claims
hold (a table of cluster states); the status controller's incremental index equals the catalog
over the same objects after any sequence of events, and reports every class an event moved; a
class whose devices cannot be counted says so in its Ready condition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gpuclass_status import _catalog, _class, _feed, _index_answer, _node

from cozyrender.gpuclass.dra import DeviceCount, DeviceProblem, class_devices, claim_allocations
from cozyrender.gpuclass.status import ClassIndex, desired_status
from cozyrender.kube.cel.devices import DeviceSelector, SelectorError

DRIVER = "gpu.example.com"
A100 = {"name": "gpu-0", "attributes": {"model": {"string": "A100"}, "cores": {"int": 108},
                                        "gpu.example.com/ecc": {"bool": True},
                                        "driverVersion": {"version": "550.54.15"}},
        "capacity": {"memory": {"value": "40Gi"}}}


@pytest.mark.parametrize("expression, expected", [
    (f'device.driver == "{DRIVER}"', True),
    ('device.driver == "other.example.com"', False),
    (f'device.attributes["{DRIVER}"].model == "A100"', True),  # unqualified names are in the driver's domain
    (f'device.attributes["{DRIVER}"].model == "L4"', False),
    (f'device.attributes["{DRIVER}"].ecc', True),  # a qualified name, its domain spelled out
    (f'device.attributes["{DRIVER}"].cores >= 100', True),
    (f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("535.0.0"))', True),
    (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) == 0', True),
    (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("80Gi"))', False),
    ('has(device.attributes["other.example.com"].model)', False),  # a domain it has nothing in: an empty map
    ('device.attributes["other.example.com"].model == "A100"', SelectorError),  # no such key: not selectable
    (f'device.driver == "x" && device.attributes["{DRIVER}"].missing == 1', False),  # short-circuit first
    ("!device.allowMultipleAllocations", True),
])
def test_a_selector_answers_as_the_allocator(expression, expected):
    selector = DeviceSelector(expression)
    if expected is SelectorError:
        with pytest.raises(SelectorError, match="Key not found"):
            selector.matches(DRIVER, A100)
    else:
        assert selector.matches(DRIVER, A100) is expected


@pytest.mark.parametrize("expression, why", [
    ('"gpu"', "must evaluate to a bool, not string"),
    ('device.driver ==', "does not compile"),
    ('device.attributes["a"].name.find("x") == "x"', "does not compile"),  # the regex library is not registered
])
def test_a_selector_that_cannot_be_evaluated_here_is_refused_at_compile_time(expression, why):
    with pytest.raises(SelectorError, match=why):
        DeviceSelector(expression)


def test_a_selector_yielding_no_bool_fails_on_the_device():
    """`device` is dyn here (Kubernetes types it, refusing this at compile time): it fails when run."""
    with pytest.raises(SelectorError, match="not a bool"):
        DeviceSelector("device.driver").matches(DRIVER, A100)


def device_class(name: str, *expressions: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def resource_slice(name: str, driver: str, pool: str, generation: int, node: str | None, devices) -> dict:
    where = {"nodeName": node} if node else {"allNodes": True}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                     **where, "devices": [{"name": d, "attributes": {"model": {"string": m}}} for d, m in devices]}}


def claim(name: str, *results: tuple, namespace: str = "tenant-a") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": d, "pool": p, "device": dev, **({"adminAccess": True} if admin else {})}
                for d, p, dev, admin in results]}}}}


def per_device_nodes() -> dict:
    devices = [{"name": "gpu-0", "nodeName": "n0"}, {"name": "gpu-1", "nodeName": "n1"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "per-device"},
            "spec": {"driver": DRIVER, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "perDeviceNodeSelection": True, "devices": devices}}


NODES = {"n0": _node("n0", {}, True, False, False), "n1": _node("n1", {}, False, False, False)}
GPUS = [("gpu-0", "A100"), ("gpu-1", "A100"), ("gpu-2", "L4")]
BY_DRIVER = device_class("gpus", f'device.driver == "{DRIVER}"')
A100_ONLY = device_class("a100", f'device.driver == "{DRIVER}"', f'device.attributes["{DRIVER}"].model == "A100"')


@pytest.mark.parametrize("case, device_class_obj, slices, claims, expected", [
    ("every device of the driver", BY_DRIVER, [resource_slice("s", DRIVER, "n0", 1, "n0", GPUS)], [],
     DeviceCount(3, 0, frozenset({"n0"}))),
    ("both selectors must hold", A100_ONLY, [resource_slice("s", DRIVER, "n0", 1, "n0", GPUS)], [],
     DeviceCount(2, 0, frozenset({"n0"}))),
    ("another driver's devices are not the class's", BY_DRIVER,
     [resource_slice("s", "other.example.com", "n0", 1, "n0", GPUS)], [], DeviceCount(0, 0, frozenset())),
    ("only the pool's newest generation counts", BY_DRIVER,
     [resource_slice("old", DRIVER, "n0", 1, "n0", GPUS), resource_slice("new", DRIVER, "n0", 2, "n0", GPUS[:1])],
     [], DeviceCount(1, 0, frozenset({"n0"}))),
    ("a NotReady node's devices do not count", BY_DRIVER, [resource_slice("s", DRIVER, "n1", 1, "n1", GPUS)], [],
     DeviceCount(0, 0, frozenset())),
    ("an unknown node's devices do not count", BY_DRIVER, [resource_slice("s", DRIVER, "n9", 1, "n9", GPUS)], [],
     DeviceCount(0, 0, frozenset())),
    ("a pool of no single node counts, on no node", BY_DRIVER, [resource_slice("s", DRIVER, "net", 1, None, GPUS)],
     [], DeviceCount(3, 0, frozenset())),
    ("each device on its own node (perDeviceNodeSelection)", BY_DRIVER, [per_device_nodes()], [],
     DeviceCount(1, 0, frozenset({"n0"}))),
    ("claims in any namespace hold devices; admin access and other pools hold none", BY_DRIVER,
     [resource_slice("s", DRIVER, "n0", 1, "n0", GPUS)],
     [claim("a", (DRIVER, "n0", "gpu-0", False)), claim("b", (DRIVER, "n0", "gpu-2", False), namespace="other"),
      claim("admin", (DRIVER, "n0", "gpu-1", True)), claim("elsewhere", (DRIVER, "n9", "gpu-1", False))],
     DeviceCount(3, 2, frozenset({"n0"}))),
    ("a held device the class does not select is not its", A100_ONLY,
     [resource_slice("s", DRIVER, "n0", 1, "n0", GPUS)], [claim("l4", (DRIVER, "n0", "gpu-2", False))],
     DeviceCount(2, 0, frozenset({"n0"}))),
])
def test_the_devices_a_class_counts(case, device_class_obj, slices, claims, expected):
    name = device_class_obj["metadata"]["name"]
    gpuclass = _class("c", "nvidia.com/A100", 0, False, name)
    assert class_devices(gpuclass, device_class_obj, name, slices, claims, NODES) == expected, case
    assert expected.free == expected.devices - expected.allocated


def test_a_missing_device_class_or_an_unevaluable_selector_is_a_problem():
    gpuclass = _class("c", "nvidia.com/A100", 0, False, "gpus")
    with pytest.raises(DeviceProblem, match="'gpus' not found"):
        class_devices(gpuclass, None, "gpus", [], [], NODES)
    with pytest.raises(DeviceProblem, match="does not compile"):
        class_devices(gpuclass, device_class("gpus", 'device.driver.find("x") == "x"'), "gpus", [], [], NODES)
    assert claim_allocations({"status": {}}) == []


# ---------------------------------------------------------------- the controller's index

DEVICE_CLASSES = {"gpu.example.com": device_class("gpu.example.com", f'device.driver == "{DRIVER}"'),
                  "tpu.example.com": device_class("tpu.example.com",
                                                  'device.attributes["tpu.example.com"].model == "v5"')}


def _feed_dra(index: ClassIndex, obj: dict, delete: bool = False) -> set[str]:
    name = obj["metadata"]["name"]
    if obj["kind"] == "DeviceClass":
        return index.set_device_class(None if delete else obj, name)
    if obj["kind"] == "ResourceSlice":
        return index.set_slice(None if delete else obj, name)
    if obj["kind"] == "ResourceClaim":
        return index.set_claim((obj["metadata"]["namespace"], name),
                               None if delete else tuple(claim_allocations(obj)) or None)
    return _feed(index, obj, delete)


DRIVERS = ("gpu.example.com", "tpu.example.com")
device_classes = st.sets(st.sampled_from(sorted(DEVICE_CLASSES)))
# (driver, pool, generation, node index or None for allNodes, devices (name, model))
slices = st.lists(st.tuples(st.sampled_from(DRIVERS), st.sampled_from(["p0", "p1"]), st.integers(0, 2),
                            st.one_of(st.none(), st.integers(0, 3)),
                            st.lists(st.tuples(st.sampled_from(["d0", "d1", "d2"]), st.sampled_from(["v5", "v4"])),
                                     max_size=3, unique_by=lambda d: d[0])), max_size=4)
claims = st.lists(st.lists(st.tuples(st.sampled_from(DRIVERS), st.sampled_from(["p0", "p1"]),
                                     st.sampled_from(["d0", "d1", "d2"]), st.booleans()), max_size=2), max_size=4)
dra_classes = st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.sampled_from([None, *DRIVERS])),
                       min_size=1, max_size=4)
dra_nodes = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=3)


def _dra_objects(cls, nds, dcs, sls, cls_claims):
    return ([_class(f"c{i}", "nvidia.com/A100", m, t, d) for i, (m, t, d) in enumerate(cls)]
            + [_node(f"n{i}", {"nvidia.com/A100": "2"}, ready, False, tainted) for i, (ready, tainted) in enumerate(nds)]
            + [DEVICE_CLASSES[name] for name in sorted(dcs)]
            + [resource_slice(f"s{i}", d, p, g, None if n is None else f"n{n}", devs)
               for i, (d, p, g, n, devs) in enumerate(sls)]
            + [claim(f"claim{i}", *results) for i, results in enumerate(cls_claims) if results])


@settings(max_examples=150, deadline=None)
@given(dra_classes, dra_nodes, device_classes, slices, claims,
       dra_classes, dra_nodes, device_classes, slices, claims, st.randoms(use_true_random=False))
def test_the_index_after_any_dra_events_equals_the_catalog_and_reports_what_it_moved(
        c1, n1, d1, s1, k1, c2, n2, d2, s2, k2, rnd):
    """From one state to another through adds, updates and deletes of classes, nodes,
    DeviceClasses, ResourceSlices and ResourceClaims in a random order: every event reports each
    class whose figures it moved, and the index ends with the catalog's answer."""
    start = _dra_objects(c1, n1, d1, s1, k1)
    final = _dra_objects(c2, n2, d2, s2, k2)
    index = ClassIndex()
    rnd.shuffle(start)
    final_keys = {(o["kind"], o["metadata"]["name"]) for o in final}
    events = [(obj, False) for obj in start]
    events += [(obj, True) for obj in start if (obj["kind"], obj["metadata"]["name"]) not in final_keys]
    events += [(obj, False) for obj in final]
    for obj, delete in events[:len(start)] + rnd.sample(events[len(start):], len(events) - len(start)):
        before = {name: index.figures(name) for name in index.classes}
        touched = _feed_dra(index, obj, delete)
        for name in index.classes:
            if name not in touched and name in before:
                assert index.figures(name) == before[name], (name, obj["kind"], obj["metadata"]["name"])
    assert _index_answer(index) == _catalog(final)


def test_a_node_event_touches_the_classes_with_devices_on_it():
    index = ClassIndex()
    index.set_class(_class("a100", "nvidia.com/A100", 0, False, "gpus"), "a100")
    index.set_device_class(BY_DRIVER, "gpus")
    index.set_node(NODES["n0"], "n0")
    assert index.set_slice(per_device_nodes(), "per-device") == {"a100"}
    assert index.figures("a100").devices == DeviceCount(1, 0, frozenset({"n0"}))
    assert index.set_node(NODES["n1"], "n1") == {"a100"}  # a device of the slice is on n1
    assert index.set_node(_node("n2", {}, True, False, False), "n2") == set()  # nothing of the class on n2
    assert index.set_node(_node("n1", {}, True, False, False), "n1") == {"a100"}
    assert index.figures("a100").devices == DeviceCount(2, 0, frozenset({"n0", "n1"}))


def _status(index: ClassIndex, name: str) -> dict:
    return desired_status(index.classes[name], index.figures(name), "2026-01-01T00:00:00Z")


def _ready(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def test_the_status_adds_the_dra_devices_and_says_so():
    index = ClassIndex()
    index.set_class(_class("a100", "nvidia.com/A100", 0, False, "gpus"), "a100")
    index.set_node(_node("n0", {"nvidia.com/A100": "2"}, True, False, False), "n0")
    index.set_device_class(BY_DRIVER, "gpus")
    index.set_slice(resource_slice("s", DRIVER, "n0", 1, "n0", GPUS), "s")
    index.set_claim(("tenant-a", "one"), ((DRIVER, "n0", "gpu-1"),))
    status = _status(index, "a100")
    assert (status["free"], status["allocatable"], status["nodes"]) == (4, 5, 1)
    assert _ready(status)["message"] == "4 of 5 units free on 1 node(s) (2 of 3 DRA devices of DeviceClass 'gpus' " \
                                        "among them)"
    index.set_claim(("tenant-a", "one"), None)
    assert _status(index, "a100")["free"] == 5


@pytest.mark.parametrize("device_class_obj, why", [
    (None, "DeviceClass 'gpus' not found: its devices cannot be counted"),
    (device_class("gpus", 'device.driver.find("x") == "x"'), "does not compile"),
])
def test_a_class_whose_devices_cannot_be_counted_is_not_ready_and_says_why(device_class_obj, why):
    index = ClassIndex()
    index.set_class(_class("a100", "nvidia.com/A100", 0, False, "gpus"), "a100")
    index.set_node(_node("n0", {"nvidia.com/A100": "2"}, True, False, False), "n0")
    index.set_slice(resource_slice("s", DRIVER, "n0", 1, "n0", GPUS), "s")
    if device_class_obj is not None:
        index.set_device_class(device_class_obj, "gpus")
    status = _status(index, "a100")
    ready = _ready(status)
    assert (ready["status"], ready["reason"]) == ("False", "DevicesUncounted")
    assert why in ready["message"]
    assert (status["free"], status["allocatable"]) == (2, 2)  # the device plugin's figures alone
