"""cozyrender's controllers: thin shells with I/O over the library's rules,
run by the leader of `cozyrender controller` (`manager`, `lease`).

- `gpuclass_status`: GPUClass status from `gpuclass.status`;
- `licenses`: vGPU license copies from `gpuclass.license`;
- `metrics`: billing and alert figures from the pool tree and the catalog.

`registry` builds the chosen controllers' factories and the metrics
exporter for the command.
"""

from __future__ import annotations

from collections.abc import Callable


def registry(make_client: Callable[[], object], chosen: tuple[str, ...], namespace: str,
             platform_vgpu: bool | None = None):
    """(name -> controller factory, the metrics exporter) for `chosen`."""
    from cozyrender.controllers.metrics import Exporter

    exporter = Exporter(platform_vgpu=platform_vgpu)
    factories: dict[str, Callable[[], object]] = {}
    if "status" in chosen:
        from cozyrender.controllers.gpuclass_status import StatusController

        def status():
            controller = StatusController(make_client)
            exporter.status = controller
            return controller

        factories["status"] = status
    if "licenses" in chosen:
        from cozyrender.controllers.licenses import LicenseCopier

        def licenses():
            controller = LicenseCopier(make_client)
            exporter.licenses = controller
            return controller

        factories["licenses"] = licenses
    if "metrics" in chosen:
        from cozyrender.controllers.metrics import BudgetWatcher

        def budgets():
            watcher = BudgetWatcher(make_client, platform_vgpu)
            exporter.budgets = watcher
            return watcher

        factories["metrics"] = budgets
    return factories, exporter
