"""cozyrender's controllers: thin shells with I/O over the library's rules,
run by the leader of `cozyrender controller` (`manager`, `lease`).

- `gpuclass_status`: GPUClass status from `gpuclass.status`;
- `licenses`: vGPU license copies from `gpuclass.license`;
- `metrics`: billing and alert figures from the pool tree and the catalog;
- `gpubudgets`: each tenant namespace's GPUBudget from the pool tree.

`registry` builds the chosen controllers' factories and the metrics
exporter for the command.
"""

from __future__ import annotations

from collections.abc import Callable


def registry(make_client: Callable[[], object], chosen: tuple[str, ...], platform_vgpu: bool | None = None,
             renew_deadline: float | None = None):
    """(name -> controller factory, the metrics exporter) for `chosen`. With
    the `metrics` controller the exporter's `devices` (device-time,
    `controllers.devicetime`) is the record the Lease must carry, its
    checkpoint projected `renew_deadline` seconds ahead."""
    from cozyrender.controllers.devicetime import DeviceTime
    from cozyrender.controllers.gpubudgets import BudgetWriter
    from cozyrender.controllers.gpuclass_status import StatusController
    from cozyrender.controllers.lease import RENEW_DEADLINE
    from cozyrender.controllers.licenses import LicenseCopier
    from cozyrender.controllers.metrics import BudgetWatcher, Exporter

    exporter = Exporter()
    if "metrics" in chosen:
        exporter.devices = DeviceTime(RENEW_DEADLINE if renew_deadline is None else renew_deadline)
    makers = {  # name -> (the exporter's attribute, how to make it)
        "status": ("status", lambda: StatusController(make_client)),
        "licenses": ("licenses", lambda: LicenseCopier(make_client)),
        "metrics": ("budgets", lambda: BudgetWatcher(make_client, platform_vgpu, exporter.devices)),
        "gpubudgets": ("gpubudgets", lambda: BudgetWriter(make_client, platform_vgpu)),
    }

    def factory(attribute: str, make: Callable[[], object]) -> Callable[[], object]:
        def made():
            controller = make()
            setattr(exporter, attribute, controller)  # the leader's metrics read it
            return controller
        return made

    factories = {name: factory(*makers[name]) for name in chosen}
    return factories, exporter
