"""The GPUBudget writer: a thin shell that keeps one GPUBudget
(`cozyrender.tree.gpubudget`) per tenant namespace, so a tenant's users
read their own budget, carve-outs, use and room left in their namespace.

Watches (`cozyrender.kube.watch`): every kind `cozyrender check` reads
(kube.client.WATCHED, selected and kept as the metrics' watcher keeps
them), and the GPUBudgets it wrote (label app.kubernetes.io/managed-by=
cozyrender-controller).

Any event of the state wakes the worker; after a short settle (a burst of
events is one pass) it computes the pool tree from the stores by the one
library `cozyrender tree` uses (`tree.objects.computed_tree`), the status
each namespace's GPUBudget should have (`tree.gpubudget.desired`), and
writes only those that differ from the stored ones: a missing GPUBudget is
created, a stale status replaced (`update` of the status subresource, with
the stored resourceVersion; a conflict or a deletion meanwhile is retried
from its watch event). Nothing changed, nothing written. A GPUBudget whose
status someone else changed differs again and is written back. When no
tree can be computed at all, every stored GPUBudget says so (Ready False,
TreeError). Only the leader runs this (`controllers.lease`); its writes are
fenced by the Lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cozyrender.kube.client import WATCHED, Watched
from cozyrender.kube.watch import Informer, Selection, list_scope_selection, status_resource
from cozyrender.tree import gpubudget

log = logging.getLogger("cozyrender.controllers.gpubudgets")

GPUBUDGET = Watched(gpubudget.GROUP, gpubudget.VERSION, gpubudget.KIND, gpubudget.PLURAL, True)
FIELD_MANAGER = "cozyrender-controller"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class BudgetWriter:
    def __init__(self, make_client: Callable[[], object], platform_vgpu: bool | None = None,
                 settle: float = 0.2) -> None:
        from cozyrender.controllers.metrics import _keep

        self.client = make_client()
        self.platform_vgpu = platform_vgpu
        self.settle = settle
        self.writes = 0  # GPUBudgets created and statuses written (tests read it)
        self._wake = threading.Event()
        self._wake.set()
        self.state_informers = [
            Informer(make_client, watched, self._on_state, selection=list_scope_selection(watched),
                     transform=_keep(watched))
            for watched in WATCHED
        ]
        self.budgets = Informer(make_client, GPUBUDGET, self._on_budget, selection=Selection(
            labels={"app.kubernetes.io/managed-by": gpubudget.MANAGED_BY}))
        self.informers = [*self.state_informers, self.budgets]

    def _on_state(self, event, new, old) -> None:
        self._wake.set()

    def _on_budget(self, event, new, old) -> None:
        if event == "DELETED" or (new or {}).get("status") != (old or {}).get("status"):
            self._wake.set()  # deleted, or its status changed by someone: written back if it differs

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def stored(self, namespace: str) -> dict | None:
        return self.budgets.store.get((namespace, gpubudget.NAME))

    # ------------------------------------------------------------- work

    def wanted(self) -> dict[str, dict]:
        """namespace -> the status its GPUBudget should have."""
        from cozyrender.tree.objects import computed_tree

        objects = [obj for informer in self.state_informers for obj in list(informer.store.values())]
        now = _now()
        try:
            computed = computed_tree(objects, self.platform_vgpu)
        except Exception as err:  # noqa: BLE001 - no tree at all: every GPUBudget says why
            log.warning("the pool tree cannot be computed: %s", err)
            return {namespace: gpubudget.error_status(str(err), now, obj)
                    for (namespace, _), obj in list(self.budgets.store.items())}
        for found in computed.left_out:
            log.warning("left out of the GPUBudgets' pool tree: %s", found.ref)
        return gpubudget.desired(computed.tree, computed.problem, now, self.stored)

    def reconcile(self) -> int:
        """One pass: write every GPUBudget that differs; the number written."""
        written = 0
        for namespace, status in sorted(self.wanted().items()):
            stored = self.stored(namespace)
            if not gpubudget.changed(stored, status):
                continue
            written += self._write(namespace, stored, status)
        return written

    def _write(self, namespace: str, stored: dict | None, status: dict) -> int:
        from lightkube.core.exceptions import ApiError

        from cozyrender.kube.client import resource

        try:
            if stored is None:
                stored = self.client.create(resource(GPUBUDGET)(gpubudget.new_object(namespace)),
                                            namespace=namespace, field_manager=FIELD_MANAGER)
                stored = stored.to_dict() if hasattr(stored, "to_dict") else dict(stored)
            body = {**gpubudget.new_object(namespace), "status": status}
            body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
            self.client.replace(status_resource(GPUBUDGET)(body), namespace=namespace,
                                field_manager=FIELD_MANAGER)
        except ApiError as err:
            # 404: the namespace (or the object) went; 409: changed or created meanwhile; 403: the
            # namespace is terminating. Each comes back with its watch event.
            if err.status.code in (403, 404, 409):
                log.info("GPUBudget %s/%s not written now: %s", namespace, gpubudget.NAME, err.status.message)
                return 0
            raise
        self.writes += 1
        return 1

    def run(self, stop: threading.Event) -> None:
        for informer in self.informers:
            informer.start()
        while not stop.is_set():
            if not self._wake.wait(0.5):
                continue
            if not self.synced():
                stop.wait(0.1)  # a tree of a half-listed cluster would be wrong: wait for every list
                continue
            stop.wait(self.settle)  # the rest of a burst
            self._wake.clear()
            try:
                self.reconcile()
            except Exception as err:  # noqa: BLE001 - retried after a pause
                log.warning("GPUBudgets: %s", err)
                self._wake.set()
                stop.wait(1)
        for informer in self.informers:
            informer.stop()
