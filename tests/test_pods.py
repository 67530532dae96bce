"""Kubernetes' effective pod request/limit rule (kube/pods.py), which the budget
usage and the free-units figures both use."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from cozyrender.kube.pods import effective_pod_resources, sum_pod_resources


def container(cpu=None, limit=None, **extra):
    resources = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    return {"name": "c", "resources": resources, **extra}


def pod(containers=(), init=(), overhead=None, phase="Running"):
    spec = {"containers": list(containers), "initContainers": list(init)}
    if overhead:
        spec["overhead"] = {"cpu": overhead}
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec, "status": {"phase": phase}}


def cpu(p, side="requests"):
    return effective_pod_resources(p, side).get("cpu", Fraction(0))


def test_app_containers_add_up():
    assert cpu(pod([container("500m"), container("1")])) == Fraction(3, 2)


def test_an_init_container_larger_than_the_app_wins():
    assert cpu(pod([container("1")], init=[container("3"), container("2")])) == 3


def test_sidecars_run_beside_later_init_containers_and_the_app():
    sidecar = container("1", restartPolicy="Always")
    # init phase: sidecar 1 + init 2 = 3; app phase: 1 + sidecar 1 = 2
    assert cpu(pod([container("1")], init=[sidecar, container("2")])) == 3
    # an init container that runs before the sidecar does not see it
    assert cpu(pod([container("1")], init=[container("2"), sidecar])) == 2


def test_overhead_is_added_to_requests_and_only_to_set_limits():
    with_limit = pod([container("1", limit="2")], overhead="250m")
    assert cpu(with_limit) == Fraction(5, 4)
    assert cpu(with_limit, "limits") == Fraction(9, 4)
    without_limit = pod([container("1")], overhead="250m")
    assert cpu(without_limit, "limits") == 0


def test_a_limit_without_a_request_is_requested_at_the_limit():
    assert cpu(pod([container(limit="2")])) == 2


def test_terminated_pods_hold_nothing():
    pods = [pod([container("1")]), pod([container("5")], phase="Succeeded"), pod([container("7")], phase="Failed"),
            pod([container("2")], phase="Pending")]
    assert sum_pod_resources(pods)["cpu"] == 3


millis = st.integers(0, 4000).map(lambda m: f"{m}m")


@given(st.lists(millis, max_size=4), st.lists(st.tuples(millis, st.booleans()), max_size=4), st.one_of(st.none(), millis))
def test_effective_request_bounds(app, init, overhead):
    containers = [container(c) for c in app]
    inits = [container(c, restartPolicy="Always") if sidecar else container(c) for c, sidecar in init]
    got = cpu(pod(containers, inits, overhead))
    extra = Fraction(int(overhead[:-1]), 1000) if overhead else 0
    app_sum = sum((Fraction(int(c[:-1]), 1000) for c in app), Fraction(0))
    sidecar_sum = sum((Fraction(int(c[:-1]), 1000) for c, s in init if s), Fraction(0))
    assert got >= app_sum + sidecar_sum + extra  # app containers and every sidecar run together
    for c, sidecar in init:
        assert got >= Fraction(int(c[:-1]), 1000) + extra  # each init container runs at some point
    # never more than everything at once
    assert got <= app_sum + sum((Fraction(int(c[:-1]), 1000) for c, _ in init), Fraction(0)) + extra
