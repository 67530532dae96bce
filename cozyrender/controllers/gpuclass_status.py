"""The GPUClass status controller: a thin shell that writes each class's
nodes, allocatable and free units and its Ready and Conflict conditions
(`cozyrender.gpuclass.status`, over the catalog's functions).

Watches (`cozyrender.kube.watch`):
- GPUClasses;
- Nodes, kept as the few fields the figures read;
- bound, non-terminated Pods (field selector `spec.nodeName!=`,
  `status.phase!=Succeeded`, `status.phase!=Failed`), each kept only as its
  node and its effective requests of extended resources: a pod requesting
  no device is not kept at all;
- DRA (resource.k8s.io/v1, optional: a cluster that does not serve it has
  none): DeviceClasses (their selectors), ResourceSlices (their spec) and
  ResourceClaims in every namespace, each kept only as the devices its
  allocation holds (a claim not allocated is not kept).

Each event touches the classes the ClassIndex says it touches; those go on
a coalescing queue, and the worker writes a class's status only when the
desired status differs from the one it last saw (no write when nothing
changed; a burst of events is one write). Writes are merge patches of the
status subresource. Only the leader runs this (`controllers.lease`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cozyrender.gpuclass.dra import claim_allocations
from cozyrender.gpuclass.status import ClassIndex, desired_status, pod_demand, small_node
from cozyrender.kube.client import Watched
from cozyrender.kube.shape import ShapeError
from cozyrender.kube.watch import CoalescingQueue, Informer, Selection, key_of, status_resource

log = logging.getLogger("cozyrender.controllers.gpuclass_status")

GPUCLASS = Watched("cozystack.io", "v1alpha1", "GPUClass", "gpuclasses", False)
NODE = Watched("", "v1", "Node", "nodes", False)
POD = Watched("", "v1", "Pod", "pods", True)
DEVICE_CLASS = Watched("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False)
RESOURCE_SLICE = Watched("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False)
RESOURCE_CLAIM = Watched("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StatusController:
    def __init__(self, make_client: Callable[[], object], settle: float = 0.05,
                 server_timeout: int | None = None) -> None:
        self.make_client = make_client
        self.client = make_client()
        self.index = ClassIndex()
        self.queue = CoalescingQueue()
        self.settle = settle
        self.lock = threading.Lock()  # the index, between the watch threads and the worker
        self.writes = 0  # status writes made (tests and metrics read it)
        self.skipped = 0  # reconciles that found nothing to write
        self.pod_problems: dict[tuple[str, str], str] = {}
        options = {} if server_timeout is None else {"server_timeout": server_timeout}
        self.informers = [
            Informer(make_client, GPUCLASS, self._on_class, **options),
            Informer(make_client, NODE, self._on_node, transform=small_node, **options),
            Informer(make_client, POD, self._on_pod, selection=Selection(fields=_pod_fields()),
                     transform=self._pod_transform, **options),
            Informer(make_client, DEVICE_CLASS, self._on_device_class, transform=_spec_only, optional=True,
                     **options),
            Informer(make_client, RESOURCE_SLICE, self._on_slice, transform=_spec_only, optional=True, **options),
            Informer(make_client, RESOURCE_CLAIM, self._on_claim, transform=_allocations, optional=True,
                     **options),
        ]
        self._stop = threading.Event()

    # ------------------------------------------------------------- events

    def _on_class(self, event: str, new: dict | None, old: dict | None) -> None:
        name = key_of(new or old)[1]
        with self.lock:
            touched = self.index.set_class(new, name)
        self.queue.add(*touched)

    def _on_node(self, event: str, new: dict | None, old: dict | None) -> None:
        name = key_of(new or old)[1]
        with self.lock:
            touched = self.index.set_node(new, name)
        self.queue.add(*touched)

    def _pod_transform(self, pod: dict) -> dict | None:
        """A pod as its demand alone; None (not kept) when it holds no extended resource."""
        key = key_of(pod)
        try:
            demand = pod_demand(pod)
        except ShapeError as err:  # the API server validates pods: this is a defect, say it and skip
            self.pod_problems[key] = str(err)
            log.warning("%s", err)
            return None
        self.pod_problems.pop(key, None)
        if demand is None:
            return None
        node, figures = demand
        return {"metadata": {"namespace": key[0], "name": key[1]}, "node": node, "demand": figures}

    def _on_pod(self, event: str, new: dict | None, old: dict | None) -> None:
        key = key_of(new or old)
        with self.lock:
            touched = self.index.set_pod(key, None if new is None else (new["node"], new["demand"]))
        self.queue.add(*touched)

    def _on_device_class(self, event: str, new: dict | None, old: dict | None) -> None:
        with self.lock:
            touched = self.index.set_device_class(new, key_of(new or old)[1])
        self.queue.add(*touched)

    def _on_slice(self, event: str, new: dict | None, old: dict | None) -> None:
        with self.lock:
            touched = self.index.set_slice(new, key_of(new or old)[1])
        self.queue.add(*touched)

    def _on_claim(self, event: str, new: dict | None, old: dict | None) -> None:
        with self.lock:
            touched = self.index.set_claim(key_of(new or old), None if new is None else new["devices"])
        self.queue.add(*touched)

    # ------------------------------------------------------------- work

    def reconcile(self, name: str) -> bool:
        """Write the class's status if it differs; True when written."""
        from lightkube.core.exceptions import ApiError
        from lightkube.types import PatchType

        with self.lock:
            gpuclass = self.index.classes.get(name)
            if gpuclass is None:
                return False
            figures = self.index.figures(name)
        current = gpuclass.get("status") or {}
        wanted = desired_status(gpuclass, figures, _now(), current)
        if wanted == current:
            self.skipped += 1
            return False
        # Fields we no longer set are removed with null (a merge patch).
        body = {"status": {**{key: None for key in current if key not in wanted}, **wanted}}
        try:
            self.client.patch(status_resource(GPUCLASS), name, body, patch_type=PatchType.MERGE,
                              field_manager="cozyrender-controller")
        except ApiError as err:
            if err.status.code == 404:  # deleted meanwhile: its DELETED event follows
                return False
            raise
        self.writes += 1
        return True

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or self._stop
        for informer in self.informers:
            informer.start()
        while not stop.is_set():
            if not all(informer.synced.is_set() for informer in self.informers):
                stop.wait(0.1)  # figures from a half-listed cluster would be wrong: wait for every list
                continue
            batch = self.queue.take(timeout=0.5, settle=self.settle)
            for name in sorted(batch):
                try:
                    self.reconcile(name)
                except Exception as err:  # noqa: BLE001 - retried: the class goes back on the queue
                    log.warning("status of GPUClass %s: %s", name, err)
                    self.queue.add(name)
                    stop.wait(1)
        for informer in self.informers:
            informer.stop()

    def stop(self) -> None:
        self._stop.set()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)


def _pod_fields() -> dict:
    """Bound pods not terminated, as a lightkube field selector."""
    from lightkube import operators

    return {"spec.nodeName": operators.not_equal(""), "status.phase": operators.not_in(["Succeeded", "Failed"])}


def _spec_only(obj: dict) -> dict:
    """A DeviceClass or ResourceSlice as its name and spec (what the figures read)."""
    meta = obj.get("metadata") or {}
    return {"metadata": {"name": meta.get("name")}, "spec": obj.get("spec") or {}}


def _allocations(claim: dict) -> dict | None:
    """A claim as the devices its allocation holds; None (not kept) when it holds none."""
    devices = tuple(claim_allocations(claim))
    if not devices:
        return None
    namespace, name = key_of(claim)
    return {"metadata": {"namespace": namespace, "name": name}, "devices": devices}
