"""`budgets.usage.pod_usage` groups pods by the fields the effective-resource
rule reads and computes each group once. Its answer must be the rule's
(`kube.pods.effective_pod_resources`) summed pod by pod, for every field the
rule reads: pod-level `spec.resources`, in-place resize statuses and the
Infeasible condition included. Before this test the grouping dropped those
fields, so a pod of `spec.resources.limits.cpu: 4` counted no cpu at all,
and a resized pod counted its spec instead of what it runs with."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.budgets.usage import check_pod_numbers, pod_usage
from cozyrender.kube.pods import effective_pod_resources, is_terminated
from cozyrender.kube.shape import ShapeError

QUANTITIES = st.sampled_from(["0", "1", "2", "500m", "3", "1Gi", "512Mi", "0.25"])
NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"])
SIDES = st.dictionaries(NAMES, QUANTITIES, max_size=3)


def resources():
    return st.fixed_dictionaries({}, optional={"limits": SIDES, "requests": SIDES})


def container(name: str):
    return st.fixed_dictionaries({"name": st.just(name)}, optional={"resources": resources()})


def init_container(name: str):
    return st.fixed_dictionaries({"name": st.just(name)}, optional={
        "resources": resources(), "restartPolicy": st.sampled_from(["Always", "OnFailure"])})


def status(name: str):
    return st.fixed_dictionaries({"name": st.sampled_from([name, name, "other"])}, optional={
        "resources": resources(), "allocatedResources": SIDES})


@st.composite
def pods(draw) -> dict:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    inits = draw(st.lists(st.sampled_from(["i1", "i2", "s1"]), max_size=2, unique=True))
    spec: dict = {"containers": [draw(container(name)) for name in names]}
    if inits:
        spec["initContainers"] = [draw(init_container(name)) for name in inits]
    if draw(st.booleans()):
        spec["resources"] = draw(resources())
    if draw(st.booleans()):
        spec["overhead"] = draw(SIDES)
    pod: dict = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-a"},
                 "spec": spec, "status": {"phase": draw(st.sampled_from(["Running", "Pending", "Succeeded"]))}}
    if draw(st.booleans()):
        pod["status"]["containerStatuses"] = [draw(status(name)) for name in names]
    if inits and draw(st.booleans()):
        pod["status"]["initContainerStatuses"] = [draw(status(name)) for name in inits]
    if draw(st.booleans()):
        pod["status"]["conditions"] = [{"type": "PodResizePending",
                                        "reason": draw(st.sampled_from(["Infeasible", "Deferred"]))}]
    return pod


def by_the_rule(pod_list: list[dict]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    running = 0
    for pod in pod_list:
        if is_terminated(pod):
            continue
        running += 1
        for side in ("requests", "limits"):
            for name, value in effective_pod_resources(pod, side).items():
                total[f"{side}.{name}"] = total.get(f"{side}.{name}", Fraction(0)) + value
    if running:
        total["pods"] = Fraction(running)
    return total


@settings(max_examples=400, deadline=None)
@given(st.lists(pods(), min_size=1, max_size=6), st.data())
def test_grouped_usage_is_the_rule_pod_by_pod(pod_list, data):
    # Repeat some pods: a group of identical pods is computed once and counted per pod.
    repeated = pod_list + data.draw(st.lists(st.sampled_from(pod_list), max_size=4))
    expected = {key: value for key, value in by_the_rule(repeated).items() if value or key == "pods"}
    got = {key: value for key, value in pod_usage(repeated).items() if value or key == "pods"}
    assert got == expected


def test_pod_level_resources_count():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-a"},
           "spec": {"resources": {"limits": {"cpu": "4"}}, "containers": [{"name": "c"}]},
           "status": {"phase": "Running"}}
    assert pod_usage([pod]) == {"requests.cpu": 4, "limits.cpu": 4, "pods": 1}


def test_a_resized_pod_counts_what_it_runs_with():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-a"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]},
           "status": {"phase": "Running", "containerStatuses": [{"name": "c", "resources": {"limits": {"cpu": "3"}}}]}}
    assert pod_usage([pod])["limits.cpu"] == 3


# Values Python holds equal although the rule reads them differently (`true`
# is no quantity, `1` and `1.0` are), and values of the wrong type in the
# fields the grouping key reads: a group must never join them, so the answer
# (figures or the error naming a pod) cannot depend on which pod comes first.
ODD_VALUES = st.sampled_from([1, 1.0, True, "1", 0, False, "0", None, [], {}, "x", 2**70])


@st.composite
def odd_pods(draw) -> dict:
    pod = draw(pods())
    pod["status"]["phase"] = "Running"
    container = pod["spec"]["containers"][0]
    where = draw(st.sampled_from(["quantity", "resources", "name", "condition", "status-name", "allocated"]))
    value = draw(ODD_VALUES)
    if where == "quantity":
        container["resources"] = {"limits": {"cpu": value}}
    elif where == "resources":
        container["resources"] = value
    elif where == "name":
        container["name"] = value
    elif where == "condition":
        pod["status"]["containerStatuses"] = [{"name": container["name"]}]
        pod["status"]["conditions"] = [{"type": value}, {"type": "PodResizePending", "reason": "Infeasible"}]
    elif where == "status-name":
        pod["status"]["containerStatuses"] = [{"name": value, "resources": {"limits": {"cpu": "2"}}}]
    else:
        pod["status"]["containerStatuses"] = [{"name": container["name"], "allocatedResources": {"cpu": value}}]
    return pod


def _answer(pod_list: list[dict]):
    """pod_usage's answer, or the error (its message names the pod and field)."""
    try:
        return {key: value for key, value in pod_usage(pod_list).items() if value or key == "pods"}
    except ShapeError as err:
        return ("error", str(err))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(pods(), odd_pods()), min_size=1, max_size=5), st.data())
def test_grouping_never_joins_values_the_rule_reads_differently(pod_list, data):
    for index, pod in enumerate(pod_list):
        pod["metadata"]["name"] = f"p{index}"  # one name per pod: an error names which
    order = data.draw(st.permutations(pod_list))
    first, second = _answer(pod_list), _answer(order)
    try:
        for pod in pod_list:
            check_pod_numbers(pod)  # as pod_usage does before it parses a figure
        expected = {key: value for key, value in by_the_rule(pod_list).items() if value or key == "pods"}
    except ShapeError:
        assert first[0] == "error" and second[0] == "error"
        return
    assert first == expected and second == expected


def test_a_number_and_a_boolean_are_not_one_group():
    def pod(name: str, cpu: object) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "tenant-a"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]},
                "status": {"phase": "Running"}}
    good, bad = pod("good", 1), pod("bad", True)
    for order in ([good, bad], [bad, good]):
        with pytest.raises(ShapeError, match="bad"):
            pod_usage(order)
    assert pod_usage([good, pod("good2", 1)])["limits.cpu"] == 2
