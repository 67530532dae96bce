"""The tenant namespace tree, read from namespace names.

A tenant named `x` created in namespace `P` owns `tenant-x` when `P` is
`tenant-root`, and `P-x` otherwise; so the root tenant (`root` in
`tenant-root`) owns `tenant-root` itself. The parent of a tenant namespace
is its name without the last `-segment` (`tenant-a-b` -> `tenant-a`,
`tenant-a` -> `tenant-root`). Namespaces outside `tenant-root`'s tree
(`kube-system`, `cozy-system`, ...) belong to no tenant and no pool.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

ROOT_NAMESPACE = "tenant-root"
_TENANT_PREFIX = "tenant-"
# `tenant-` and then tenant names (Cozystack's grammar, `^[a-z][a-z0-9]*$`)
# joined by '-': one name per level below the root.
_TENANT_NAMESPACE = re.compile(r"tenant(?:-[a-z][a-z0-9]*)+\Z")


def owned_namespace(tenant_name: str, created_in: str) -> str:
    """The namespace a tenant named `tenant_name` created in `created_in` owns."""
    if created_in == ROOT_NAMESPACE:
        return _TENANT_PREFIX + tenant_name
    return f"{created_in}-{tenant_name}"


# A namespace name is a DNS-1123 label: at most 63 characters. Longer names
# (a write's namespace is the author's to choose) are no namespace at all, and
# walking the levels of one of 400 kB took minutes: each level is a new string.
MAX_NAMESPACE_LENGTH = 63


@lru_cache(maxsize=65536)
@lru_cache(maxsize=2**16)  # asked once per object: a state has far fewer namespaces
def is_tenant_namespace(namespace: str) -> bool:
    """Whether `namespace` lies in `tenant-root`'s tree (by name): `tenant-`
    followed by tenant names joined by '-', at most 63 characters."""
    return len(namespace) <= MAX_NAMESPACE_LENGTH and (
        namespace == ROOT_NAMESPACE or _TENANT_NAMESPACE.match(namespace) is not None)


@lru_cache(maxsize=2**16)
def is_malformed_tenant_namespace(namespace: str) -> bool:
    """A namespace named like a tenant's (`tenant-...`) that no tenant can
    own (`tenant--x`, `tenant-A`, `tenant-1x`, longer than 63 characters):
    reported, since it is in no pool (issue 11 item 10)."""
    return namespace.startswith(_TENANT_PREFIX) and not is_tenant_namespace(namespace)


def parent_namespace(namespace: str) -> str | None:
    """The parent tenant namespace, or None for `tenant-root` and for
    namespaces outside the tenant tree."""
    if namespace == ROOT_NAMESPACE or not is_tenant_namespace(namespace):
        return None
    parent = namespace.rpartition("-")[0]
    return ROOT_NAMESPACE if parent == "tenant" else parent


def ancestors(namespace: str) -> Iterator[str]:
    """`namespace` itself, then each ancestor up to `tenant-root`."""
    current: str | None = namespace if is_tenant_namespace(namespace) else None
    while current is not None:
        yield current
        current = parent_namespace(current)


def is_within(namespace: str, subtree_root: str) -> bool:
    """Whether `namespace` is `subtree_root` or one of its descendants."""
    if subtree_root == ROOT_NAMESPACE:
        return is_tenant_namespace(namespace)
    return namespace == subtree_root or namespace.startswith(subtree_root + "-")


def malformed_namespace_message(namespace: str) -> str:
    shown = namespace if len(namespace) <= 80 else f"{namespace[:60]}... ({len(namespace)} characters)"
    return (f"namespace {shown} is named like a tenant namespace but no tenant can own it (tenant names "
            "are lower-case letters and digits, starting with a letter; a namespace name is at most 63 "
            "characters): it is in no pool, so no budget would apply")
