"""Node eligibility and Kubernetes toleration matching."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.kube.nodes import is_cordoned, is_eligible, is_ready, tolerates, untolerated_taints


def node(ready: str | None = "True", unschedulable: bool = False, taints: list | None = None) -> dict:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"conditions": conditions}}


TAINT = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}


@pytest.mark.parametrize("toleration, expected", [
    ({"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}, True),
    ({"key": "gpu", "value": "a100", "effect": "NoSchedule"}, True),        # no operator means Equal
    ({"key": "gpu", "operator": "Equal", "value": "h100"}, False),
    ({"key": "gpu", "operator": "Exists"}, True),                           # empty effect matches all
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Exists"}, True),                                         # empty key with Exists: everything
    ({"operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 0}, True),
    ({"key": "gpu", "operator": "Lt", "value": "a100"}, False),             # unknown operators match nothing
    ({"operator": "Equal", "value": "a100"}, True),                         # as v1.Toleration.ToleratesTaint
])
def test_tolerates(toleration, expected):
    assert tolerates(toleration, TAINT) is expected


def test_ready_and_cordoned():
    assert is_ready(node()) and not is_ready(node("False")) and not is_ready(node("Unknown"))
    assert not is_ready(node(None))
    assert is_cordoned(node(unschedulable=True)) and not is_cordoned(node())


def test_only_noschedule_and_noexecute_taints_keep_pods_off():
    soft = {"key": "x", "effect": "PreferNoSchedule"}
    assert is_eligible(node(taints=[soft]), [])
    for effect in ("NoSchedule", "NoExecute"):
        assert not is_eligible(node(taints=[{"key": "x", "effect": effect}]), [])
        assert is_eligible(node(taints=[{"key": "x", "effect": effect}]), [{"key": "x", "operator": "Exists"}])


@pytest.mark.parametrize("lifecycle", ["node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                                       "node.kubernetes.io/unreachable"])
def test_lifecycle_taints_are_left_to_the_ready_and_cordon_rules(lifecycle):
    taint = {"key": lifecycle, "effect": "NoSchedule"}
    # A Ready, uncordoned node with a stale lifecycle taint counts without a toleration...
    assert untolerated_taints(node(taints=[taint]), []) == []
    assert is_eligible(node(taints=[taint]), [])
    # ...and tolerating everything does not make a cordoned or NotReady node count.
    everything = [{"operator": "Exists"}]
    assert not is_eligible(node(unschedulable=True, taints=[taint]), everything)
    assert not is_eligible(node("Unknown", taints=[taint]), everything)


taints = st.lists(st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "dedicated", "node.kubernetes.io/not-ready"]),
     "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])},
    optional={"value": st.sampled_from(["", "a", "b"])}), max_size=4)
tolerations = st.lists(st.fixed_dictionaries(
    {}, optional={"key": st.sampled_from(["", "gpu", "dedicated"]),
                  "operator": st.sampled_from(["Exists", "Equal"]),
                  "value": st.sampled_from(["", "a", "b"]),
                  "effect": st.sampled_from(["", "NoSchedule", "NoExecute"])}), max_size=3)


@settings(max_examples=200, deadline=None)
@given(taints, tolerations, tolerations)
def test_more_tolerations_never_make_a_node_ineligible(node_taints, some, more):
    if is_eligible(node(taints=node_taints), some):
        assert is_eligible(node(taints=node_taints), some + more)


@pytest.mark.parametrize("path,value,message", [
    (("status",), 5, r"Node n: status is not an object \(got 5\)"),
    (("status", "conditions"), [5], r"Node n: status.conditions\[0\] is not an object"),
    (("spec", "taints"), 5, "Node n: spec.taints is not a list"),
    (("spec", "taints"), [{"key": 5}], r"Node n: spec.taints\[0\].key is not a string"),
    (("spec", "unschedulable"), "false", "Node n: spec.unschedulable is not a boolean"),
])
def test_a_malformed_node_is_an_error_naming_it_and_the_field(path, value, message):
    from cozyrender.kube.shape import ShapeError

    bad = node()
    cursor = bad
    for key in path[:-1]:
        cursor = cursor[key]
    cursor[path[-1]] = value
    with pytest.raises(ShapeError, match=message):
        is_eligible(bad, [])
