"""Effective pod resources, by Kubernetes' rule (the scheduler's and the quota's):

    max(sum over app containers and sidecars, the largest init-phase figure) + overhead

(on the limits side, overhead is added only to resources that have a limit)
where a sidecar is an init container with `restartPolicy: Always`: it adds to
the app containers' sum and stays running under every later init container.
Fields are read through `cozyrender.kube.shape`: a malformed pod is a
ShapeError naming the pod and the field. Pure functions over pod dicts as
the API returns them, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from cozyrender.kube.shape import as_mapping, mapping, mappings, quantity, string

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})

Resources = dict[str, Fraction]


def is_terminated(pod: Mapping) -> bool:
    """Pods that finished hold no resources; pending pods do."""
    status = pod.get("status")
    if status is None:
        return False
    return string(as_mapping(status, pod, "status"), "phase", pod, "status") in TERMINATED_PHASES


def container_resources(container: Mapping, side: str = "requests", pod: Mapping | None = None,
                        at: str = "container") -> Resources:
    """A container's requests (or limits). A resource with a limit but no
    request is requested at its limit, as the API server defaults it.
    Errors name `pod` (the container itself when not given) and `at`."""
    owner = container if pod is None else pod
    spec = mapping(container, "resources", owner, at)
    at = f"{at}.resources"
    figures = {name: quantity(value, owner, f"{at}.{side}.{name}")
               for name, value in mapping(spec, side, owner, at).items()}
    if side == "requests":
        for name, limit in mapping(spec, "limits", owner, at).items():
            if name not in figures:
                figures[name] = quantity(limit, owner, f"{at}.limits.{name}")
    return figures


def _add(total: Resources, more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max_into(total: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > total.get(name, Fraction(0)):
            total[name] = value


def effective_pod_resources(pod: Mapping, side: str = "requests") -> Resources:
    """The pod's effective requests (or limits) per resource name."""
    spec = mapping(pod, "spec", pod)
    app: Resources = {}
    for index, container in enumerate(mappings(spec, "containers", pod, "spec")):
        _add(app, container_resources(container, side, pod, f"spec.containers[{index}]"))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for index, container in enumerate(mappings(spec, "initContainers", pod, "spec")):
        at = f"spec.initContainers[{index}]"
        own = container_resources(container, side, pod, at)
        if string(container, "restartPolicy", pod, at) == "Always":
            _add(app, own)
            _add(sidecars, own)
            phase = dict(sidecars)
        else:
            phase = dict(sidecars)
            _add(phase, own)
        _max_into(init_peak, phase)
    _max_into(app, init_peak)
    overhead = {name: quantity(v, pod, f"spec.overhead.{name}")
                for name, v in mapping(spec, "overhead", pod, "spec").items()}
    if side == "limits":  # as Kubernetes does: overhead raises only limits that are set
        overhead = {name: value for name, value in overhead.items() if name in app}
    _add(app, overhead)
    return app


def effective_pod_resource(pod: Mapping, resource: str, side: str = "requests") -> Fraction:
    """One resource of `effective_pod_resources`, zero when the pod does not use it."""
    return effective_pod_resources(pod, side).get(resource, Fraction(0))


def sum_pod_resources(pods: Iterable[Mapping], side: str = "requests") -> Resources:
    """Summed effective resources of the pods that are not terminated."""
    total: Resources = {}
    for pod in pods:
        if not is_terminated(pod):
            _add(total, effective_pod_resources(pod, side))
    return total
