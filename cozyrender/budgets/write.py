"""One entry point for a write: `check_write(state, obj)` dispatches on the
object's kind to the Tenant declaration gate or the workload checks (GPU
classes, the vGPU entitlement and the budgets).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.gpuclass.classes import is_gpuclass
from cozyrender.kube.shape import ShapeError, got

from .checks import Decision, Reason, check_tenant_declaration, check_workload_budget
from .index import BudgetState
from .model import (
    TENANT,
    WORKLOAD_KINDS,
    ClassEntry,
    Workload,
    is_apps_object,
    parse_workload,
    quota_field,
)
from cozyrender.namespaces import is_malformed_tenant_namespace, malformed_namespace_message, owned_namespace


def check_write(state: BudgetState, obj: Mapping, platform_vgpu: bool | None = None) -> Decision:
    """`_check_write`, with the fields the app's schema refuses first
    (`cozyrender.appspec`: an unknown field with the one meant, a wrong
    type), as the API server refuses them under strict field validation. A
    spec the rules cannot read at all stays a ShapeError (bad input)."""
    decision = _check_write(state, obj, platform_vgpu)
    if isinstance(obj.get("kind"), str) and api_group_is_apps(obj):
        from cozyrender.appspec import spec_problems

        refused = tuple(Reason(field, message) for field, message in spec_problems(obj))
        if refused:
            return Decision(refused + decision.reasons, decision.warnings)
    return decision


def api_group_is_apps(obj: Mapping) -> bool:
    return any(is_apps_object(obj, kind) for kind in (TENANT, *WORKLOAD_KINDS))


def _check_write(state: BudgetState, obj: Mapping, platform_vgpu: bool | None = None) -> Decision:
    """Check one write against the indexed state: an update when `state`
    holds an object of the same kind, namespace and name, a create otherwise.

    Tenant (apps.cozystack.io): the declaration gate. VMInstance,
    KubernetesNodes and Kubernetes (apps.cozystack.io): the class and vGPU
    checks, then the GPU budget check. GPUClass (cozystack.io): the class
    validation. Pod, VirtualMachine, VirtualMachineInstance, ResourceClaim
    and ResourceClaimTemplate: the other doors (`door_checks`).
    `platform_vgpu` overrides the root's vGPU entitlement read from the state.
    Raises ShapeError for an object the rules cannot read, including
    any other kind; for a GPUClass, CRDError or RuleCompileError
    (`cozyrender.gpuclass.validation`) when the shipped CRD cannot be used.
    """
    kind = obj.get("kind")
    if not isinstance(kind, str) and kind is not None:
        raise ShapeError.at(obj, "kind", f"is not a string (got {got(kind)})")
    if is_apps_object(obj, TENANT):
        decision = check_tenant_declaration(state, obj)
        quotas = (obj.get("spec") or {}).get("resourceQuotas") if isinstance(obj.get("spec"), Mapping) else None
        if isinstance(quotas, Mapping):
            near = tuple(f"{quota_field(key)}: {message}" for key, message in near_miss_keys(quotas))
            decision = Decision(decision.reasons, decision.warnings + near)
        namespace = obj["metadata"]["namespace"]
        if is_malformed_tenant_namespace(namespace):
            return Decision((_malformed_namespace(namespace),) + decision.reasons, decision.warnings)
        owned = owned_namespace(obj["metadata"]["name"], namespace)
        if is_malformed_tenant_namespace(owned):  # too long: no level above it would gate it
            return Decision((Reason("metadata.name", f"Invalid: {malformed_namespace_message(owned)} (the namespace it would own)"),)
                            + decision.reasons, decision.warnings)
        return decision
    if kind in WORKLOAD_KINDS and is_apps_object(obj, kind):
        from .classes import check_workload_classes

        workload = parse_workload(obj)
        shape = tuple(workload_problems(state, workload))
        classes = check_workload_classes(state, workload, platform_vgpu)
        budget = check_workload_budget(state, workload)
        return Decision(shape + classes.reasons + budget.reasons, classes.warnings + budget.warnings)
    if is_gpuclass(obj):
        from .classes import check_gpuclass_write

        return check_gpuclass_write(state, obj)
    from .doors import door_kind, is_claim_template

    if door_kind(obj) is not None or is_claim_template(obj):
        from .door_checks import check_door_write

        return check_door_write(state, obj, platform_vgpu)
    raise ShapeError.at(
        obj, "", f"cannot check this kind (apiVersion {got(obj.get('apiVersion'))}); expected an "
        "apps.cozystack.io/v1alpha1 Tenant, VMInstance, KubernetesNodes or Kubernetes, a cozystack.io GPUClass, "
        "a v1 Pod, a kubevirt.io VirtualMachine or VirtualMachineInstance, or a resource.k8s.io ResourceClaim or "
        "ResourceClaimTemplate"
    )


def namespaces_held(objects) -> set[str]:
    """The namespaces a state shows to exist: its Namespace objects, the
    namespace of every namespaced object in it, and the namespace each Tenant
    owns (its chart creates it; a GitOps state holds the Tenant, not the
    Namespace)."""
    from cozyrender.namespaces import owned_namespace as owned

    held: set[str] = set()
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(meta, Mapping):
            continue
        name, namespace = meta.get("name"), meta.get("namespace")
        if isinstance(namespace, str) and namespace:
            held.add(namespace)
            if is_apps_object(obj, TENANT) and isinstance(name, str) and name:
                held.add(owned(name, namespace))
        elif obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1" and isinstance(name, str):
            held.add(name)
    return held


def unknown_namespace(held: set[str], obj: Mapping) -> Reason | None:
    """A write into a namespace the state does not hold: refused, as the API
    server refuses it (the namespace does not exist), naming the nearest
    namespace the state holds. None for a cluster-scoped write, or one into a
    namespace the state holds."""
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    if not isinstance(namespace, str) or not namespace or namespace in held:
        return None
    from cozyrender.nearmiss import did_you_mean

    return Reason("metadata.namespace", f"NotFound: namespace {namespace!r} is not in the state (no Namespace, "
                                        f"no Tenant owning it, no object in it){did_you_mean(namespace, held)}")


def near_miss_keys(keys) -> list[tuple[str, str]]:
    """(key, warning) for each of `keys` that is a typo of a budget key
    (`cozyrender.keys.near_miss_budget_key`)."""
    from cozyrender.keys import near_miss_budget_key, near_miss_message

    found = []
    for key in keys:
        meant = near_miss_budget_key(key) if isinstance(key, str) else None
        if meant is not None:
            found.append((key, near_miss_message(key, meant)))
    return found


def _malformed_namespace(namespace: str) -> Reason:
    return Reason("metadata.namespace", f"Invalid: {malformed_namespace_message(namespace)}")


def raw_name_problem(state: BudgetState, workload: Workload, name: str) -> str | None:
    """Why a `spec.gpus` entry naming only a device-plugin resource may not
    be written, or None: it reserves nothing and skips the class and vGPU
    gates, so it is refused where the namespace's pool has a GPU budget or
    the name is a GPUClass's resource (issue 11 item 3)."""
    classes = state.class_resources.get(name)
    if classes:
        named = " or ".join(f"{{class: {c}}}" for c in classes)
        return (f"Forbidden: {name!r} is the resource of GPU class{'es' if len(classes) > 1 else ''} "
                f"{', '.join(classes)}: name the class instead ({named}), so its budget and vGPU rules apply")
    root = state.budget_root(workload.namespace)
    if root is not None and state.declarations[root].budgets:
        return (f"Forbidden: a device-plugin name ({name!r}) reserves nothing from the GPU budgets of pool {root}: "
                "name a GPU class (`class:`) instead")
    return None


def named_device_problem(state: BudgetState, entry: ClassEntry) -> str | None:
    """Why a class entry that also gives a device-plugin `name` may not be
    written, or None: the VM charts render `name` as the device the VM gets,
    so a name other than the class's resource would get a device that no
    class, budget or vGPU rule read, under another class's budget (the
    bypass of issue 11 item 3, with a class beside it)."""
    if entry.device is None:
        return None
    from cozyrender.gpuclass.classes import resource_name

    gpuclass = state.gpuclasses.get(entry.gpu_class)
    resource = resource_name(gpuclass) if gpuclass is not None else None
    if resource is not None and entry.device == resource:
        return None
    return (f"Forbidden: the entry names class {entry.gpu_class!r} and device-plugin name {entry.device!r}, "
            f"which is not the class's resource ({resource!r}): the workload would get {entry.device!r} while "
            f"the budgets count {entry.gpu_class!r}; drop `name`")


def workload_problems(state: BudgetState, workload: Workload):
    """What refuses a workload whatever its budget: a namespace no tenant can
    own, a worker pool whose minReplicas exceeds its maxReplicas (item 4),
    device-plugin names where they would bypass classes or budgets (item 3)."""
    if is_malformed_tenant_namespace(workload.namespace):
        yield _malformed_namespace(workload.namespace)
    for prefix, low, high in workload.replicas_inverted:
        yield Reason(f"{prefix}.minReplicas", f"Invalid: {inverted_message(prefix, low, high)}")
    for path, name in workload.raw_names:
        problem = raw_name_problem(state, workload, name)
        if problem is not None:
            yield Reason(f"{path}.name", problem)
    for entry in workload.entries:
        problem = named_device_problem(state, entry)
        if problem is not None:
            yield Reason(f"{entry.path}.name", problem)


def inverted_message(prefix: str, low: int, high: int) -> str:
    return f"{prefix}.minReplicas {low} is more than {prefix}.maxReplicas {high}"
