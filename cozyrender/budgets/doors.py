"""The other doors to a GPU: KubeVirt VirtualMachines and
VirtualMachineInstances, Pods and DRA ResourceClaims, read for the devices
they ask for and the object they claim those devices from
(`cozyrender.gpuclass.contract`).

Rules:
- A VirtualMachine asks for one device per `gpus[]` and `hostDevices[]`
  entry of `spec.template.spec.domain.devices`, named by its `deviceName`
  (KubeVirt's `v1.GPU`/`v1.HostDevice`); a VirtualMachineInstance the same
  of `spec.domain.devices`. An entry naming a `claimName` instead takes its
  device from a DRA ResourceClaim (KubeVirt's `GPUsWithDRA`), which is that
  device's door, not the entry's. Whether the VM runs (`spec.runStrategy`,
  `spec.running`) does not matter: a halted VM reserves its devices, as a
  halted VMInstance does, so starting it never meets a spent budget.
- A Pod asks for its effective request of each extended resource (a
  domain-prefixed name outside `kubernetes.io/`: device-plugin resources),
  as Kubernetes counts it (`cozyrender.kube.pods`: init containers,
  sidecars, overhead), and at least its limit (an extended resource's
  request equals its limit once the API server has defaulted the pod).
  Ephemeral containers cannot ask for resources (the API server refuses
  them any), so they add nothing. A pod's DRA claims
  (`spec.resourceClaims`) are not its devices: each ResourceClaim is its
  own door, charged once, however many pods share it.
- A ResourceClaim (`resource.k8s.io/v1`) asks for devices of each
  DeviceClass as Kubernetes' quota counts them at creation
  (`claim_device_counts`, the rule of kubernetes
  pkg/quota/v1/evaluator/core/resource_claims.go): per request, an
  `exactly` request its `count` (1 when unset, the API server's default),
  `allocationMode: All` as 32 (the most one allocation holds,
  `AllocationResultsMaxSize`), an unknown mode as 0; a `firstAvailable`
  request, per DeviceClass, the largest of its alternatives; requests
  summed; admin access counts too. A claim is always a head (a claim
  generated from a template for a pod is the pod's only by its owner
  reference, which says nothing about devices). A ResourceClaimTemplate
  holds no device: the claims made from it do (`read_claim_template`).
- Which devices are GPUs of a class is the state's to say (a device whose
  name is a GPUClass's `resourceName`): reading an object needs no state.
- The claim (`Door.parent`): a VMI's controller owner of kind
  VirtualMachine (with its uid), a Pod's controller owner of kind
  VirtualMachineInstance (with its uid), else for a VM or VMI the app named
  by the contract's annotation. A malformed annotation claims nothing that
  exists (`Parent.kind` empty), so it is refused, never trusted.
- `door_projection` is what the reservation ledger keeps of such a write:
  its identity, its claim and its devices, nothing else; reading the
  projection gives the same door.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

from cozyrender.gpuclass.contract import APP_ANNOTATION
from cozyrender.kube.shape import ShapeError, got, mapping, mappings, string

from cozyrender.kube.pods import is_extended_resource, may_hold_devices

from .bounds import MAX_COUNT
from .model import APPS_GROUP, WORKLOAD_KINDS, metadata_name_namespace

KUBEVIRT_GROUP = "kubevirt.io"
VIRTUAL_MACHINE = "VirtualMachine"
VIRTUAL_MACHINE_INSTANCE = "VirtualMachineInstance"
POD = "Pod"
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
# (API group, kind) of every door this module reads.
DOOR_KINDS = frozenset({(KUBEVIRT_GROUP, VIRTUAL_MACHINE), (KUBEVIRT_GROUP, VIRTUAL_MACHINE_INSTANCE), ("", POD),
                        (RESOURCE_GROUP, RESOURCE_CLAIM)})
# What each door may claim its devices from.
CLAIMABLE = {
    VIRTUAL_MACHINE: WORKLOAD_KINDS,
    VIRTUAL_MACHINE_INSTANCE: (VIRTUAL_MACHINE, *WORKLOAD_KINDS),
    POD: (VIRTUAL_MACHINE_INSTANCE,),
    RESOURCE_CLAIM: (),
}
# Kubernetes' AllocationResultsMaxSize: what quota counts for `allocationMode: All`.
ALLOCATION_RESULTS_MAX_SIZE = 32


class Device(NamedTuple):
    """Devices of one resource name asked for at one field: `gpu` when the
    field is a KubeVirt `gpus[]` entry (a GPU by what it is, whatever its name);
    `dra` when `resource` is a DeviceClass's name (a ResourceClaim's request)."""

    path: str
    resource: str
    count: int
    gpu: bool = False
    dra: bool = False


class Parent(NamedTuple):
    """What a door claims its devices from, in its own namespace: an app
    (`uid` empty: the contract's annotation names kind and name only), a VM
    or a VMI (by controller owner reference, with the owner's uid). `kind`
    empty: a claim naming nothing that can exist."""

    kind: str
    name: str
    uid: str
    path: str

    def display(self) -> str:
        return f"{self.kind or '<no kind>'} {self.name}"


class Door(NamedTuple):
    kind: str
    namespace: str
    name: str
    uid: str
    devices: tuple[Device, ...]
    parent: Parent | None

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    def counts(self) -> dict[str, int]:
        """Devices per resource name."""
        found: dict[str, int] = {}
        for device in self.devices:
            found[device.resource] = found.get(device.resource, 0) + device.count
        return found


def door_kind(obj: Mapping) -> str | None:
    """The kind of `obj` when it is a door this module reads, else None."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if type(kind) is not str or type(api_version) is not str:
        return None
    return kind if (api_version.rpartition("/")[0], kind) in DOOR_KINDS else None


def read_door(obj: Mapping) -> Door:
    """Read a Pod, VirtualMachine or VirtualMachineInstance; ShapeError for
    an object the rules cannot read (no name or namespace, a device list of
    the wrong type, an entry without `deviceName`, a fractional or too
    large extended resource)."""
    kind = door_kind(obj)
    if kind is None:
        raise ShapeError.at(obj, "", "not a Pod, kubevirt.io VirtualMachine or VirtualMachineInstance, or "
                                     "resource.k8s.io ResourceClaim")
    namespace, name = metadata_name_namespace(obj)
    meta = obj["metadata"]
    uid = meta.get("uid")
    uid = uid if isinstance(uid, str) else ""
    if kind == RESOURCE_CLAIM:
        return Door(kind, namespace, name, uid, _claim_devices(obj, mapping(obj, "spec", obj), "spec"), None)
    if kind == POD:
        devices = _pod_devices(obj)
        parent = _owner(obj, VIRTUAL_MACHINE_INSTANCE)
    else:
        if kind == VIRTUAL_MACHINE:
            spec = mapping(obj, "spec", obj)
            template = mapping(spec, "template", obj, "spec")
            domain_spec = mapping(template, "spec", obj, "spec.template")
            at = "spec.template.spec.domain.devices"
        else:
            domain_spec = mapping(obj, "spec", obj)
            at = "spec.domain.devices"
        domain = mapping(domain_spec, "domain", obj, at.rpartition(".domain")[0])
        devices = _kubevirt_devices(obj, mapping(domain, "devices", obj, at.rpartition(".")[0]), at)
        parent = _owner(obj, VIRTUAL_MACHINE) if kind == VIRTUAL_MACHINE_INSTANCE else None
        if parent is None:
            parent = _app_claim(obj)
    return Door(kind, namespace, name, uid, devices, parent)


def _kubevirt_devices(obj: Mapping, devices: Mapping, at: str) -> tuple[Device, ...]:
    found = []
    for field, gpu in (("gpus", True), ("hostDevices", False)):
        for index, entry in enumerate(mappings(devices, field, obj, at)):
            path = f"{at}.{field}[{index}]"
            device = string(entry, "deviceName", obj, path)
            if not device:
                if string(entry, "claimName", obj, path):
                    continue  # a DRA-backed device: its ResourceClaim is the door
                raise ShapeError.at(obj, f"{path}.deviceName", "is missing (KubeVirt requires a deviceName, or a "
                                                               "claimName for a device from a ResourceClaim)")
            found.append(Device(f"{path}.deviceName", device, 1, gpu))
    return tuple(found)


def is_claim_template(obj: Mapping) -> bool:
    api_version = obj.get("apiVersion")
    return obj.get("kind") == RESOURCE_CLAIM_TEMPLATE and isinstance(api_version, str) \
        and api_version.rpartition("/")[0] == RESOURCE_GROUP


def read_claim_template(obj: Mapping) -> Door:
    """A ResourceClaimTemplate read as the claim each pod gets from it (its
    `spec.spec`), under the template's own name: what the template asks
    for, though it holds nothing itself."""
    namespace, name = metadata_name_namespace(obj)
    template = mapping(obj, "spec", obj)
    devices = _claim_devices(obj, mapping(template, "spec", obj, "spec"), "spec.spec")
    return Door(RESOURCE_CLAIM_TEMPLATE, namespace, name, "", devices, None)


def claim_device_counts(claim_spec: Mapping, obj: Mapping | None = None, at: str = "spec") -> dict[str, int]:
    """Devices per DeviceClass of a ResourceClaim's spec, as Kubernetes'
    quota counts them (`<class>.deviceclass.resource.k8s.io/devices`)."""
    counts: dict[str, int] = {}
    for device in _claim_devices(obj if obj is not None else claim_spec, claim_spec, at):
        counts[device.resource] = counts.get(device.resource, 0) + device.count
    return counts


def _claim_devices(obj: Mapping, claim_spec: Mapping, at: str) -> tuple[Device, ...]:
    devices = mapping(claim_spec, "devices", obj, at)
    found = []
    for index, request in enumerate(mappings(devices, "requests", obj, f"{at}.devices")):
        path = f"{at}.devices.requests[{index}]"
        alternatives = mappings(request, "firstAvailable", obj, path)
        if alternatives:
            largest: dict[str, int] = {}  # the worst case, per DeviceClass
            for sub, subrequest in enumerate(alternatives):
                device_class, count = _request_count(obj, subrequest, f"{path}.firstAvailable[{sub}]")
                largest[device_class] = max(largest.get(device_class, 0), count)
            found += [Device(f"{path}.firstAvailable", c, n, dra=True) for c, n in largest.items()]
        else:
            exactly = mapping(request, "exactly", obj, path)
            if exactly:
                device_class, count = _request_count(obj, exactly, f"{path}.exactly")
                found.append(Device(f"{path}.exactly.deviceClassName", device_class, count, dra=True))
    return tuple(found)


def _request_count(obj: Mapping, request: Mapping, path: str) -> tuple[str, int]:
    """(DeviceClass, devices) of one exact request or alternative."""
    device_class = string(request, "deviceClassName", obj, path) or ""
    mode = string(request, "allocationMode", obj, path) or "ExactCount"
    if mode == "All":
        return device_class, ALLOCATION_RESULTS_MAX_SIZE
    if mode != "ExactCount":
        return device_class, 0  # an unknown mode counts nothing (Kubernetes' rule: after a downgrade)
    count = request.get("count", 1)
    if type(count) is not int or count < 0:
        raise ShapeError.at(obj, f"{path}.count", f"is not a count of devices (got {got(count)})")
    if count > MAX_COUNT:
        raise ShapeError.at(obj, f"{path}.count", f"is {count}: too large (at most {MAX_COUNT})")
    return device_class, count


def _pod_devices(pod: Mapping) -> tuple[Device, ...]:
    if not may_hold_devices(pod):
        return ()
    from cozyrender.kube.pods import effective_pod_resources

    from .usage import check_pod_numbers

    check_pod_numbers(pod)  # every figure bounded before any is parsed, named as the usage rules name it
    requests = effective_pod_resources(pod, "requests")
    limits = effective_pod_resources(pod, "limits")
    found = []
    for resource in sorted(set(requests) | set(limits)):
        if not is_extended_resource(resource):
            continue
        value = max(requests.get(resource, Fraction(0)), limits.get(resource, Fraction(0)))
        if value.denominator != 1:
            raise ShapeError.at(pod, "spec.containers", f"asks for {resource} {float(value)}: an extended "
                                                        "resource is a whole number of devices")
        if value > MAX_COUNT:
            raise ShapeError.at(pod, "spec.containers", f"asks for {resource} {value}: too large (at most "
                                                        f"{MAX_COUNT})")
        if value:
            found.append(Device(f"spec.containers[*].resources[{resource!r}]", resource, int(value)))
    return tuple(found)


def _owner(obj: Mapping, kind: str) -> Parent | None:
    """The controller owner reference of kubevirt.io kind `kind`, if any."""
    meta = obj["metadata"]
    for index, ref in enumerate(mappings(meta, "ownerReferences", obj, "metadata")):
        if ref.get("controller") is not True:
            continue
        api_version = ref.get("apiVersion")
        if ref.get("kind") != kind or not isinstance(api_version, str) \
                or api_version.rpartition("/")[0] != KUBEVIRT_GROUP:
            continue
        name, uid = ref.get("name"), ref.get("uid")
        return Parent(kind, name if isinstance(name, str) else "", uid if isinstance(uid, str) else "",
                      f"metadata.ownerReferences[{index}]")
    return None


def _app_claim(obj: Mapping) -> Parent | None:
    meta = obj["metadata"]
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping) or APP_ANNOTATION not in annotations:
        return None
    value = annotations[APP_ANNOTATION]
    path = f"metadata.annotations[{APP_ANNOTATION!r}]"
    kind, _, name = value.partition("/") if isinstance(value, str) else ("", "", got(value))
    if kind not in WORKLOAD_KINDS or not name:
        return Parent("", value if isinstance(value, str) else got(value), "", path)
    return Parent(kind, name, "", path)


def parent_identity(door: Door) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of what `door` claims, None when it claims
    nothing that can exist."""
    if door.parent is None or not door.parent.kind or door.parent.kind not in CLAIMABLE[door.kind]:
        return None
    return (door.parent.kind, door.namespace, door.parent.name)


# -- what the ledger keeps ---------------------------------------------------------

def door_projection(obj: Mapping) -> dict:
    """The smallest object of `obj`'s kind that reads as the same door
    (`read_door`): its name, namespace and uid, its claim (the controller
    owner reference or the contract's annotation) and its devices."""
    return project(read_door(obj), obj.get("apiVersion"))


def project(door: Door, api_version: object) -> dict:
    meta: dict = {"name": door.name, "namespace": door.namespace}
    if door.uid:
        meta["uid"] = door.uid
    parent = door.parent
    if parent is not None and parent.path.startswith("metadata.ownerReferences"):
        meta["ownerReferences"] = [{"apiVersion": f"{KUBEVIRT_GROUP}/v1", "kind": parent.kind, "name": parent.name,
                                    "uid": parent.uid, "controller": True}]
    elif parent is not None:
        meta["annotations"] = {APP_ANNOTATION: f"{parent.kind}/{parent.name}" if parent.kind else parent.name}
    if door.kind == POD:
        figures = {resource: str(count) for resource, count in sorted(door.counts().items())}
        spec: dict = {"containers": [{"name": "devices", "resources": {"requests": figures, "limits": figures}}]}
    elif door.kind == RESOURCE_CLAIM:
        requests = [{"name": f"r{i}", "exactly": {"deviceClassName": device_class, "count": count}}
                    for i, (device_class, count) in enumerate(sorted(door.counts().items()))]
        spec = {"devices": {"requests": requests}}
    else:
        devices: dict = {}
        for field, gpu in (("gpus", True), ("hostDevices", False)):
            entries = [{"name": f"d{i}", "deviceName": d.resource}
                       for i, d in enumerate(d for d in door.devices if d.gpu == gpu)]
            if entries:
                devices[field] = entries
        domain = {"domain": {"devices": devices}}
        spec = {"template": {"spec": domain}} if door.kind == VIRTUAL_MACHINE else domain
    return {"apiVersion": api_version, "kind": door.kind, "metadata": meta, "spec": spec}


def larger_door(a: Mapping, b: Mapping) -> dict:
    """A projection taking, per resource name and kind of entry, at least the
    devices either projection takes, with `a`'s identity and claim (the
    ledger's rule: a pending version never takes less room than another)."""
    door_a, door_b = read_door(a), read_door(b)
    most: dict[tuple[bool, str], int] = {}
    for door in (door_a, door_b):
        mine: dict[tuple[bool, str], int] = {}
        for device in door.devices:
            mine[(device.gpu, device.resource)] = mine.get((device.gpu, device.resource), 0) + device.count
        for key, count in mine.items():
            most[key] = max(most.get(key, 0), count)
    devices = []
    for (gpu, resource), count in sorted(most.items()):
        if door_a.kind == POD:
            devices.append(Device("", resource, count))
        elif door_a.kind == RESOURCE_CLAIM:
            devices.append(Device("", resource, count, dra=True))
        else:
            devices += [Device("", resource, 1, gpu)] * count
    parent = door_a.parent if door_a.parent == door_b.parent else None
    return project(door_a._replace(devices=tuple(devices), parent=parent), a.get("apiVersion"))


__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE", "APPS_GROUP", "CLAIMABLE", "DOOR_KINDS", "Device", "Door", "KUBEVIRT_GROUP",
    "POD", "Parent", "RESOURCE_CLAIM", "RESOURCE_CLAIM_TEMPLATE", "RESOURCE_GROUP", "VIRTUAL_MACHINE",
    "VIRTUAL_MACHINE_INSTANCE", "claim_device_counts", "door_kind", "door_projection", "is_claim_template",
    "is_extended_resource", "larger_door", "may_hold_devices", "parent_identity", "read_claim_template",
    "read_door",
]
