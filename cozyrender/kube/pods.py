"""Effective pod resources, by Kubernetes 1.35's rule (component-helpers
`resource.PodRequests`/`PodLimits`, as the scheduler calls them with
in-place resize and pod-level resources on, both on by default in 1.35):

* Containers: the app containers and sidecars (init containers with
  `restartPolicy: Always`) add up; a sidecar keeps running under every later
  init container, so each init container's figure is its own plus the
  sidecars started before it; the pod takes the larger of the sum and the
  largest init-phase figure.
* In-place resize (GA): a container (or sidecar) with a status entry that
  reports `resources` counts the larger of its spec requests, the requests
  it runs with (`status.containerStatuses[].resources.requests`) and those
  allocated to it (`allocatedResources`); limits, the larger of spec and
  running limits. While a resize is Infeasible (condition
  `PodResizePending`, reason `Infeasible`) the spec is left out.
* Pod-level resources: `spec.resources` sets the pod's cpu, memory and
  hugepages-* figures, replacing the containers' sum for those resources
  (other resources still come from the containers).
* Overhead (`spec.overhead`) is added to every request, and only to a limit
  that is set and not zero.

Deliberate difference, where cozyrender reads a pod the API server has not
defaulted (a rendered manifest): a container resource with a limit and no
request is requested at its limit, and a pod-level cpu/memory/hugepages
limit with no pod-level request gives a request (the containers' sum for
cpu and memory when they request it, else the limit), as the API server's
defaulting would before anyone computes requests. component-helpers,
handed such an undefaulted pod, counts no request there.

Fields are read through `cozyrender.kube.shape`: a malformed pod is a
ShapeError naming the pod and the field. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from cozyrender.kube.shape import as_mapping, mapping, mappings, quantity, string

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
_POD_LEVEL = frozenset({"cpu", "memory"})
_HUGEPAGES = "hugepages-"
_OVERCOMMITTABLE = frozenset({"cpu", "memory"})

Resources = dict[str, Fraction]


def is_terminated(pod: Mapping) -> bool:
    """Pods that finished hold no resources; pending pods do."""
    status = pod.get("status")
    if status is None:
        return False
    return string(as_mapping(status, pod, "status"), "phase", pod, "status") in TERMINATED_PHASES


def is_pod_level_resource(name: str) -> bool:
    """cpu, memory and hugepages-*: the resources `spec.resources` may set."""
    return name in _POD_LEVEL or name.startswith(_HUGEPAGES)


def _figures(spec: Mapping, side: str, owner: Mapping, at: str) -> Resources:
    return {name: quantity(value, owner, f"{at}.{side}.{name}")
            for name, value in mapping(spec, side, owner, at).items()}


def container_resources(container: Mapping, side: str = "requests", pod: Mapping | None = None,
                        at: str = "container") -> Resources:
    """A container's spec requests (or limits). A resource with a limit but
    no request is requested at its limit, as the API server defaults it.
    Errors name `pod` (the container itself when not given) and `at`."""
    owner = container if pod is None else pod
    spec = mapping(container, "resources", owner, at)
    at = f"{at}.resources"
    figures = _figures(spec, side, owner, at)
    if side == "requests":
        for name, limit in _figures(spec, "limits", owner, at).items():
            figures.setdefault(name, limit)
    return figures


def _add(total: Resources, more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max_into(total: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if name not in total or value > total[name]:
            total[name] = value


def _resize_infeasible(pod: Mapping) -> bool:
    status = mapping(pod, "status", pod)
    for index, condition in enumerate(mappings(status, "conditions", pod, "status")):
        if string(condition, "type", pod, f"status.conditions[{index}]") == "PodResizePending":
            return string(condition, "reason", pod, f"status.conditions[{index}]") == "Infeasible"
    return False


def _statuses(pod: Mapping) -> dict[str, tuple[Mapping, str]]:
    """Container statuses by container name, with their paths."""
    status = mapping(pod, "status", pod)
    found: dict[str, tuple[Mapping, str]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for index, entry in enumerate(mappings(status, key, pod, "status")):
            name = string(entry, "name", pod, f"status.{key}[{index}]")
            if name is not None:
                found[name] = (entry, f"status.{key}[{index}]")
    return found


def _effective(container: Mapping, side: str, pod: Mapping, at: str,
               statuses: dict[str, tuple[Mapping, str]], infeasible: bool) -> Resources:
    """A container's figure with in-place resize: the larger of spec,
    running and (for requests) allocated figures."""
    spec = container_resources(container, side, pod, at)
    name = string(container, "name", pod, at)
    entry = statuses.get(name) if name is not None else None
    if entry is None or entry[0].get("resources") is None:
        return spec
    status, where = entry
    running = _figures(mapping(status, "resources", pod, where), side, pod, f"{where}.resources")
    figures: Resources = {} if infeasible else dict(spec)
    if infeasible and side == "limits":
        return running
    _max_into(figures, running)
    if side == "requests":
        _max_into(figures, _figures(status, "allocatedResources", pod, where) if "allocatedResources" in status
                  else {})
    return figures


def _containers(pod: Mapping, side: str) -> Resources:
    spec = mapping(pod, "spec", pod)
    statuses = _statuses(pod)
    infeasible = _resize_infeasible(pod) if statuses else False
    total: Resources = {}
    for index, container in enumerate(mappings(spec, "containers", pod, "spec")):
        _add(total, _effective(container, side, pod, f"spec.containers[{index}]", statuses, infeasible))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for index, container in enumerate(mappings(spec, "initContainers", pod, "spec")):
        at = f"spec.initContainers[{index}]"
        if string(container, "restartPolicy", pod, at) == "Always":
            own = _effective(container, side, pod, at, statuses, infeasible)
            _add(total, own)
            _add(sidecars, own)
            phase = dict(sidecars)
        else:
            phase = dict(container_resources(container, side, pod, at))
            _add(phase, sidecars)
        _max_into(init_peak, phase)
    _max_into(total, init_peak)
    return total


def _pod_level(pod: Mapping, side: str, containers: Resources) -> Resources:
    """`spec.resources` figures for the pod-level resources, requests
    defaulted as the API server defaults them."""
    spec = mapping(pod, "spec", pod)
    resources = spec.get("resources")
    if resources is None:
        return {}
    resources = as_mapping(resources, pod, "spec.resources")
    limits = _figures(resources, "limits", pod, "spec.resources")
    if side == "limits":
        return {name: value for name, value in limits.items() if is_pod_level_resource(name)}
    requests = _figures(resources, "requests", pod, "spec.resources")
    for name, limit in limits.items():
        if name not in requests and is_pod_level_resource(name):
            requests[name] = containers[name] if name in _OVERCOMMITTABLE and name in containers else limit
    return {name: value for name, value in requests.items() if is_pod_level_resource(name)}


def effective_pod_resources(pod: Mapping, side: str = "requests") -> Resources:
    """The pod's effective requests (or limits) per resource name."""
    figures = _containers(pod, side)
    figures.update(_pod_level(pod, side, figures))
    spec = mapping(pod, "spec", pod)
    overhead = {name: quantity(v, pod, f"spec.overhead.{name}")
                for name, v in mapping(spec, "overhead", pod, "spec").items()}
    if side == "limits":  # overhead raises only limits that are set and not zero
        overhead = {name: value for name, value in overhead.items() if figures.get(name)}
    _add(figures, overhead)
    return figures


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
