"""Effective pod resources, by Kubernetes' rule (the scheduler's and the quota's):

    max(sum over app containers and sidecars, the largest init-phase figure) + overhead

where a sidecar is an init container with `restartPolicy: Always`: it adds to
the app containers' sum and stays running under every later init container.
Pure functions over pod dicts as the API returns them, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from cozyrender.kube.quantity import parse_quantity

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})

Resources = dict[str, Fraction]


def is_terminated(pod: Mapping) -> bool:
    """Pods that finished hold no resources; pending pods do."""
    return (pod.get("status") or {}).get("phase") in TERMINATED_PHASES


def container_resources(container: Mapping, side: str = "requests") -> Resources:
    """A container's requests (or limits). A resource with a limit but no
    request is requested at its limit, as the API server defaults it."""
    spec = container.get("resources") or {}
    figures = dict(spec.get(side) or {})
    if side == "requests":
        for name, limit in (spec.get("limits") or {}).items():
            figures.setdefault(name, limit)
    return {name: parse_quantity(value) for name, value in figures.items()}


def _add(total: Resources, more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max_into(total: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > total.get(name, Fraction(0)):
            total[name] = value


def effective_pod_resources(pod: Mapping, side: str = "requests") -> Resources:
    """The pod's effective requests (or limits) per resource name."""
    spec = pod.get("spec") or {}
    app: Resources = {}
    for container in spec.get("containers") or ():
        _add(app, container_resources(container, side))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or ():
        own = container_resources(container, side)
        if container.get("restartPolicy") == "Always":
            _add(app, own)
            _add(sidecars, own)
            phase = dict(sidecars)
        else:
            phase = dict(sidecars)
            _add(phase, own)
        _max_into(init_peak, phase)
    _max_into(app, init_peak)
    _add(app, {name: parse_quantity(v) for name, v in (spec.get("overhead") or {}).items()})
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
