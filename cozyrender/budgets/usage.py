"""Ordinary usage of a namespace, read under the rendered quota's key.

The tenant chart flattens a declared key into a ResourceQuota key on the
limit side: `cpu` -> `limits.cpu`, `storage` -> `requests.storage`, object
counts (`pods`, `services`, `count/...`) as they are, keys already carrying
`requests.`/`limits.` as they are, any other resource `X` -> `limits.X`
(so `memory`, `ephemeral-storage`, `hugepages-2Mi`, `nvidia.com/gpu` are
read from limits). Usage is read under that key: from the namespace's
ResourceQuotas' `status.used` (the largest value across its quotas), or,
when no quota of the namespace tracks the key, summed over its
non-terminated pods by Kubernetes' effective-resource rule.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from fractions import Fraction
from functools import lru_cache

from cozyrender.keys import QUOTA_PREFIXES
from cozyrender.kube.pods import effective_pod_resources, is_terminated
from cozyrender.kube.quantity import format_binary_quantity, format_quantity
from cozyrender.kube.shape import ShapeError, mapping

from .bounds import bounded_quantity, check_resources

OBJECT_COUNTS = frozenset({
    "pods", "services", "services.loadbalancers", "services.nodeports", "secrets",
    "configmaps", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas",
})
_STORAGE_CLASS_DOMAIN = ".storageclass.storage.k8s.io/"

Usage = dict[str, Fraction]


def usage_key(declared_key: str) -> str:
    """The quota key a declared ordinary key is rendered as, and usage is read
    under: the one place declared keys are flattened. Declarations are
    compared by it too, so `cpu` and `limits.cpu` (or `storage` and
    `requests.storage`) are one key."""
    if declared_key == "storage":
        return "requests.storage"
    if (
        declared_key in OBJECT_COUNTS
        or declared_key.startswith(("count/", *QUOTA_PREFIXES))  # as written: quota keys are case-sensitive
        or _STORAGE_CLASS_DOMAIN in declared_key
    ):
        return declared_key
    return "limits." + declared_key


_BYTE_RESOURCES = frozenset({"memory", "storage", "ephemeral-storage"})


def is_byte_key(key: str) -> bool:
    """Whether a (declared or quota) key counts bytes: memory, storage,
    ephemeral-storage, hugepages, storage-class storage."""
    resource = key.rpartition("/")[2] if _STORAGE_CLASS_DOMAIN in key else key
    # Not keys.strip_quota_prefix: that one ignores case and drops one prefix.
    resource = resource.removeprefix("requests.").removeprefix("limits.")
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def format_amount(key: str, value: Fraction) -> str:
    """A figure of `key` for a message: bytes with binary suffixes (`10Gi`),
    anything else as `format_quantity` writes it."""
    return format_binary_quantity(value) if is_byte_key(key) else format_quantity(value)


def quota_usage(quotas: Iterable[Mapping]) -> Usage:
    """The largest `status.used` value per key across a namespace's ResourceQuotas.
    A value that is not a quantity is a ShapeError naming the quota and the key:
    skipping it would drop the key and count the pods instead, a guess."""
    used: Usage = {}
    for quota in quotas:
        status_used = mapping(mapping(quota, "status", quota), "used", quota, "status")
        for key, raw in status_used.items():
            value = bounded_quantity(raw, quota, f"status.used.{key}")
            if value > used.get(key, Fraction(0)):
                used[key] = value
            else:
                used.setdefault(key, value)
    return used


def pod_usage(pods: Iterable[Mapping], keys: Collection[str] | None = None) -> Usage:
    """The pods' usage under quota keys: `requests.X` and `limits.X` from
    their effective requests and limits, `pods` for how many run (only the
    quota keys in `keys`, when given).

    Pods of one workload share their resources, so pods are grouped by the
    fields the effective-resource rule reads and each distinct shape is
    computed once (by `cozyrender.kube.pods`, the single implementation).
    A malformed pod is a ShapeError naming it and the field."""
    shapes: dict[tuple, int] = {}
    first: dict[tuple, Mapping] = {}  # a pod of each shape, to name in an error
    used: Usage = {}
    running = 0
    for pod in pods:
        if is_terminated(pod):
            continue
        running += 1
        shape = _shape(pod)
        try:
            count = shapes.get(shape) if shape is not None else None
        except TypeError:  # a value that is not hashable, such as a list for a quantity
            shape = None
        if shape is None:  # not shaped as the fast path reads it: this pod alone, checked field by field
            check_pod_numbers(pod)
            for key, value in _figures_of(pod).items():
                if keys is None or key in keys:
                    used[key] = used.get(key, Fraction(0)) + value
            continue
        if count is None:
            first[shape] = pod
            shapes[shape] = 1
        else:
            shapes[shape] = count + 1
    # Sum in whole nano-units (ints are far cheaper than Fractions); a figure
    # finer than that stays a Fraction.
    nanos: dict[str, int] = {}
    for shape, count in shapes.items():
        try:
            whole, fine = _shape_figures(shape)
        except ShapeError as err:  # found on the shape's stand-in pod: name a real one
            raise err.about(first[shape]) from None
        for key, value in whole.items():
            if keys is None or key in keys:
                nanos[key] = nanos.get(key, 0) + value * count
        for key, value in fine.items():
            if keys is None or key in keys:
                used[key] = used.get(key, Fraction(0)) + value * count
    for key, value in nanos.items():
        used[key] = used.get(key, Fraction(0)) + Fraction(value, _NANO)
    if running:
        used["pods"] = Fraction(running)
    return used


_NANO = 10**9


class _Irregular(Exception):
    """A pod the fast path does not read: a field of another type than the API writes."""


def _items(value: object) -> tuple | None:
    """A map of quantities as a hashable tuple (None when absent)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise _Irregular
    return tuple(value.items())


def _resources(container: object) -> tuple:
    if type(container) is not dict:
        raise _Irregular
    name = container.get("name")
    if name is not None and type(name) is not str:
        raise _Irregular
    resources = container.get("resources")
    if resources is None:
        return (name, (), ())
    if type(resources) is not dict:
        raise _Irregular
    limits, requests = _items(resources.get("limits")), _items(resources.get("requests"))
    return (name, limits or (), requests or ())


def _init_container(container: object) -> tuple:
    resources = _resources(container)  # first: it checks that the container is a map
    return (container.get("restartPolicy"), resources)  # type: ignore[union-attr]


def _status_entry(entry: object) -> tuple:
    """(name, reported limits, reported requests, allocated) of a container
    status, each None when absent (the rule matches statuses to containers
    by name, and skips an entry without one)."""
    if type(entry) is not dict:
        raise _Irregular
    name = entry.get("name")
    if name is not None and type(name) is not str:
        raise _Irregular
    resources = entry.get("resources")
    if resources is not None and type(resources) is not dict:
        raise _Irregular
    limits = _items(resources.get("limits")) if resources else None
    requests = _items(resources.get("requests")) if resources else None
    return (name, limits, requests, _items(entry.get("allocatedResources")))


_STATUS_LISTS = ("containerStatuses", "initContainerStatuses")


def _statuses(status: object) -> tuple[tuple, bool]:
    """The container statuses the rule reads (in-place resize), one tuple per
    list of `_STATUS_LISTS` (entries in place, so an error names the right
    one), and whether a resize is Infeasible (the first PodResizePending
    condition says so)."""
    if status is None:
        return ((), ()), False
    if type(status) is not dict:
        raise _Irregular
    lists = []
    for key in _STATUS_LISTS:
        listed = status.get(key)
        if listed is not None and type(listed) is not list:
            raise _Irregular
        lists.append(tuple(map(_status_entry, listed)) if listed else ())
    conditions = status.get("conditions")
    if not any(lists) or conditions is None:
        return tuple(lists), False
    if type(conditions) is not list:
        raise _Irregular
    for condition in conditions:
        if type(condition) is not dict or type(condition.get("type")) not in (str, type(None)):
            raise _Irregular
        if condition.get("type") == "PodResizePending":
            reason = condition.get("reason")
            if reason is not None and type(reason) is not str:
                raise _Irregular
            return tuple(lists), reason == "Infeasible"
    return tuple(lists), False


def _shape(pod: Mapping) -> tuple | None:
    """Everything the effective-resource rule (`cozyrender.kube.pods`) reads
    from a pod: its containers (names, resources, restart policies), overhead,
    pod-level `spec.resources`, and the container statuses and resize
    condition of in-place resize; None for a pod whose fields are not the
    types the API writes (the caller reads it field by field, which names
    the wrong field)."""
    spec = pod.get("spec")
    if spec is None:
        return _NO_SHAPE
    if type(spec) is not dict:
        return None
    containers, init_containers, overhead = spec.get("containers"), spec.get("initContainers"), spec.get("overhead")
    if (type(containers) is not list and containers is not None) or (
            type(init_containers) is not list and init_containers is not None
    ) or (type(overhead) is not dict and overhead is not None):
        return None
    try:
        pod_level = spec.get("resources")
        if pod_level is not None:
            if type(pod_level) is not dict:
                return None
            pod_level = (_items(pod_level.get("limits")) or (), _items(pod_level.get("requests")) or ())
        statuses, infeasible = _statuses(pod.get("status"))
        shape = (
            tuple([_resources(c) for c in containers]) if containers else (),
            tuple([_init_container(c) for c in init_containers]) if init_containers else (),
            tuple(overhead.items()) if overhead else (),
            pod_level,
            statuses,
            infeasible,
        )
    except _Irregular:
        return None
    return shape


_NO_SHAPE: tuple = ((), (), (), None, ((), ()), False)


def _pod_of(shape: tuple) -> dict:
    """A pod with exactly the fields of `shape`: what the rule computes from."""
    containers, init_containers, overhead, pod_level, statuses, infeasible = shape

    def container(resources: tuple, restart_policy: str | None = None) -> dict:
        name, limits, requests = resources
        built: dict = {"resources": {"limits": dict(limits), "requests": dict(requests)}}
        if name is not None:
            built["name"] = name
        if restart_policy is not None:
            built["restartPolicy"] = restart_policy
        return built

    def status(entry: tuple) -> dict:
        name, limits, requests, allocated = entry
        built: dict = {} if name is None else {"name": name}
        reported = {side: dict(values) for side, values in (("limits", limits), ("requests", requests))
                    if values is not None}
        if reported:
            built["resources"] = reported
        if allocated is not None:
            built["allocatedResources"] = dict(allocated)
        return built

    spec: dict = {
        "containers": [container(c) for c in containers],
        "initContainers": [container(r, p) for p, r in init_containers],
        "overhead": dict(overhead),
    }
    if pod_level is not None:
        spec["resources"] = {"limits": dict(pod_level[0]), "requests": dict(pod_level[1])}
    pod: dict = {"spec": spec}
    if any(statuses):
        pod["status"] = {key: [status(entry) for entry in entries] for key, entries in zip(_STATUS_LISTS, statuses)}
        pod["status"]["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}] if infeasible else []
    return pod


def check_pod_numbers(pod: Mapping) -> None:
    """Every resource figure of `pod` within bounds (`bounds`), checked
    before any is parsed: one hostile pod must not stall the check for
    everyone. Fields of the wrong type are left to the pod reader, which
    names them."""
    spec = pod.get("spec")
    if type(spec) is not dict:
        return
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if type(containers) is not list:
            continue
        for index, container in enumerate(containers):
            if type(container) is dict:
                _check_sides(container.get("resources"), pod, f"spec.{field}[{index}].resources")
    overhead = spec.get("overhead")
    if type(overhead) is dict:
        check_resources(overhead, pod, "spec.overhead")
    _check_sides(spec.get("resources"), pod, "spec.resources")
    status = pod.get("status")
    for field in ("containerStatuses", "initContainerStatuses"):
        entries = status.get(field) if type(status) is dict else None
        if type(entries) is not list:
            continue
        for index, entry in enumerate(entries):
            if type(entry) is not dict:
                continue
            _check_sides(entry.get("resources"), pod, f"status.{field}[{index}].resources")
            if type(entry.get("allocatedResources")) is dict:
                check_resources(entry["allocatedResources"], pod, f"status.{field}[{index}].allocatedResources")


def _check_sides(resources: object, pod: Mapping, at: str) -> None:
    if type(resources) is not dict:
        return
    for side in ("limits", "requests"):
        if type(resources.get(side)) is dict:
            check_resources(resources[side], pod, f"{at}.{side}")


def _figures_of(pod: Mapping) -> Usage:
    return {f"{side}.{name}": value for side in ("requests", "limits")
            for name, value in effective_pod_resources(pod, side).items()}


@lru_cache(maxsize=4096)
def _shape_figures(shape: tuple) -> tuple[dict[str, int], Usage]:
    """One pod shape's figures: in nano-units where whole, else as Fractions."""
    whole: dict[str, int] = {}
    fine: Usage = {}
    stand_in = _pod_of(shape)
    check_pod_numbers(stand_in)  # the caller names the real pod
    for key, value in _figures_of(stand_in).items():
        scaled = value * _NANO
        if scaled.denominator == 1:
            whole[key] = scaled.numerator
        else:
            fine[key] = value
    return whole, fine


def usage_under(keys: Collection[str], quotas: list[Mapping] | None, pods: list[Mapping] | None) -> Usage:
    """One namespace's usage under each quota key of `keys`, from its
    ResourceQuotas and (for keys none of them tracks) its pods."""
    quota_used = quota_usage(quotas) if quotas else None
    pods_used: Usage = {}
    if pods and (quota_used is None or not set(keys) <= quota_used.keys()):
        pods_used = pod_usage(pods, keys)  # a malformed pod: ShapeError naming it
    return {key: namespace_usage(key, quota_used, pods_used) for key in keys}


def namespace_usage(key: str, quota_used: Usage | None, pods_used: Usage) -> Fraction:
    """Usage of one namespace under quota key `key`: its quotas' figure when
    one of them tracks the key, otherwise its pods' figure."""
    if quota_used is not None and key in quota_used:
        return quota_used[key]
    return pods_used.get(key, Fraction(0))
