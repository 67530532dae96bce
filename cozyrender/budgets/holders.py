"""Who is charged for a device: the chains of objects holding the same GPUs.

An app reserves devices (a VMInstance's `gpus`); its chart renders a
VirtualMachine claiming them (`cozyrender.gpuclass.contract`); KubeVirt
makes a VirtualMachineInstance owned by the VM and a virt-launcher pod
owned by the VMI. All four hold the same devices. The budget charges each
chain once, at its head.

Rules:
- A door's own devices are GPUs of a class when their resource name is a
  GPUClass's `resourceName` (of classes sharing one, the one holding it:
  `cozyrender.gpuclass.conflicts`); other devices are not budgeted, except a
  KubeVirt `gpus[]` entry, which is a GPU whatever its name (`raw_names`,
  refused where budgets apply, as a VMInstance's device-plugin name is). A
  ResourceClaim's devices are GPUs of the class naming their DeviceClass
  (`spec.deviceClassName`, held as a resource name is); a request of any
  other DeviceClass is not budgeted.
- A door is a child when what it claims is in the state (`doors.parent_identity`)
  with the uid it names (a claim by owner reference); otherwise it is a head:
  charged like a VMInstance. Apps are always heads.
- A head is charged, class by class, the larger of its own devices and the
  sum of what its children are charged with (recursively): a parent that
  shrinks below what its children hold (a VM whose running VMI keeps the old
  devices, an app edited below the VMs claiming it) is still charged what is
  held. The write checks keep children within their parent, so normally a
  head is charged its own devices.

Pure functions over a BudgetState; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from .doors import Door, parent_identity
from .model import ClassEntry, Workload


def holder_class(state, resource: str, dra: bool = False) -> str | None:
    """The class a device of `resource` (with `dra`, of that DeviceClass) is
    counted under, or None."""
    classes = (state.class_device_classes if dra else state.class_resources).get(resource)
    if not classes:
        return None
    holding = [name for name in classes if name not in state.conflicts]
    return holding[0] if holding else None


def resolve(state, door: Door) -> Workload:
    """`door`'s own devices as a Workload of class entries (one per device
    field), with its unbudgeted KubeVirt `gpus` names in `raw_names`."""
    entries: list[ClassEntry] = []
    raw: list[tuple[str, str]] = []
    for index, device in enumerate(door.devices):
        gpu_class = holder_class(state, device.resource, device.dra)
        if gpu_class is None:
            if device.gpu:
                raw.append((device.path.rpartition(".")[0], device.resource))
            continue
        entries.append(ClassEntry(index, gpu_class, device.count, False, device.resource, device.path))
    reservations: dict[str, int] = {}
    for entry in entries:
        reservations[entry.gpu_class] = reservations.get(entry.gpu_class, 0) + entry.count
    return Workload(door.kind, door.namespace, door.name, tuple(entries), reservations, tuple(raw))


def parent_of(state, identity: tuple) -> tuple | None:
    """What the door of `identity` is a child of, or None (a head, or no door)."""
    door = state.doors.get(identity)
    if door is None:
        return None
    parent = parent_identity(door)
    if parent is None or parent not in state.owned:
        return None
    if door.parent.uid:
        owner = state.doors.get(parent)
        if owner is None or owner.uid != door.parent.uid:
            return None
    return parent


def head_of(state, identity: tuple) -> tuple:
    seen = {identity}
    while True:
        parent = parent_of(state, identity)
        if parent is None or parent in seen:  # (a cycle cannot be written: kinds only point up)
            return identity
        seen.add(parent)
        identity = parent


def children_of(state, identity: tuple) -> list[tuple]:
    return sorted(child for child in state.claimants.get(identity, ()) if parent_of(state, child) == identity)


def held(state, identity: tuple, depth: int = 0) -> dict[str, int]:
    """Per class, what the object of `identity` is charged with: the larger
    of its own devices and its children's sum."""
    own = state.owned.get(identity)
    found = dict(own.reservations) if own is not None else {}
    if depth > 4:
        return found
    below: dict[str, int] = {}
    for child in children_of(state, identity):
        for gpu_class, count in held(state, child, depth + 1).items():
            below[gpu_class] = below.get(gpu_class, 0) + count
    for gpu_class, count in below.items():
        if count > found.get(gpu_class, 0):
            found[gpu_class] = count
    return found


def charged(state, identity: tuple) -> Workload | None:
    """The Workload the budget counts for `identity`: None unless it is a
    head; its own entries with what it is charged with."""
    own = state.owned.get(identity)
    if own is None or parent_of(state, identity) is not None:
        return None
    reservations = held(state, identity)
    return own if reservations == own.reservations else own._replace(reservations=reservations)


def family(state, identity: tuple) -> set[tuple]:
    """The objects whose charge can change when `identity` changes: its
    head, itself and what claims it."""
    return {head_of(state, identity), identity} | set(state.claimants.get(identity, ()))


def file_owned(state, identity: tuple, workload: Workload | None, door: Door | None) -> None:
    """Record (or, with None, remove) the own devices of `identity` and its claim."""
    old = state.doors.get(identity)
    if old is not None:
        parent = parent_identity(old)
        if parent is not None:
            claimants = state.claimants.get(parent)
            if claimants is not None:
                claimants.discard(identity)
                if not claimants:
                    del state.claimants[parent]
        del state.doors[identity]
    if workload is None:
        state.owned.pop(identity, None)
    else:
        state.owned[identity] = workload
    if door is not None:
        state.doors[identity] = door
        parent = parent_identity(door)
        if parent is not None:
            state.claimants.setdefault(parent, set()).add(identity)


def heads(state, identities: Iterable[tuple]) -> dict[tuple, Workload | None]:
    """`charged` of each of `identities`' heads and of those that are heads."""
    found: dict[tuple, Workload | None] = {}
    for identity in identities:
        for candidate in (identity, head_of(state, identity)):
            if candidate not in found:
                found[candidate] = charged(state, candidate)
    return found
