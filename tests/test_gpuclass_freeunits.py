"""Free units of a class: allocatable minus effective requests on eligible nodes."""

from __future__ import annotations

import copy
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.gpuclass.freeunits import capacities, class_capacity, node_free_units, requests_by_node
from cozyrender.kube.nodes import is_eligible

GPU = "nvidia.com/GA100"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpuclass(tolerations=(TOLERATION,), resource=GPU, name="a100") -> dict:
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": name},
            "spec": {"resourceName": resource, "tolerations": list(tolerations)}}


def node(name: str, units: int | None = 4, ready: bool = True, cordoned: bool = False, taints=()) -> dict:
    allocatable = {"cpu": "8"}
    if units is not None:
        allocatable[GPU] = str(units)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"unschedulable": cordoned, "taints": list(taints)},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def container(units: int, restart: str | None = None) -> dict:
    c = {"name": "c", "resources": {"limits": {GPU: str(units), "cpu": "1"}}}
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(node_name: str | None, units: int = 1, phase: str = "Running", init: list | None = None,
        overhead: dict | None = None) -> dict:
    spec = {"containers": [container(units)]}
    if node_name:
        spec["nodeName"] = node_name
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": spec, "status": {"phase": phase}}


def test_free_units_on_a_node_follow_the_effective_request_rule():
    n = node("n1", units=8)
    pods = [
        pod("n1", 1),
        pod("n1", 1, init=[container(3)]),                     # init peak 3 > app 1
        pod("n1", 1, init=[container(1, restart="Always")]),   # sidecar adds: 2
        pod("n1", 5, phase="Succeeded"),                        # terminated: nothing
        pod("n1", 1, phase="Pending"),                          # bound and pending: counts
        pod(None, 4),                                           # not bound: nowhere
        pod("n2", 4),                                           # another node
    ]
    assert node_free_units(gpuclass(), n, pods) == 8 - (1 + 3 + 2 + 1)
    assert node_free_units(gpuclass(), n, [pod("n1", 1, overhead={GPU: "1"})]) == 6


def test_free_units_are_never_negative_and_zero_where_not_advertised():
    assert node_free_units(gpuclass(), node("n1", units=1), [pod("n1", 3)]) == 0
    assert node_free_units(gpuclass(), node("n1", units=None), []) == 0


def test_ineligible_nodes_give_nothing():
    tainted = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    for ineligible in (node("n1", ready=False), node("n1", cordoned=True), node("n1", taints=[tainted])):
        assert node_free_units(gpuclass(), ineligible, []) == 0
        assert class_capacity(gpuclass(), [ineligible], {}).eligible_nodes == 0


def test_class_capacity_over_several_nodes():
    nodes = [node("n1", 4), node("n2", 2), node("n3", 4, cordoned=True),
             node("n4", 4, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])]
    pods = [pod("n1", 1), pod("n2", 3), pod("n3", 1)]
    figures = capacities([gpuclass()], nodes, pods)["a100"]
    assert (figures.free, figures.allocatable, figures.eligible_nodes) == (3 + 0 + 4, 4 + 2 + 4, 3)
    untolerating = capacities([gpuclass(tolerations=(), name="bare")], nodes, pods)["bare"]
    assert untolerating.eligible_nodes == 2


# -- properties -------------------------------------------------------------------

taint = st.fixed_dictionaries({"key": st.sampled_from(["nvidia.com/gpu", "dedicated"]),
                               "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])})
nodes_strategy = st.lists(
    st.builds(lambda i, units, ready, cordoned, taints: node(f"n{i}", units, ready, cordoned, taints),
              st.integers(0, 5), st.none() | st.integers(0, 8), st.booleans(), st.booleans(),
              st.lists(taint, max_size=2)),
    max_size=6, unique_by=lambda n: n["metadata"]["name"])
pods_strategy = st.lists(
    st.builds(pod, st.none() | st.integers(0, 5).map(lambda i: f"n{i}"), st.integers(0, 6),
              st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
              st.none() | st.lists(st.builds(container, st.integers(0, 6), st.sampled_from([None, "Always"])),
                                   max_size=2)),
    max_size=12)
class_strategy = st.builds(lambda tolerate: gpuclass((TOLERATION,) if tolerate else ()), st.booleans())


def reference_free(klass, nodes, pods) -> Fraction:
    """The single-node function summed over nodes: what the batched path must equal."""
    return sum((node_free_units(klass, n, pods) for n in nodes), Fraction(0))


@settings(max_examples=150, deadline=None)
@given(class_strategy, nodes_strategy, pods_strategy)
def test_free_units_are_never_negative_and_match_the_per_node_rule(klass, nodes, pods):
    figures = capacities([klass], nodes, pods)["a100"]
    assert 0 <= figures.free <= figures.allocatable
    assert figures.free == reference_free(klass, nodes, pods)
    requests = requests_by_node(pods, [GPU])
    assert all(value >= 0 for per_node in requests.values() for value in per_node.values())


@settings(max_examples=150, deadline=None)
@given(class_strategy, nodes_strategy, pods_strategy)
def test_an_ineligible_node_is_never_counted(klass, nodes, pods):
    tolerations = klass["spec"]["tolerations"]
    eligible = [n for n in nodes if is_eligible(n, tolerations)]
    assert capacities([klass], nodes, pods) == capacities([klass], eligible, pods)
    advertising = [n for n in eligible if GPU in n["status"]["allocatable"]]
    assert capacities([klass], nodes, pods)["a100"].eligible_nodes == len(advertising)


@settings(max_examples=150, deadline=None)
@given(nodes_strategy, pods_strategy, st.sampled_from(["NoSchedule", "NoExecute"]), st.data())
def test_adding_a_tolerated_taint_changes_nothing(nodes, pods, effect, data):
    klass = gpuclass()
    before = capacities([klass], nodes, pods)
    if not nodes:
        return
    index = data.draw(st.integers(0, len(nodes) - 1))
    tainted = copy.deepcopy(nodes)
    tainted[index]["spec"]["taints"].append({"key": "nvidia.com/gpu", "value": "x", "effect": "NoSchedule"})
    assert capacities([klass], tainted, pods) == before


@settings(max_examples=150, deadline=None)
@given(pods_strategy)
def test_the_batched_path_counts_exactly_what_the_pod_rule_counts(pods):
    from cozyrender.kube.pods import effective_pod_resource, is_terminated

    expected: dict[str, Fraction] = {}
    for p in pods:
        node_name = p["spec"].get("nodeName")
        if node_name and not is_terminated(p):
            expected[node_name] = expected.get(node_name, Fraction(0)) + effective_pod_resource(p, GPU)
    got = requests_by_node(pods, [GPU])
    assert {n: v for n, v in expected.items() if v} == {n: r[GPU] for n, r in got.items() if r.get(GPU)}
