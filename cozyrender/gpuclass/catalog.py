"""The GPU catalog: one row per class with its free units and conflict status,
and its JSON spelling for scripts (the table for people is the command's,
through the shared column formatter).

A class naming a DeviceClass adds the DRA devices it selects among the
state's DeviceClasses, ResourceSlices and ResourceClaims (`dra`), as the
status controller does; when they cannot be counted (no such DeviceClass
in the state, a selector not evaluable here) its row has the device
plugin's figures alone, as the class's status does.

Pure functions: objects in, rows and text out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from cozyrender.gpuclass.classes import (
    class_name, device_class_name, gpuclasses, identity_group, memory, resource_name, text,
)
from cozyrender.gpuclass.conflicts import find_conflicts
from cozyrender.gpuclass.dra import DRA_KINDS, DeviceProblem, class_devices, with_devices
from cozyrender.gpuclass.freeunits import ClassCapacity, capacities, nodes_by_resource
from cozyrender.kube.identity import Copies, identity_of
from cozyrender.kube.quantity import format_quantity


@dataclass(frozen=True)
class CatalogRow:
    name: str
    vendor: str
    model: str
    mode: str
    profile: str | None
    memory: str
    resource_name: str
    free_units: str
    allocatable_units: str
    eligible_nodes: int
    conflict_holder: str | None  # the class holding the resource when this one is in conflict
    invalid: str | None = None  # why the CRD refuses the class (its first violation), when it does

    @property
    def in_conflict(self) -> bool:
        return self.conflict_holder is not None


def _units(value: Fraction) -> str:
    return format_quantity(value)


_READ_KINDS = frozenset({"GPUClass", "Node", "Pod", *DRA_KINDS})


def _unique(objects: Iterable[Mapping]) -> list[Mapping]:
    """The objects, each once: a class, node or pod read twice (overlapping
    inputs, or under two versions) would be counted twice; two different
    copies are bad input (kube.identity)."""
    copies = Copies()
    unique = []
    for obj in objects:
        if obj.get("kind") not in _READ_KINDS:
            continue
        identity = identity_of(obj, identity_group(obj))
        if identity is None or copies.is_new(obj, identity):
            unique.append(obj)
    return unique


def catalog_rows(objects: Iterable[Mapping], validate: Callable[[Mapping], str | None] | None = None
                 ) -> list[CatalogRow]:
    """Rows for every GPUClass among `objects` (Nodes and Pods give the
    figures), sorted by class name. `validate(class)` says why the CRD's
    rules refuse a class (None when it is valid): such a row is INVALID,
    whatever its figures (the command passes the shipped CRD's validator)."""
    objects = _unique(objects)
    classes = gpuclasses(objects)
    nodes = [obj for obj in objects if obj.get("kind") == "Node" and obj.get("apiVersion") == "v1"]
    pods = [obj for obj in objects if obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1"]
    figures = capacities(classes, nodes, pods)
    conflicts = find_conflicts(classes)
    dra = {kind: [obj for obj in objects if obj.get("kind") == kind and obj.get("apiVersion") == "resource.k8s.io/v1"]
           for kind in DRA_KINDS}
    rows = []
    for gpuclass in classes:
        name = class_name(gpuclass)
        capacity = _with_dra(gpuclass, figures[name], nodes, dra)
        conflict = conflicts.get(name)
        rows.append(CatalogRow(
            name=name,
            vendor=text(gpuclass, "vendor"),
            model=text(gpuclass, "model"),
            mode=text(gpuclass, "mode"),
            profile=text(gpuclass, "profile") or None,
            memory=memory(gpuclass),
            resource_name=text(gpuclass, "resourceName"),
            free_units=_units(capacity.free),
            allocatable_units=_units(capacity.allocatable),
            eligible_nodes=capacity.eligible_nodes,
            conflict_holder=conflict.holder if conflict else None,
            invalid=validate(gpuclass) if validate is not None else None,
        ))
    return sorted(rows, key=lambda row: row.name)


def _with_dra(gpuclass: Mapping, capacity: ClassCapacity, nodes: list[Mapping], dra: dict[str, list]) -> ClassCapacity:
    """The class's figures with its DRA devices, when it names a DeviceClass they can be counted for."""
    device_class = device_class_name(gpuclass)
    if not device_class:
        return capacity
    classes = {(obj.get("metadata") or {}).get("name"): obj for obj in dra["DeviceClass"]}
    by_name = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    try:
        devices = class_devices(gpuclass, classes.get(device_class), device_class, dra["ResourceSlice"],
                                dra["ResourceClaim"], by_name)
    except DeviceProblem:
        return capacity
    class_nodes = nodes_by_resource(nodes, [resource_name(gpuclass)])[resource_name(gpuclass)]
    return with_devices(gpuclass, capacity, class_nodes, devices)


def status_text(row: CatalogRow) -> str:
    """`INVALID (why)`, `CONFLICT (held by X)` or `ok`: what to fix first comes first."""
    if row.invalid:
        return f"INVALID ({row.invalid})"
    if row.in_conflict:
        return f"CONFLICT (held by {row.conflict_holder})"
    return "ok"


def _number(units: str) -> int | str:
    """Whole units as JSON numbers; anything else stays an exact quantity string."""
    return int(units) if units.isdigit() else units


def render_json(rows: Iterable[CatalogRow]) -> str:
    """Rows as a JSON document for scripts, keys spelled as Kubernetes spells them."""
    items = [
        {
            "name": row.name,
            "vendor": row.vendor,
            "model": row.model,
            "mode": row.mode,
            "profile": row.profile,
            "memory": row.memory,
            "resourceName": row.resource_name,
            "freeUnits": _number(row.free_units),
            "allocatableUnits": _number(row.allocatable_units),
            "eligibleNodes": row.eligible_nodes,
            "conflict": {"heldBy": row.conflict_holder} if row.in_conflict else None,
            "invalid": row.invalid,
        }
        for row in rows
    ]
    return json.dumps({"gpuClasses": items}, indent=2) + "\n"
