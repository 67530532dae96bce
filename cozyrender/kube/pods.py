"""Effective pod resources, by Kubernetes 1.35's rule (component-helpers
`resource.PodRequests`/`PodLimits`, as the scheduler calls them with
in-place resize and pod-level resources on, both on by default in 1.35):

* Containers: the app containers and sidecars (init containers with
  `restartPolicy: Always`) add up; a sidecar keeps running under every later
  init container, so each init container's figure is its own plus the
  sidecars started before it; the pod takes the larger of the sum and the
  largest init-phase figure.
* In-place resize (GA): with container statuses, the pod's figure is the
  larger, per resource, of three sums over its containers (each by the rule
  above): the spec's, the running one's (each container's
  `status.containerStatuses[].resources.requests|limits`, else for requests
  its `allocatedResources`, else its spec) and, for requests, the allocated
  one's (`allocatedResources`, else the spec). A max of sums, not a sum of
  per-container maxes (component-helpers `TestPodResourceLimits`/`Requests`,
  "aggregate ... resolves max of sums instead of sum of maxes"). While a
  resize is Infeasible (condition `PodResizePending`, reason `Infeasible`)
  the spec figure, and a container's spec fallback, are left out.
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

import marshal
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
    if type(status) is dict and type(status.get("phase")) is str:  # as the API writes it: no more to check
        return status["phase"] in TERMINATED_PHASES
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


def _status_side(status: Mapping, side: str, pod: Mapping, where: str) -> Resources | None:
    """`status.resources.<side>` of a container status entry; None when not reported."""
    resources = status.get("resources")
    if resources is None:
        return None
    resources = as_mapping(resources, pod, f"{where}.resources")
    if resources.get(side) is None:
        return None
    return _figures(resources, side, pod, f"{where}.resources")


def _allocated(status: Mapping, pod: Mapping, where: str) -> Resources | None:
    if status.get("allocatedResources") is None:
        return None
    return {name: quantity(value, pod, f"{where}.allocatedResources.{name}")
            for name, value in mapping(status, "allocatedResources", pod, where).items()}


def _spec_figure(side: str):
    def figure(container: Mapping, pod: Mapping, at: str, status) -> Resources:
        return container_resources(container, side, pod, at)
    return figure


def _actuated_figure(side: str, infeasible: bool):
    """What a container runs with: its reported figure (for requests, else
    what is allocated to it); without one, its spec, or nothing while a
    resize is Infeasible."""
    def figure(container: Mapping, pod: Mapping, at: str, status) -> Resources:
        if status is not None:
            entry, where = status
            reported = _status_side(entry, side, pod, where)
            if reported is not None:
                return reported
            if side == "requests":
                allocated = _allocated(entry, pod, where)
                if allocated is not None:
                    return allocated
        return {} if infeasible else container_resources(container, side, pod, at)
    return figure


def _allocated_figure(infeasible: bool):
    """What is allocated to a container (requests): its allocatedResources,
    else its spec, or nothing while a resize is Infeasible."""
    def figure(container: Mapping, pod: Mapping, at: str, status) -> Resources:
        if status is not None:
            allocated = _allocated(status[0], pod, status[1])
            if allocated is not None:
                return allocated
        return {} if infeasible else container_resources(container, "requests", pod, at)
    return figure


def _aggregate(pod: Mapping, figure, statuses: dict[str, tuple[Mapping, str]]) -> Resources:
    """The pod's figure from one figure per container: app containers and
    sidecars add up; each init container counts with the sidecars started
    before it; the pod takes the larger of the sum and the largest init phase."""
    spec = mapping(pod, "spec", pod)

    def of(container: Mapping, at: str) -> Resources:
        name = string(container, "name", pod, at)
        return figure(container, pod, at, statuses.get(name) if name is not None else None)

    total: Resources = {}
    for index, container in enumerate(mappings(spec, "containers", pod, "spec")):
        _add(total, of(container, f"spec.containers[{index}]"))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for index, container in enumerate(mappings(spec, "initContainers", pod, "spec")):
        at = f"spec.initContainers[{index}]"
        own = of(container, at)
        if string(container, "restartPolicy", pod, at) == "Always":
            _add(total, own)
            _add(sidecars, own)
            phase = dict(sidecars)
        else:
            phase = dict(own)
            _add(phase, sidecars)
        _max_into(init_peak, phase)
    _max_into(total, init_peak)
    return total


def _containers(pod: Mapping, side: str) -> Resources:
    """The containers' figure. With container statuses (in-place resize), the
    larger, per resource, of the pod's spec figure, its running figure and
    (requests) its allocated figure, each summed over the containers first:
    a max of sums, never a sum of per-container maxes. While a resize is
    Infeasible the spec figure is left out."""
    statuses = _statuses(pod)
    if not statuses:
        return _aggregate(pod, _spec_figure(side), statuses)
    infeasible = _resize_infeasible(pod)
    figures: list[Resources] = [] if infeasible else [_aggregate(pod, _spec_figure(side), statuses)]
    figures.append(_aggregate(pod, _actuated_figure(side, infeasible), statuses))
    if side == "requests":
        figures.append(_aggregate(pod, _allocated_figure(infeasible), statuses))
    total: Resources = {}
    for figure in figures:
        _max_into(total, figure)
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


class _Irregular(Exception):
    """A field of another type than the API writes: `reading_key` leaves the pod to the rule."""


def _listed(value: object) -> list | tuple:
    if value is None:
        return ()
    if type(value) is not list:
        raise _Irregular
    return value


_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")


def reading_key(pod: Mapping) -> bytes | None:
    """Every field `effective_pod_resources` reads from a (not terminated)
    pod, as one key: two pods with equal keys get the same figures (or the
    same error), so pods can be grouped by it and each group computed once.
    The fields: the containers' and init containers' names and `resources`,
    init containers' `restartPolicy`, `spec.overhead`, `spec.resources`, the
    container statuses' names, `resources` and `allocatedResources`, and
    the reason of the first PodResizePending condition. Each is taken whole,
    whatever it holds.

    The key is those values in `marshal`'s format (version 2: no
    back-references, so equal values give equal bytes), which is exact: it
    can be read back into the very values, types included, so `1`, `1.0`,
    `true` and `"1"` never share a key although Python holds some of them
    equal. Maps in another key order only make another group. Hashing bytes
    is also far cheaper than hashing nested tuples. None for a pod whose
    fields are not the types the API writes (a list where a map belongs, a
    condition type that is not a string, a value marshal cannot write): the
    caller reads that one on its own, which names the wrong field."""
    spec, status = pod.get("spec"), pod.get("status")
    try:
        if spec is None:
            read_spec: tuple | None = None
        else:
            read_spec = (
                [(c.get("name"), c.get("resources")) for c in _listed(spec.get("containers"))],
                [(c.get("name"), c.get("resources"), c.get("restartPolicy"))
                 for c in _listed(spec.get("initContainers"))],
                spec.get("overhead"),
                spec.get("resources"),
            )
        read_status: tuple | None = None
        if status is not None:
            statuses = [(e.get("name"), e.get("resources"), e.get("allocatedResources"))
                        for key in _STATUS_LISTS for e in _listed(status.get(key))]
            resize = None
            for condition in _listed(status.get("conditions")):  # every one a map (AttributeError)
                kind = condition.get("type")
                if resize is None:  # the rule reads types up to the first PodResizePending
                    if kind is not None and type(kind) is not str:
                        return None
                    if kind == "PodResizePending":
                        resize = (condition.get("reason"),)
            read_status = (statuses, resize)
        return marshal.dumps((read_spec, read_status), 2)
    except (_Irregular, AttributeError, ValueError):  # ValueError: marshal cannot write a value
        return None


def read_fields(key: bytes) -> dict:
    """A pod holding only the fields `reading_key` read (`key` is its
    answer for some pod): the fields, their values and their order as that
    pod has them, so the effective-resource rule gives both the same
    figures. No metadata: it stands for every pod of the key. Container
    statuses and init container statuses are kept as one list (the rule
    reads them into one map by name, in that order); of the conditions only
    the first PodResizePending is kept (the rule reads no other's reason,
    and their types only to find it)."""
    read_spec, read_status = marshal.loads(key)
    pod: dict = {"kind": "Pod"}
    if read_spec is not None:
        containers, inits, overhead, resources = read_spec
        pod["spec"] = {
            "containers": [{"name": name, "resources": res} for name, res in containers],
            "initContainers": [{"name": name, "resources": res, "restartPolicy": policy}
                               for name, res, policy in inits],
            "overhead": overhead,
            "resources": resources,
        }
    if read_status is not None:
        statuses, resize = read_status
        status: dict = {"containerStatuses": [{"name": name, "resources": res, "allocatedResources": allocated}
                                              for name, res, allocated in statuses]}
        if resize is not None:
            status["conditions"] = [{"type": "PodResizePending", "reason": resize[0]}]
        pod["status"] = status
    return pod


def is_extended_resource(name: str) -> bool:
    """A device-plugin (extended) resource name: domain-prefixed, outside
    `kubernetes.io/` (Kubernetes' `IsExtendedResourceName`; `requests.`
    quota spellings are no resource names)."""
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


def extended_resource_names(pod: Mapping) -> set[str]:
    """The extended resources a pod names in a container's (or init
    container's) requests or limits or in its overhead, read by name only:
    no quantity is parsed, so a hostile figure costs nothing here."""
    found: set[str] = set()
    spec = pod.get("spec")
    if type(spec) is not dict:
        return found
    overhead = spec.get("overhead")
    if type(overhead) is dict:
        found.update(k for k in overhead if type(k) is str and is_extended_resource(k))
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if type(containers) is not list:
            continue
        for container in containers:
            resources = container.get("resources") if type(container) is dict else None
            if type(resources) is not dict:
                continue
            for side in ("requests", "limits"):
                figures = resources.get(side)
                if type(figures) is dict:
                    found.update(k for k in figures if type(k) is str and is_extended_resource(k))
    return found


def may_hold_devices(pod: Mapping) -> bool:
    """Whether a pod names any extended resource (`extended_resource_names`):
    pods that do not are never doors."""
    return bool(extended_resource_names(pod))
