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

from cozyrender.keys import QUOTA_PREFIXES
from cozyrender.kube.pods import effective_pod_resources, is_terminated, may_hold_devices, read_fields, reading_key
from cozyrender.kube.quantity import format_binary_quantity, format_quantity
from cozyrender.kube.shape import mapping

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
    fields the effective-resource rule reads (`kube.pods.reading_key`) and
    each group is computed once, from its first pod, by
    `cozyrender.kube.pods` (the single implementation). A malformed pod is a
    ShapeError naming it and the field."""
    groups: dict[bytes, int] = {}
    first: dict[bytes, Mapping] = {}  # the first pod of each group: what its figures are read from
    used: Usage = {}
    running = 0
    # id of a pod object met before -> its key (None: finished); only where every pod stays alive
    # through the loop (a list), so an id is never another object's
    repeats: dict[int, bytes | None] | None = {} if type(pods) in (list, tuple) else None
    for pod in pods:
        # A compact cache's shared reading (`compact_pod`, no metadata) repeats: read once.
        shared = repeats is not None and "metadata" not in pod
        if shared:
            seen = repeats.get(id(pod), _UNSEEN)  # type: ignore[union-attr]
            if seen is not _UNSEEN:
                if seen is not None:
                    running += 1
                    groups[seen] += 1
                continue
        if is_terminated(pod):
            if shared:
                repeats[id(pod)] = None  # type: ignore[index]
            continue
        running += 1
        key = reading_key(pod)
        if key is not None and shared:
            repeats[id(pod)] = key  # type: ignore[index]
        count = groups.get(key) if key is not None else None
        if count is not None:
            groups[key] = count + 1
        elif key is not None:
            first[key] = pod
            groups[key] = 1
        else:  # not as the API writes it: this pod alone, field by field
            for name, value in _pod_figures(pod).items():
                if keys is None or name in keys:
                    used[name] = used.get(name, Fraction(0)) + value
    # Sum in whole nano-units (ints are far cheaper than Fractions); a figure
    # finer than that stays a Fraction.
    nanos: dict[str, int] = {}
    for key, count in groups.items():
        whole, fine = _group_figures(key, first[key])
        for name, value in whole.items():
            if keys is None or name in keys:
                nanos[name] = nanos.get(name, 0) + value * count
        for name, value in fine.items():
            if keys is None or name in keys:
                used[name] = used.get(name, Fraction(0)) + value * count
    for name, value in nanos.items():
        used[name] = used.get(name, Fraction(0)) + Fraction(value, _NANO)
    if running:
        used["pods"] = Fraction(running)
    return used


_UNSEEN = object()
_NANO = 10**9
_GROUPS_KEPT = 4096  # groups' figures remembered across calls (the same workloads' pods in every namespace)
_known_groups: dict[bytes, tuple[dict[str, int], Usage]] = {}


def _group_figures(key: bytes, pod: Mapping) -> tuple[dict[str, int], Usage]:
    """The figures of the pods of `reading_key` `key` (`pod` is one of
    them), in nano-units where whole, else as Fractions; remembered for the
    next call. A ShapeError names `pod` (an error is never remembered)."""
    known = _known_groups.get(key)
    if known is not None:
        return known
    whole: dict[str, int] = {}
    fine: Usage = {}
    for name, value in _pod_figures(pod).items():
        scaled = value * _NANO
        if scaled.denominator == 1:
            whole[name] = scaled.numerator
        else:
            fine[name] = value
    if len(_known_groups) >= _GROUPS_KEPT:
        _known_groups.clear()
    _known_groups[key] = whole, fine
    return whole, fine


def _pod_figures(pod: Mapping) -> Usage:
    """One pod's figures under quota keys, its numbers bounded first."""
    check_pod_numbers(pod)
    return _figures_of(pod)


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


# -- a pod as the webhook's cache keeps it ------------------------------------------

_READINGS_KEPT = 16384  # shared readings remembered (a cluster has as many as it has pod shapes)
_readings: dict[bytes, dict] = {}
TERMINATED_POD: Mapping = {"kind": "Pod", "status": {"phase": "Succeeded"}}


def compact_pod(pod: Mapping) -> tuple[Mapping, bool]:
    """What the usage rules read of `pod`, as little as can be kept, and
    whether that is shared (True) or the pod's own (False).

    - A finished pod: one shared stand-in (the rules read nothing of it but
      that it finished).
    - A pod whose figures read cleanly: the one shared reading of every pod
      of its `reading_key` (`kube.pods.read_fields`, no name), so a pod
      costs its name and a reference. The rules give it the same figures as
      the pod: they read exactly the fields the key holds.
    - Any other pod (fields of types the API never writes, figures the rules
      refuse): its own copy with its name and whole spec and status, so it
      is refused exactly where, and naming exactly what, the pod would be.
    - A pod naming an extended resource (a door, `budgets.doors`): its own
      copy too, with its uid and owner references (its claim).

    The shared readings are read-only: nothing may change them."""
    try:
        if is_terminated(pod):
            return TERMINATED_POD, True
    except Exception:  # noqa: BLE001 - refused later, naming the pod
        return _own(pod), False
    if may_hold_devices(pod):  # a door too (`budgets.doors`): its claim is read from its metadata
        return _own(pod, ("name", "namespace", "uid", "ownerReferences")), False
    key = reading_key(pod)
    if key is None:
        return _own(pod), False
    shared = _readings.get(key)
    if shared is not None:
        return shared, True
    try:
        _group_figures(key, pod)  # the figures read cleanly (remembered for the next usage read)
    except Exception:  # noqa: BLE001 - the same error every time for this key
        return _own(pod), False
    shared = read_fields(key)
    if len(_readings) >= _READINGS_KEPT:
        _readings.clear()  # pods keep theirs; only sharing with new pods is lost
    _readings[key] = shared
    return shared, True


def _own(pod: Mapping, kept: tuple[str, ...] = ("name", "namespace")) -> dict:
    meta = pod.get("metadata")
    own: dict = {key: pod[key] for key in ("apiVersion", "kind", "spec", "status") if key in pod}
    if isinstance(meta, Mapping):
        own["metadata"] = {key: meta[key] for key in kept if key in meta}
    elif "metadata" in pod:
        own["metadata"] = meta
    return own
