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

from collections.abc import Iterable, Mapping
from fractions import Fraction

from cozyrender.kube.pods import effective_pod_resources, is_terminated
from cozyrender.kube.quantity import InvalidQuantity, parse_quantity

OBJECT_COUNTS = frozenset({
    "pods", "services", "services.loadbalancers", "services.nodeports", "secrets",
    "configmaps", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas",
})
_STORAGE_CLASS_DOMAIN = ".storageclass.storage.k8s.io/"

Usage = dict[str, Fraction]


def usage_key(declared_key: str) -> str:
    """The quota key a declared ordinary key is rendered as, and usage is read under."""
    if declared_key == "storage":
        return "requests.storage"
    if (
        declared_key in OBJECT_COUNTS
        or declared_key.startswith(("count/", "requests.", "limits."))
        or _STORAGE_CLASS_DOMAIN in declared_key
    ):
        return declared_key
    return "limits." + declared_key


def quota_usage(quotas: Iterable[Mapping]) -> Usage:
    """The largest `status.used` value per key across a namespace's ResourceQuotas.
    A value that is not a quantity is skipped (the API server never writes one)."""
    used: Usage = {}
    for quota in quotas:
        for key, raw in ((quota.get("status") or {}).get("used") or {}).items():
            try:
                value = parse_quantity(raw)
            except InvalidQuantity:
                continue
            if value > used.get(key, Fraction(0)):
                used[key] = value
            else:
                used.setdefault(key, value)
    return used


def pod_usage(pods: Iterable[Mapping]) -> Usage:
    """The pods' usage under quota keys: `requests.X` and `limits.X` from
    their effective requests and limits, `pods` for how many run."""
    used: Usage = {}
    running = 0
    for pod in pods:
        if is_terminated(pod):
            continue
        running += 1
        for side in ("requests", "limits"):
            for name, value in effective_pod_resources(pod, side).items():
                key = f"{side}.{name}"
                used[key] = used.get(key, Fraction(0)) + value
    if running:
        used["pods"] = Fraction(running)
    return used


def namespace_usage(key: str, quota_used: Usage | None, pods_used: Usage) -> Fraction:
    """Usage of one namespace under quota key `key`: its quotas' figure when
    one of them tracks the key, otherwise its pods' figure."""
    if quota_used is not None and key in quota_used:
        return quota_used[key]
    return pods_used.get(key, Fraction(0))
