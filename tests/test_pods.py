"""Kubernetes' effective pod request/limit rule (kube/pods.py), which the budget
usage and the free-units figures both use."""

from __future__ import annotations

from fractions import Fraction

import pytest

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


# -- Kubernetes 1.35: pod-level resources, in-place resize, overhead on zero limits --------

def _pod(containers, **spec_extra):
    return {"metadata": {"name": "p", "namespace": "n"},
            "spec": {"containers": containers, **spec_extra}}


def test_pod_level_resources_replace_the_containers_sum_for_cpu_memory_hugepages():
    pod = _pod([{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
               resources={"requests": {"cpu": "3", "nvidia.com/gpu": "5"}, "limits": {"memory": "4Gi"}})
    requests = effective_pod_resources(pod)
    # cpu from the pod level; memory defaulted from the containers' sum (they request it);
    # the GPU is not a pod-level resource, so it stays the containers' figure.
    assert requests == {"cpu": 3, "memory": 2**30, "nvidia.com/gpu": 1}
    assert effective_pod_resources(pod, "limits") == {"memory": 4 * 2**30}


def test_pod_level_limit_alone_defaults_the_request_to_it():
    pod = _pod([{"name": "a"}], resources={"limits": {"cpu": "2", "hugepages-2Mi": "4Mi"}})
    assert effective_pod_resources(pod) == {"cpu": 2, "hugepages-2Mi": 4 * 2**20}


def test_in_place_resize_counts_the_larger_of_spec_running_and_allocated():
    pod = _pod([{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}}])
    pod["status"] = {"containerStatuses": [{"name": "a", "allocatedResources": {"cpu": "3"},
                                            "resources": {"requests": {"memory": "2Gi"}, "limits": {"cpu": "1"}}}]}
    assert effective_pod_resources(pod) == {"cpu": 3, "memory": 2 * 2**30}
    assert effective_pod_resources(pod, "limits") == {"cpu": 2}
    pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    assert effective_pod_resources(pod) == {"cpu": 3, "memory": 2 * 2**30}   # spec left out
    assert effective_pod_resources(pod, "limits") == {"cpu": 1}              # running limits only
    del pod["status"]["containerStatuses"][0]["resources"]                   # no running figures: allocated
    assert effective_pod_resources(pod) == {"cpu": 3}
    del pod["status"]["conditions"]                                         # feasible again: spec counts too
    assert effective_pod_resources(pod) == {"cpu": 3, "memory": 2**30}


def test_overhead_is_not_added_to_a_zero_limit():
    pod = _pod([{"name": "a", "resources": {"limits": {"cpu": "0", "memory": "1Gi"}}}],
               overhead={"cpu": "250m", "memory": "100Mi"})
    assert effective_pod_resources(pod, "limits") == {"cpu": 0, "memory": 2**30 + 100 * 2**20}


def test_malformed_status_is_a_shape_error():
    from cozyrender.kube.shape import ShapeError
    pod = _pod([{"name": "a"}])
    pod["status"] = {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
    with pytest.raises(ShapeError, match=r"status.containerStatuses\[0\].resources.requests.cpu"):
        effective_pod_resources(pod)


_CPU = st.integers(0, 64)


@given(spec=_CPU, running=st.none() | _CPU, allocated=st.none() | _CPU, infeasible=st.booleans(),
       pod_level=st.none() | _CPU)
def test_resize_and_pod_level_rule(spec, running, allocated, infeasible, pod_level):
    """A resized container counts the largest of its spec, running and
    allocated requests (spec left out while Infeasible); a pod-level cpu
    request replaces the containers' figure; overhead is added last."""
    # (one container: the max of sums is the max of its figures)
    p = _pod([{"name": "a", "resources": {"requests": {"cpu": str(spec)}}}], overhead={"cpu": "1"})
    status = {"name": "a"}
    if running is not None:
        status["resources"] = {"requests": {"cpu": str(running)}}
    if allocated is not None:
        status["allocatedResources"] = {"cpu": str(allocated)}
    p["status"] = {"containerStatuses": [status]}
    if infeasible:
        p["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    if pod_level is not None:
        p["spec"]["resources"] = {"requests": {"cpu": str(pod_level)}}
    # the running figure: reported, else allocated, else the spec (nothing while Infeasible)
    actuated = running if running is not None else allocated if allocated is not None else (
        None if infeasible else spec)
    allocated_figure = allocated if allocated is not None else (None if infeasible else spec)
    candidates = [c for c in (actuated, allocated_figure, None if infeasible else spec) if c is not None]
    expected = max(candidates, default=0)
    if pod_level is not None:
        expected = pod_level
    assert effective_pod_resources(p)["cpu"] == expected + 1


@given(specs=st.lists(_CPU, min_size=1, max_size=4), data=st.data(), side=st.sampled_from(["requests", "limits"]))
def test_resized_containers_count_the_max_of_sums_not_the_sum_of_maxes(specs, data, side):
    """Issue 19 item 5: Kubernetes sums the spec figures and the running
    figures over the containers, then takes the larger sum per resource."""
    running = [data.draw(st.none() | _CPU) for _ in specs]
    containers = [{"name": f"c{i}", "resources": {side: {"cpu": str(spec)}}} for i, spec in enumerate(specs)]
    statuses = [{"name": f"c{i}", **({"resources": {side: {"cpu": str(r)}}} if r is not None else {})}
                for i, r in enumerate(running)]
    pod = _pod(containers)
    pod["status"] = {"containerStatuses": statuses}
    spec_sum = sum(specs)
    running_sum = sum(r if r is not None else spec for r, spec in zip(running, specs))
    assert effective_pod_resources(pod, side)["cpu"] == max(spec_sum, running_sum)
