"""A GPUClass's status: its nodes, allocatable and free units, and its
`Ready` and `Conflict` conditions, from the same rules `cozyrender catalog`
answers with (`freeunits.class_capacity`, `conflicts.find_conflicts`).

Rules:
- `ClassIndex` holds what the figures need, kept small: each node's
  eligibility inputs and allocatable extended resources, and each bound,
  non-terminated pod's effective requests of extended resources (a pod that
  requests none is not kept). Every change says which classes it touches:
  a node, the classes of the resources it advertises (before and after); a
  pod, the classes of the resources it requests; a class, itself and the
  classes sharing its resource name or its DeviceClass (their conflict may
  move); a DeviceClass, the classes naming it; a ResourceSlice, or a
  ResourceClaim whose allocation changed, every class naming a DeviceClass;
  a node with slices, those classes too. Each slice's selection by a
  DeviceClass is kept until the slice or the DeviceClass changes, so CEL
  runs once per device and change. Work per
  event is in proportion to what it touches, never a pass over the cluster.
- a class naming a DeviceClass adds its DRA devices (`dra`): allocatable +=
  its devices on eligible nodes, free += those no claim holds, nodes = the
  union of the device plugin's and the devices' nodes. When they cannot be
  counted (the DeviceClass missing, a selector that does not compile here)
  the device plugin's figures are written and Ready is False with reason
  `DevicesUncounted`.
- `figures(name)` is `class_capacity` over the class's nodes only, and the
  conflict among the classes naming its resource only: the same functions
  and the same answer as the catalog over all objects (a property test
  holds them equal).
- `desired_status(...)` writes Kubernetes' conditions (type, status, reason,
  message, lastTransitionTime, observedGeneration); a condition whose
  status did not change keeps its lastTransitionTime, so an unchanged class
  yields an identical status and the controller writes nothing.

Pure: no I/O, no clock (the caller passes `now`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from cozyrender.gpuclass.classes import class_name, device_class_name, resource_name
from cozyrender.gpuclass.conflicts import Conflict, find_conflicts
from cozyrender.gpuclass.dra import (
    DeviceCount, DeviceKey, DeviceProblem, count_devices, current_slices, eligible_for, selected_devices, selectors, slice_nodes,
    with_devices,
)
from cozyrender.gpuclass.freeunits import ClassCapacity, advertised, class_capacity, requests_by_node
from cozyrender.kube.quantity import format_quantity
from cozyrender.kube.shape import ShapeError

READY = "Ready"
CONFLICT = "Conflict"


def is_extended(resource: str) -> bool:
    """A device-plugin style resource name (a domain and a name): what a GPU
    class can name; cpu, memory, ephemeral-storage and hugepages-* cannot."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.", "limits."))


def small_node(node: Mapping) -> dict:
    """The fields of a Node the figures read: its name, cordon, taints, Ready
    condition and extended allocatable resources."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    conditions = status.get("conditions") or []
    ready = [c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"] if isinstance(conditions, list) else conditions
    small_spec = {key: spec[key] for key in ("unschedulable", "taints") if key in spec}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": meta.get("name")},
        "spec": small_spec,
        "status": {
            "allocatable": ({k: v for k, v in allocatable.items() if is_extended(k)}
                            if isinstance(allocatable, dict) else allocatable),
            "conditions": [{"type": c.get("type"), "status": c.get("status")} for c in ready]
            if isinstance(ready, list) else ready,
        },
    }


def pod_demand(pod: Mapping) -> tuple[str, dict[str, Fraction]] | None:
    """The node a pod is bound to and its effective requests of extended
    resources; None for a pod that holds none (unbound, terminated or
    requesting no extended resource). A malformed pod is a ShapeError."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    names: set[str] = set()
    for group in ("containers", "initContainers"):
        for container in spec.get(group) or ():
            figures = container.get("resources") if isinstance(container, dict) else None
            for side in ("requests", "limits"):
                listed = (figures or {}).get(side) if isinstance(figures, dict) else None
                if isinstance(listed, dict):
                    names.update(name for name in listed if is_extended(name))
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        names.update(name for name in overhead if is_extended(name))
    if not names:
        return None
    totals = requests_by_node([pod], names)
    if not totals:
        return None
    (node, demand), = totals.items()
    demand = {name: value for name, value in demand.items() if value}
    return (node, demand) if demand else None


@dataclass(frozen=True)
class Figures:
    capacity: ClassCapacity | None
    conflict: Conflict | None
    problem: str | None = None  # why the figures could not be computed (a malformed node, pod or class)
    devices: DeviceCount | None = None  # the DRA devices counted in `capacity` (a class naming a DeviceClass)
    device_problem: str | None = None  # why its DRA devices could not be counted


class ClassIndex:
    """Classes, nodes and pod demands, indexed by resource name."""

    def __init__(self) -> None:
        self.classes: dict[str, dict] = {}
        self.nodes: dict[str, dict] = {}
        self.demands: dict[tuple[str, str], tuple[str, dict[str, Fraction]]] = {}  # pod key -> (node, demand)
        self._class_resource: dict[str, str] = {}
        self._by_resource: dict[str, set[str]] = {}  # resource -> class names
        self._class_device_class: dict[str, str] = {}
        self._by_device_class: dict[str, set[str]] = {}  # DeviceClass -> class names
        self._nodes_by_resource: dict[str, set[str]] = {}  # resource -> node names
        self._requests: dict[str, dict[str, Fraction]] = {}  # node -> resource -> requested
        # DRA: DeviceClasses, ResourceSlices, the devices claims hold, each slice's selection.
        self.device_classes: dict[str, dict] = {}
        self.slices: dict[str, dict] = {}
        self.claims: dict[tuple[str, str], tuple[DeviceKey, ...]] = {}
        self._allocated: dict[DeviceKey, int] = {}  # device -> claims holding it
        self._slice_nodes: dict[str, int] = {}  # node -> slices on it
        self._compiled: dict[str, list | DeviceProblem] = {}  # DeviceClass -> selectors, or why not
        self._selected: dict[tuple[str, str], list] = {}  # (DeviceClass, slice) -> selected devices

    # ------------------------------------------------------------- classes

    def classes_of(self, resources) -> set[str]:
        found: set[str] = set()
        for resource in resources:
            found |= self._by_resource.get(resource, set())
        return found

    def set_class(self, gpuclass: dict | None, name: str) -> set[str]:
        """Add, replace (gpuclass) or remove (None) a class; the classes touched."""
        touched = {name}
        for by_name, by_key in ((self._class_resource, self._by_resource),
                                (self._class_device_class, self._by_device_class)):
            old_key = by_name.pop(name, None)
            if old_key is not None:
                by_key[old_key].discard(name)
                touched |= by_key[old_key]
                if not by_key[old_key]:
                    del by_key[old_key]
        self.classes.pop(name, None)
        if gpuclass is not None:
            self.classes[name] = gpuclass
            for read, by_name, by_key in ((resource_name, self._class_resource, self._by_resource),
                                          (device_class_name, self._class_device_class, self._by_device_class)):
                try:
                    key = read(gpuclass)
                except ShapeError:
                    key = ""
                if key or read is resource_name:  # (no DeviceClass: no rivals for one)
                    by_name[name] = key
                    touched |= by_key.get(key, set())
                    by_key.setdefault(key, set()).add(name)
        return touched

    def dra_classes(self) -> set[str]:
        """The classes naming a DeviceClass."""
        return set().union(*(names for key, names in self._by_device_class.items() if key))

    # ------------------------------------------------------------- DRA

    def set_device_class(self, device_class: dict | None, name: str) -> set[str]:
        """Add, replace or remove a DeviceClass; the classes touched (those naming it)."""
        self.device_classes.pop(name, None)
        if device_class is not None:
            self.device_classes[name] = device_class
        self._compiled.pop(name, None)
        for key in [key for key in self._selected if key[0] == name]:
            del self._selected[key]
        return set(self._by_device_class.get(name, ()))

    def set_slice(self, resource_slice: dict | None, name: str) -> set[str]:
        """Add, replace or remove a ResourceSlice; the classes touched (every DRA class)."""
        old = self.slices.pop(name, None)
        for held, sign in ((old, -1), (resource_slice, 1)):
            for node in slice_nodes(held):
                _bump(self._slice_nodes, node, sign)
        if resource_slice is not None:
            self.slices[name] = resource_slice
        for key in [key for key in self._selected if key[1] == name]:
            del self._selected[key]
        return self.dra_classes()

    def set_claim(self, key: tuple[str, str], allocations: tuple[DeviceKey, ...] | None) -> set[str]:
        """Add, replace or remove the devices a claim holds; the classes touched."""
        old = self.claims.pop(key, ())
        for devices, sign in ((old, -1), (allocations or (), 1)):
            for device in devices:
                _bump(self._allocated, device, sign)
        if allocations:
            self.claims[key] = tuple(allocations)
        return self.dra_classes() if set(old) != set(allocations or ()) else set()

    def _devices(self, gpuclass: dict, name: str) -> DeviceCount:
        compiled = self._compiled.get(name)
        if compiled is None:
            try:
                compiled = selectors(self.device_classes.get(name), name)
            except DeviceProblem as err:
                compiled = err
            self._compiled[name] = compiled
        if isinstance(compiled, DeviceProblem):
            raise compiled
        selected = []
        for slice_name, resource_slice in self._current_slices():
            key = (name, slice_name)
            if key not in self._selected:
                self._selected[key] = selected_devices(compiled, resource_slice)
            selected += self._selected[key]
        return count_devices(selected, self._allocated, eligible_for(gpuclass, self.nodes))

    def _current_slices(self) -> list[tuple[str, dict]]:
        current = {id(s) for s in current_slices(self.slices.values())}
        return [(name, s) for name, s in self.slices.items() if id(s) in current]

    # ------------------------------------------------------------- nodes

    def _node_resources(self, node: dict | None) -> set[str]:
        if node is None:
            return set()
        try:
            return {name for name in advertised(node) if is_extended(name)}
        except ShapeError:
            return set()

    def set_node(self, node: dict | None, name: str) -> set[str]:
        """Add, replace or remove a node (as `small_node` keeps it); the classes touched."""
        old = self.nodes.pop(name, None)
        before = self._node_resources(old)
        for resource in before:
            self._nodes_by_resource[resource].discard(name)
        after = self._node_resources(node)
        if node is not None:
            self.nodes[name] = node
            for resource in after:
                self._nodes_by_resource.setdefault(resource, set()).add(name)
        return self.classes_of(before | after) | (self.dra_classes() if name in self._slice_nodes else set())

    # ------------------------------------------------------------- pods

    def set_pod(self, key: tuple[str, str], demand: tuple[str, dict[str, Fraction]] | None) -> set[str]:
        """Add, replace or remove a pod's demand (`pod_demand`); the classes touched."""
        touched: set[str] = set()
        old = self.demands.pop(key, None)
        for node, figures, sign in ((old or (None, {})) + (-1,), (demand or (None, {})) + (1,)):
            if node is None:
                continue
            per_node = self._requests.setdefault(node, {})
            for resource, value in figures.items():
                total = per_node.get(resource, Fraction(0)) + sign * value
                if total:
                    per_node[resource] = total
                else:
                    per_node.pop(resource, None)
                touched.add(resource)
            if not per_node:
                del self._requests[node]
        if demand is not None:
            self.demands[key] = demand
        return self.classes_of(touched)

    # ------------------------------------------------------------- answers

    def figures(self, name: str) -> Figures:
        gpuclass = self.classes[name]
        resource = self._class_resource.get(name, "")
        try:
            rivals = set(self._by_resource.get(resource, ())) if resource else {name}
            device_class = self._class_device_class.get(name, "")
            if device_class:
                rivals |= self._by_device_class.get(device_class, set())
            conflict = find_conflicts([self.classes[other] for other in sorted(rivals)]).get(name)
            nodes = [self.nodes[node] for node in self._nodes_by_resource.get(resource, ())]
            requests = {node: self._requests[node] for node in self._nodes_by_resource.get(resource, ())
                        if node in self._requests}
            capacity = class_capacity(gpuclass, nodes, requests)
            devices = device_problem = None
            if device_class:
                try:
                    devices = self._devices(gpuclass, device_class)
                except DeviceProblem as err:
                    device_problem = str(err)
                else:
                    capacity = with_devices(gpuclass, capacity, nodes, devices)
        except ShapeError as err:
            return Figures(None, None, str(err))
        return Figures(capacity, conflict, devices=devices, device_problem=device_problem)


def _bump(counts: dict, key, sign: int) -> None:
    """Add `sign` to a count, dropping it at zero."""
    count = counts.get(key, 0) + sign
    if count:
        counts[key] = count
    else:
        counts.pop(key, None)


def _units(value: Fraction) -> int | str:
    text = format_quantity(value)
    return int(text) if text.isdigit() else text


def _condition(kind: str, status: bool, reason: str, message: str, generation, now: str,
               previous: Mapping | None) -> dict:
    value = "True" if status else "False"
    since = now
    for old in (previous or {}).get("conditions") or ():
        if isinstance(old, dict) and old.get("type") == kind and old.get("status") == value:
            since = old.get("lastTransitionTime") or now
    condition = {"type": kind, "status": value, "reason": reason, "message": message,
                 "lastTransitionTime": since}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def desired_status(gpuclass: Mapping, figures: Figures, now: str, previous: Mapping | None = None) -> dict:
    """The status a class should have; `previous` (its current status) keeps
    each unchanged condition's lastTransitionTime; `now` is RFC 3339."""
    generation = (gpuclass.get("metadata") or {}).get("generation")
    name = class_name(gpuclass)
    status: dict = {}
    if generation is not None:
        status["observedGeneration"] = generation
    if figures.problem is not None:
        ready = _condition(READY, False, "Unreadable", figures.problem, generation, now, previous)
        conflict = _condition(CONFLICT, False, "Unknown", "the figures could not be computed", generation, now,
                              previous)
        status["conditions"] = [ready, conflict]
        return status
    capacity = figures.capacity
    status.update(nodes=capacity.eligible_nodes, allocatable=_units(capacity.allocatable),
                  free=_units(capacity.free))
    if figures.conflict is not None:
        status["conflictWith"] = figures.conflict.holder
        reason = "ResourceNameHeld" if figures.conflict.what == "resource name" else "DeviceClassHeld"
        conflict = _condition(CONFLICT, True, reason, str(figures.conflict), generation, now,
                              previous)
        ready = _condition(READY, False, "Conflict",
                           f"not offered: {figures.conflict.what} {figures.conflict.resource_name!r} is held by the "
                           f"older class {figures.conflict.holder!r}", generation, now, previous)
    else:
        conflict = _condition(CONFLICT, False, "NoConflict",
                              f"{name!r} holds its resource name", generation, now, previous)
        devices = figures.devices
        if figures.device_problem is not None:
            ready = _condition(READY, False, "DevicesUncounted", figures.device_problem, generation, now, previous)
        elif capacity.eligible_nodes == 0 and not (devices and devices.devices):
            ready = _condition(READY, False, "NoNodes",
                               "no Ready, uncordoned node the class tolerates advertises its resource name"
                               + (" or has a device of its DeviceClass" if devices is not None else ""),
                               generation, now, previous)
        else:
            among = (f" ({devices.free} of {devices.devices} DRA devices of DeviceClass "
                     f"{device_class_name(gpuclass)!r} among them)" if devices is not None else "")
            ready = _condition(READY, True, "Available",
                               f"{format_quantity(capacity.free)} of {format_quantity(capacity.allocatable)} units "
                               f"free on {capacity.eligible_nodes} node(s){among}", generation, now, previous)
    status["conditions"] = [ready, conflict]
    return status


def same_status(current: Mapping | None, wanted: Mapping) -> bool:
    """Whether writing `wanted` would change nothing."""
    return dict(current or {}) == dict(wanted)
