"""GPU classes in a workload write: the class must exist and hold its
resource name (no conflict), and a `vgpu` class needs the namespace's vGPU
entitlement. Placeholder until the GPU-class modules land."""

from __future__ import annotations

from collections.abc import Mapping

from .checks import Decision
from .index import BudgetState
from .model import Workload


def check_workload_classes(state: BudgetState, workload: Workload, platform_vgpu: bool | None) -> Decision:
    return Decision()


def check_gpuclass_write(state: BudgetState, obj: Mapping) -> Decision:
    return Decision()
