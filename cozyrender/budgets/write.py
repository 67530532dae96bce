"""One entry point for a write: `check_write(state, obj)` dispatches on the
object's kind to the Tenant declaration gate or the workload checks (GPU
classes, the vGPU entitlement and the budgets).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.gpuclass.classes import is_gpuclass
from cozyrender.kube.shape import ShapeError, got

from .checks import Decision, check_tenant_declaration, check_workload_budget
from .index import BudgetState
from .model import (
    TENANT,
    WORKLOAD_KINDS,
    is_apps_object,
    parse_workload,
)


def check_write(state: BudgetState, obj: Mapping, platform_vgpu: bool | None = None) -> Decision:
    """Check one write against the indexed state: an update when `state`
    holds an object of the same kind, namespace and name, a create otherwise.

    Tenant (apps.cozystack.io): the declaration gate. VMInstance and
    KubernetesNodes (apps.cozystack.io): the class and vGPU checks, then the
    GPU budget check. GPUClass (cozystack.io): the class validation.
    `platform_vgpu` overrides the root's vGPU entitlement read from the state.
    Raises ShapeError for an object the rules cannot read, including
    any other kind; for a GPUClass, CRDError or RuleCompileError
    (`cozyrender.gpuclass.validation`) when the shipped CRD cannot be used.
    """
    kind = obj.get("kind")
    if not isinstance(kind, str) and kind is not None:
        raise ShapeError.at(obj, "kind", f"is not a string (got {got(kind)})")
    if is_apps_object(obj, TENANT):
        return check_tenant_declaration(state, obj)
    if kind in WORKLOAD_KINDS and is_apps_object(obj, kind):
        from .classes import check_workload_classes

        workload = parse_workload(obj)
        classes = check_workload_classes(state, workload, platform_vgpu)
        budget = check_workload_budget(state, workload)
        return Decision(classes.reasons + budget.reasons, classes.warnings + budget.warnings)
    if is_gpuclass(obj):
        from .classes import check_gpuclass_write

        return check_gpuclass_write(state, obj)
    raise ShapeError.at(
        obj, "", f"cannot check this kind (apiVersion {got(obj.get('apiVersion'))}); expected an "
        "apps.cozystack.io/v1alpha1 Tenant, VMInstance or KubernetesNodes, or a cozystack.io GPUClass"
    )
