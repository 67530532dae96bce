"""The write check for the other doors to a GPU: a Pod, VirtualMachine,
VirtualMachineInstance or ResourceClaim in a tenant namespace, checked by
the same rules as a VMInstance (`checks`, `classes`) over the chains of
`holders`; a ResourceClaimTemplate by the class rules alone.

Rules:
- Outside the tenant tree no budget or entitlement applies: admitted.
- Every door: a vGPU class's device needs the namespace's entitlement
  (`classes.check_workload_classes`); a KubeVirt `gpus[]` entry whose
  device is no class's resource is refused where the pool has a GPU budget
  (it would bypass every budget), as a VMInstance's device-plugin name is.
- A door claiming its devices from another object (a launcher pod from its
  VMI, a VMI from its VM, a VM or VMI from an app by the contract's
  annotation) is not charged: the claim is checked instead. It is refused
  when what it names does not exist, has another uid than the owner
  reference names, or when, class by class, its devices and those of the
  other objects claiming the same one exceed what that one holds itself.
- Any other door is a head: charged like a VMInstance, growth only, with
  what it is charged with (`holders.held`: never less than its children).
  A ResourceClaim is always a head, charged what Kubernetes' quota counts.
- A ResourceClaimTemplate is checked for what each claim made from it
  would ask (the vGPU gate), never charged: Kubernetes makes one claim per
  pod from it, and each claim is charged when it is created (as Kubernetes'
  quota charges claims, not templates).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.kube.pods import extended_resource_names

from .checks import Decision, Reason, check_workload_budget
from .doors import POD, Door, is_claim_template, parent_identity, read_claim_template, read_door
from .holders import children_of, held, resolve
from .index import BudgetState, pod_door
from .model import WORKLOAD_KINDS, Workload
from cozyrender.namespaces import is_tenant_namespace, malformed_namespace_message

LAUNCHER = "virt-launcher pod"


def check_door_write(state: BudgetState, obj: Mapping, platform_vgpu: bool | None = None) -> Decision:
    if obj.get("kind") == POD and not extended_resource_names(obj) & state.class_resources.keys():
        # No device of any class, by name alone: none of the budgets' business, whatever its other
        # figures (an unreadable one is the usage rules' to set aside, bearing on its own pools only).
        return Decision()
    template = is_claim_template(obj)
    door = read_claim_template(obj) if template else pod_door(obj) if obj.get("kind") == POD else read_door(obj)
    if not is_tenant_namespace(door.namespace):
        from cozyrender.namespaces import is_malformed_tenant_namespace

        if is_malformed_tenant_namespace(door.namespace) and door.devices:
            return Decision((Reason("metadata.namespace", f"Invalid: {malformed_namespace_message(door.namespace)}"),))
        return Decision()
    own = resolve(state, door)
    if not own.entries and not own.raw_names:
        return Decision()  # no GPU of any class: nothing the budgets read
    from .classes import check_workload_classes

    reasons: list[Reason] = list(_raw_gpus(state, own))
    classes = check_workload_classes(state, own, platform_vgpu)
    reasons += classes.reasons
    warnings = list(classes.warnings)
    if template:
        return Decision(tuple(reasons), tuple(warnings))
    if door.parent is not None:
        reasons += _claim_problems(state, door, own)
        return Decision(tuple(reasons), tuple(warnings))
    charged = own
    below: dict[str, int] = {}
    for child in children_of(state, door.identity):
        for gpu_class, count in held(state, child).items():
            below[gpu_class] = below.get(gpu_class, 0) + count
    if any(count > own.reservations.get(c, 0) for c, count in below.items()):
        reservations = dict(own.reservations)
        for gpu_class, count in below.items():
            reservations[gpu_class] = max(count, reservations.get(gpu_class, 0))
        charged = own._replace(reservations=reservations)
    budget = check_workload_budget(state, charged)
    return Decision(tuple(reasons) + budget.reasons, tuple(warnings) + budget.warnings)


def _raw_gpus(state: BudgetState, own: Workload):
    """KubeVirt `gpus` entries naming a device no class offers, where budgets apply."""
    root = state.budget_root(own.namespace)
    if root is None or not state.declarations[root].budgets:
        return
    for path, device in own.raw_names:
        yield Reason(f"{path}.deviceName",
                     f"Forbidden: GPU {device!r} is no GPUClass's resource, so it reserves nothing from the GPU "
                     f"budgets of pool {root}: use a device a GPUClass offers")


def _claim_problems(state: BudgetState, door: Door, own: Workload) -> list[Reason]:
    parent = door.parent
    what = LAUNCHER if door.kind == POD else door.kind
    target = parent_identity(door)
    if target is None:
        if not parent.kind:
            return [Reason(parent.path, f"Forbidden: names {parent.name!r}, not an app of this namespace "
                                        f"(<Kind>/<name>, Kind one of {', '.join(WORKLOAD_KINDS)}): its devices "
                                        "would be charged to nothing")]
        return [Reason(parent.path, f"Forbidden: a {door.kind} cannot hold the devices of a {parent.kind}")]
    kind, namespace, name = target
    if target not in state.owned:
        return [Reason(parent.path, f"Forbidden: the {what} claims the devices of {kind} {namespace}/{name}, "
                                    "which does not exist: it would hold GPUs no budget counts")]
    if parent.uid:
        owner = state.doors.get(target)
        if owner is None or owner.uid != parent.uid:
            return [Reason(parent.path, f"Forbidden: the {what} claims the devices of {kind} {namespace}/{name} "
                                        f"with uid {parent.uid!r}, but that object has uid "
                                        f"{owner.uid if owner is not None else ''!r}: it would hold GPUs no budget "
                                        "counts")]
    holds = state.owned[target].reservations
    others: dict[str, int] = {}
    for child in children_of(state, target):
        if child == door.identity:
            continue
        for gpu_class, count in held(state, child).items():
            others[gpu_class] = others.get(gpu_class, 0) + count
    reasons = []
    reported: set[str] = set()
    for entry in own.entries:
        gpu_class = entry.gpu_class
        if gpu_class in reported:
            continue
        reported.add(gpu_class)
        requested = own.reservations.get(gpu_class, 0)
        if requested + others.get(gpu_class, 0) > holds.get(gpu_class, 0):
            reasons.append(Reason(entry.path, (
                f"Forbidden: the {what} claims more devices of class {gpu_class!r} than {kind} {namespace}/{name} "
                f"holds: requested {requested}, held by its other claimants {others.get(gpu_class, 0)}, "
                f"it holds {holds.get(gpu_class, 0)}")))
    return reasons
