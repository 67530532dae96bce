"""Class conflicts: who holds a resource name (or a DRA DeviceClass) that
several classes share.

When two or more GPU classes name the same device-plugin resource, or the
same DeviceClass (`spec.deviceClassName`), the oldest
(`metadata.creationTimestamp`, then name order on a tie) holds it and every
newer one is in conflict, so a mistyped new class cannot take an offer
tenants already run on out of service. A class without a creationTimestamp
(a manifest not created yet, such as a write being checked) is newer than
every created class; one whose timestamp cannot be read is a ShapeError
(ranking it anywhere would be a guess about who holds the resource).

API (used by the catalog and by `cozyrender check`'s vGPU gate):

    resource_holders(classes) -> {resource name: holder class name}
    resource_holders(classes, device_class_name) -> {DeviceClass: holder class name}
    find_conflicts(classes)   -> {class name: Conflict} for classes in conflict only

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from collections.abc import Callable

from cozyrender.gpuclass.classes import class_name, device_class_name, resource_name
from cozyrender.kube.shape import ShapeError, got, mapping

# RFC 3339, as the API server writes metadata.creationTimestamp.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?\Z")

# Sorts after every real timestamp: an uncreated class is the newest.
_NOT_CREATED = datetime.max.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Conflict:
    """`gpu_class` names `resource_name`, which the older class `holder` holds."""

    gpu_class: str
    resource_name: str
    holder: str
    what: str = "resource name"  # or "DeviceClass" (`spec.deviceClassName`)

    def __str__(self) -> str:
        return (
            f"GPU class {self.gpu_class!r} is in conflict: its {self.what} "
            f"{self.resource_name!r} is held by the older class {self.holder!r}"
        )


def creation_time(gpuclass: Mapping) -> datetime:
    """`metadata.creationTimestamp` as an aware datetime; absent means not
    created yet (the newest); anything else but a timestamp is a ShapeError."""
    raw = mapping(gpuclass, "metadata", gpuclass).get("creationTimestamp")
    if isinstance(raw, datetime):  # YAML loaders turn timestamps into datetimes
        return raw if raw.tzinfo else raw.replace(tzinfo=timezone.utc)
    if raw is None or raw == "":
        return _NOT_CREATED
    parsed = None
    if isinstance(raw, str) and _RFC3339.match(raw):
        try:
            parsed = datetime.fromisoformat(raw.upper().replace("Z", "+00:00"))
        except ValueError:  # matches the pattern but is no date, e.g. month 13
            parsed = None
    if parsed is None:
        raise ShapeError.at(gpuclass, "metadata.creationTimestamp",
                            f"is not an RFC 3339 timestamp (got {got(raw)})")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def seniority(gpuclass: Mapping) -> tuple[datetime, str]:
    """Sort key: older first, then name order."""
    return creation_time(gpuclass), class_name(gpuclass)


def resource_holders(classes: Iterable[Mapping],
                     named: Callable[[Mapping], str] = resource_name) -> dict[str, str]:
    """For each resource name (or, with `named=device_class_name`, each
    DeviceClass) some class names, the class that holds it."""
    holders: dict[str, tuple[tuple[datetime, str], str]] = {}
    for gpuclass in classes:
        resource = named(gpuclass)
        if not resource:
            continue
        key = seniority(gpuclass)
        held = holders.get(resource)
        if held is None or key < held[0]:
            holders[resource] = (key, class_name(gpuclass))
    return {resource: name for resource, (_, name) in holders.items()}


def find_conflicts(classes: Iterable[Mapping]) -> dict[str, Conflict]:
    """Every class that names a resource (or a DeviceClass) held by another
    class, by class name (the resource name's conflict first)."""
    classes = list(classes)
    conflicts: dict[str, Conflict] = {}
    for named, what in ((device_class_name, "DeviceClass"), (resource_name, "resource name")):
        holders = resource_holders(classes, named)
        for gpuclass in classes:
            name, resource = class_name(gpuclass), named(gpuclass)
            holder = holders.get(resource)
            if holder is not None and holder != name:
                conflicts[name] = Conflict(name, resource, holder, what)
    return conflicts
