"""A GPU class's DRA devices: what the DeviceClass it names
(`spec.deviceClassName`) selects in the ResourceSlices, and how many of
them ResourceClaims hold.

Rules, as the scheduler's allocator reads the same objects
(resource.k8s.io/v1):

- a pool (driver, pool name) is its slices of the newest
  `spec.pool.generation`; older generations are left over from a driver's
  update and count for nothing;
- a device of a current slice is the class's when every CEL selector of
  the DeviceClass (`spec.selectors[].cel.expression`) yields true for it
  (`cozyrender.kube.cel.devices`, the selectors evaluated by cel-cpp in
  Kubernetes' CEL environment; no selector selects every device); a
  selector that fails on a device (a missing attribute) leaves that device
  out, as the allocator cannot give it through the class;
- a device on a node (`spec.nodeName` of its slice, or its own `nodeName`)
  counts only while that node is eligible for the class (Ready, uncordoned,
  tolerated: `cozyrender.kube.nodes.is_eligible`), as a device plugin's
  units do; a device of no single node (`allNodes`, a node selector)
  always counts;
- a device is allocated when a ResourceClaim's
  `status.allocation.devices.results[]` names its driver, pool and device,
  whatever its namespace or DeviceClass; a result with `adminAccess` does
  not hold the device (others may still be given it);
- free devices = the class's devices - the allocated ones among them; one
  device is one unit.

A DeviceClass that is missing, or a selector that does not compile here,
makes the devices uncountable: `DeviceProblem`, which the class's status
reports (the device plugin's figures are still written). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from cozyrender.gpuclass.classes import tolerations
from cozyrender.gpuclass.freeunits import ClassCapacity, eligible_nodes
from cozyrender.kube.cel.devices import DeviceSelector, SelectorError
from cozyrender.kube.nodes import is_eligible, node_name

DeviceKey = tuple[str, str, str]  # driver, pool, device
DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim")  # what the count reads (resource.k8s.io/v1)


class DeviceProblem(ValueError):
    """Why a class's DRA devices cannot be counted."""


@dataclass(frozen=True)
class DeviceCount:
    """A class's DRA devices on eligible nodes, the allocated ones among
    them, and the nodes they are on."""

    devices: int = 0
    allocated: int = 0
    nodes: frozenset[str] = frozenset()

    @property
    def free(self) -> int:
        return self.devices - self.allocated


def selectors(device_class: Mapping | None, name: str) -> list[DeviceSelector]:
    """The DeviceClass's compiled selectors; DeviceProblem when it is
    missing or a selector cannot be evaluated here."""
    if device_class is None:
        raise DeviceProblem(f"DeviceClass {name!r} not found: its devices cannot be counted")
    listed = ((device_class.get("spec") or {}).get("selectors")) or []
    compiled = []
    for index, selector in enumerate(listed):
        expression = ((selector or {}).get("cel") or {}).get("expression") if isinstance(selector, Mapping) else None
        if not isinstance(expression, str):
            raise DeviceProblem(f"DeviceClass {name!r}: selectors[{index}] has no cel.expression: "
                                "its devices cannot be counted")
        try:
            compiled.append(DeviceSelector(expression))
        except SelectorError as err:
            raise DeviceProblem(f"DeviceClass {name!r}: {err}: its devices cannot be counted") from None
    return compiled


def pool_of(resource_slice: Mapping) -> tuple[tuple[str, str], int]:
    """((driver, pool name), generation) of a slice."""
    spec = resource_slice.get("spec") or {}
    pool = spec.get("pool") or {}
    generation = pool.get("generation")
    return (spec.get("driver") or "", pool.get("name") or ""), generation if isinstance(generation, int) else 0


def current_slices(slices: Iterable[Mapping]) -> list[Mapping]:
    """The slices of each pool's newest generation."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for resource_slice in slices:
        pool, generation = pool_of(resource_slice)
        newest[pool] = max(generation, newest.get(pool, generation))
    return [s for s in slices if pool_of(s)[1] == newest[pool_of(s)[0]]]


def selected_devices(compiled: list[DeviceSelector], resource_slice: Mapping) -> list[tuple[DeviceKey, str]]:
    """The devices of one slice the selectors select: (driver, pool, device)
    and the node they are on ("" for none)."""
    spec = resource_slice.get("spec") or {}
    (driver, pool), _ = pool_of(resource_slice)
    found = []
    for device in spec.get("devices") or ():
        try:
            if all(selector.matches(driver, device) for selector in compiled):
                found.append(((driver, pool, device.get("name") or ""),
                              device.get("nodeName") or spec.get("nodeName") or ""))
        except SelectorError:
            continue
    return found


def slice_nodes(resource_slice: Mapping | None) -> set[str]:
    """The nodes a slice's devices are on (its own `nodeName` and its devices')."""
    spec = (resource_slice or {}).get("spec") or {}
    nodes = {device.get("nodeName") for device in spec.get("devices") or () if isinstance(device, Mapping)}
    return {node for node in nodes | {spec.get("nodeName")} if node}


def claim_allocations(claim: Mapping) -> list[DeviceKey]:
    """The devices a ResourceClaim's allocation holds (admin access holds none)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    return [(r.get("driver") or "", r.get("pool") or "", r.get("device") or "")
            for r in results if isinstance(r, Mapping) and not r.get("adminAccess")]


def count_devices(selected: Iterable[tuple[DeviceKey, str]], allocated: Collection[DeviceKey],
                  eligible: Callable[[str], bool]) -> DeviceCount:
    """The class's devices (from `selected_devices` over the current slices)
    on eligible nodes, and the allocated ones among them."""
    devices = taken = 0
    nodes = set()
    seen = set()
    for key, node in selected:
        if key in seen or (node and not eligible(node)):
            continue
        seen.add(key)
        devices += 1
        taken += key in allocated
        if node:
            nodes.add(node)
    return DeviceCount(devices=devices, allocated=taken, nodes=frozenset(nodes))


def eligible_for(gpuclass: Mapping, nodes: Mapping[str, Mapping]) -> Callable[[str], bool]:
    """Whether the node of that name (among `nodes`, by name) is eligible for the class."""
    class_tolerations = tolerations(gpuclass)
    return lambda name: name in nodes and is_eligible(nodes[name], class_tolerations)


def class_devices(gpuclass: Mapping, device_class: Mapping | None, name: str, slices: Iterable[Mapping],
                  claims: Iterable[Mapping], nodes: Mapping[str, Mapping]) -> DeviceCount:
    """`count_devices` over every slice and claim at once (the catalog's
    form; the status controller keeps each slice's selection instead)."""
    compiled = selectors(device_class, name)
    allocated = {key for claim in claims for key in claim_allocations(claim)}
    selected = [pair for s in current_slices(slices) for pair in selected_devices(compiled, s)]
    return count_devices(selected, allocated, eligible_for(gpuclass, nodes))


def with_devices(gpuclass: Mapping, capacity: ClassCapacity, class_nodes: Iterable[Mapping],
                 devices: DeviceCount) -> ClassCapacity:
    """The device plugin's figures over `class_nodes` (the nodes advertising
    the class's resource) plus the class's DRA devices, one unit each; the
    nodes are the union of both."""
    plugin_nodes = {node_name(node) for node, _ in eligible_nodes(gpuclass, class_nodes)}
    return ClassCapacity(free=capacity.free + devices.free, allocatable=capacity.allocatable + devices.devices,
                         eligible_nodes=len(plugin_nodes | devices.nodes))
