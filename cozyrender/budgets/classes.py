"""GPU classes named by a write: the class must exist and hold its resource
name, and a `vgpu` class needs the namespace's vGPU entitlement; a GPUClass
write is validated against the shipped CRD as the API server would.

The rules themselves live elsewhere, one implementation each: conflicts in
`cozyrender.gpuclass.conflicts`, the CRD validation in
`cozyrender.gpuclass.validation`, the entitlement chain in
`cozyrender.entitlement`. This module only applies them to a write.

Pure functions, no I/O (the CRD file is read once by the validator).
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.entitlement import chain_entitlement, label_value

from .checks import Decision, Reason
from .index import BudgetState
from .model import WORKLOAD_KINDS, Workload
from cozyrender.namespaces import ROOT_NAMESPACE, ancestors, is_tenant_namespace

NO_CLASSES = (
    "the state holds no GPUClass objects, so the class cannot be checked (existence, conflicts, "
    "vGPU entitlement); include them: `kubectl get gpuclasses -o yaml` (add the output to --state)"
)


def namespace_entitled(state: BudgetState, namespace: str, platform_vgpu: bool) -> bool:
    """The vGPU entitlement of `namespace`: the platform's value for
    tenant-root, then each tenant's `spec.gpu.vgpu` down the chain (a tenant
    namespace without a Tenant object in the state asks for nothing).
    Namespaces outside the tenant tree are never entitled."""
    if not is_tenant_namespace(namespace):
        return False
    chain = [ns for ns in reversed(list(ancestors(namespace))) if ns != ROOT_NAMESPACE]
    requested = [
        state.declarations[ns].requests_vgpu if ns in state.declarations else False for ns in chain
    ]
    return chain_entitlement(platform_vgpu, requested)


def not_entitled_because(state: BudgetState, namespace: str, platform_vgpu: bool) -> str:
    """Why `namespace` is not entitled to vGPU, naming the first link of the
    chain that breaks it (issue 19 item 10): the platform's switch, a tenant
    from the root down not setting spec.gpu.vgpu (by its Tenant object), or
    a tenant namespace with no Tenant in the state."""
    if not is_tenant_namespace(namespace):
        return f"namespace {namespace} is outside the tenant tree"
    if not platform_vgpu:
        return "the platform's gpu.vgpu is off"
    for ns in reversed(list(ancestors(namespace))):
        if ns == ROOT_NAMESPACE:
            continue
        declaration = state.declarations.get(ns)
        if declaration is None:
            return f"namespace {ns} has no Tenant in the state (a tenant not written asks for nothing)"
        if not declaration.requests_vgpu:
            return f"{declaration.ref} (namespace {ns}) does not set spec.gpu.vgpu"
    return "entitled"  # not reached when the chain says not entitled


def label_disagreements(state: BudgetState, namespace: str, platform_vgpu: bool) -> list[str]:
    """Tenant namespaces from the root's child down to `namespace` whose
    Namespace in the state carries a `namespace.cozystack.io/vgpu` label
    saying otherwise than the Tenant chain: two sources of one entitlement
    that disagree. Every choice errs towards refusing, so a vGPU class is
    refused there until they agree, whichever says true (issue 11 item 6)."""
    if not is_tenant_namespace(namespace):
        return []
    found = []
    entitled = platform_vgpu
    for ns in reversed(list(ancestors(namespace))):
        if ns == ROOT_NAMESPACE:
            continue
        declaration = state.declarations.get(ns)
        entitled = chain_entitlement(entitled, [declaration.requests_vgpu if declaration is not None else False])
        label = state.namespace_vgpu.get(ns)
        if label is not None and label != entitled:
            found.append(f"namespace {ns}: its label says {label_value(label)}, the Tenants from the root down "
                         f"say {label_value(entitled)}")
    return found


def check_workload_classes(state: BudgetState, workload: Workload, platform_vgpu: bool | None = None) -> Decision:
    """Each class a VMInstance/KubernetesNodes/Kubernetes write names must be a GPUClass
    of the state, not in conflict over its resource name, and, when its mode
    is `vgpu`, usable in the workload's namespace. A state without any
    GPUClass cannot vouch for a class: every class named is refused, saying
    so. `platform_vgpu` overrides the root's entitlement read from the
    state; when neither says, the platform counts as not entitled (a
    warning says so)."""
    from cozyrender.gpuclass.classes import mode

    if not workload.entries:
        return Decision()
    reasons: list[Reason] = []
    warnings: list[str] = []
    names: dict[str, str] = {}  # class name -> the field of the first entry naming it
    for entry in workload.entries:
        names.setdefault(entry.gpu_class, entry.path)
    if not state.gpuclasses:  # (a door's classes come from the state's classes: never here)
        for name, path in names.items():
            reasons.append(Reason(f"{path}.class", f"Invalid: GPU class {name!r}: {NO_CLASSES}"))
        return Decision(tuple(reasons))
    platform = platform_vgpu if platform_vgpu is not None else state.platform_vgpu
    if platform is None and any(
        name in state.gpuclasses and name not in state.conflicts and mode(state.gpuclasses[name]) == "vgpu"
        for name in names
    ):
        warnings.append(
            "the platform's vGPU setting is not in the state (the tenant-root Namespace's label or "
            "tenant-root/cozystack-values): treated as off; pass --platform-vgpu to set it"
        )
    door = workload.kind not in WORKLOAD_KINDS  # a door's entries are its device fields
    for name, path in names.items():
        field = path if door else f"{path}.class"
        gpuclass = state.gpuclasses.get(name)
        if gpuclass is None:
            reasons.append(Reason(field, f"Invalid: GPU class {name!r} does not exist"))
            continue
        if name in state.conflicts:
            reasons.append(Reason(field, f"Forbidden: {state.conflicts[name]}"))
            continue
        if mode(gpuclass) != "vgpu":
            continue
        labels = label_disagreements(state, workload.namespace, bool(platform))
        if not namespace_entitled(state, workload.namespace, bool(platform)):
            disagreement = state.platform_disagreement if platform_vgpu is None else None
            reasons.append(Reason(
                field,
                f"Forbidden: GPU class {name!r} is a vGPU class and namespace {workload.namespace} is not "
                f"entitled to vGPU: {not_entitled_because(state, workload.namespace, bool(platform))} "
                "(each tenant from the root down must set spec.gpu.vgpu, "
                f"and the platform's gpu.vgpu must be on: it is {'on' if platform else 'off'}"
                + (f"; {disagreement}" if disagreement else "")
                + (f"; the sources disagree: {'; '.join(labels)}" if labels else "") + ")",
            ))
        elif labels:
            reasons.append(Reason(
                field,
                f"Forbidden: GPU class {name!r} is a vGPU class and the vGPU entitlement of namespace "
                f"{workload.namespace} is in doubt: the sources disagree ({'; '.join(labels)}); "
                "refused until they agree",
            ))
    return Decision(tuple(reasons), tuple(warnings))


def check_gpuclass_write(state: BudgetState, obj: Mapping) -> Decision:
    """Validate a GPUClass write against the shipped CRD: a create, or an
    update with the state's class of the same name bound as `oldSelf`.
    A class that would be in conflict over its resource name is a warning:
    the write is valid, but workloads cannot use the class. A CRD that
    cannot be used raises its own error (CRDError, RuleCompileError): it
    is no fault of the write."""
    from cozyrender.gpuclass.conflicts import find_conflicts
    from cozyrender.gpuclass.validation import validate_gpuclass
    from cozyrender.kube.shape import ShapeError, mapping, string

    # An unnamed class is the validator's to report; metadata that is not an
    # object is refused before validation, as the API server's decoder does.
    metadata = mapping(obj, "metadata", obj)
    name = string(metadata, "name", obj, "metadata") or ""
    old = state.gpuclasses.get(name)
    result = validate_gpuclass(obj, old)
    reasons = tuple(Reason(v.path or "<root>", f"Invalid: {v.message}") for v in result.violations)
    warnings: list[str] = [f"pruned unknown field {path}" for path in result.pruned]
    if reasons:
        # Refused already; an invalid class cannot be ranked for its resource name.
        return Decision(reasons, tuple(warnings))
    written = dict(obj)
    if old is not None:
        # An update keeps the stored creation time, and so its seniority.
        created = old["metadata"].get("creationTimestamp")
        written["metadata"] = dict(metadata, creationTimestamp=created)
    others = [c for n, c in state.gpuclasses.items() if n != name]
    try:
        conflict = find_conflicts(others + [written]).get(name)
    except ShapeError as err:  # the state's classes were read when indexed: this is the write
        raise err.about(obj) from None
    if conflict is not None:
        warnings.append(f"{conflict}; workloads naming it will be refused")
    return Decision(reasons, tuple(warnings))
