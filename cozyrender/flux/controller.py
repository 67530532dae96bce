"""The controller loop: keep injected postRenderers current as their inputs change.

Rule: a tenant HelmRelease's cozyrender entry is a function of its values and
its parent's state (`flux.inject`). When any input changes (the release's
spec, the parent's `cozystack-values` Secret, which carries `_cluster`
(`gpu-vgpu` included) and `_namespace.vgpu`, or the parent namespace's vGPU
label), the entry of every tenant release in that namespace is recomputed and
written back when it differs. Writing a release bumps its generation, so
helm-controller reconciles it at once; its upgrade rewrites the child
namespace's label and Secret, which are the inputs of the next level down: a
change at the root reaches every descendant without anyone touching their
releases. A release whose inputs cannot be read keeps its entry, whose guards
then fail the reconcile loudly (`patches`), and the loop says why.

This is the thin shell with I/O (lightkube); the decisions are `flux.inject`'s.
Three watches (`cozyrender.kube.watch`, the helper the other controllers use:
namespaces, `cozystack-values` Secrets, HelmReleases) report the namespaces
whose inputs changed (a release's status update is not a change: its
generation is the same); a watch that fails relists by difference, and a
full pass every `resync` seconds catches anything missed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cozyrender.entitlement import VGPU_LABEL
from cozyrender.flux.inject import InjectError, ParentState, injected, is_tenant_release
from cozyrender.kube.watch import CoalescingQueue
from cozyrender.values_secret import SECRET_NAME, ValuesSecretError, read_values

log = logging.getLogger("cozyrender.flux.controller")


def _helmrelease_resource():
    from lightkube.generic_resource import create_namespaced_resource

    return create_namespaced_resource("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases")


def _plain(obj) -> dict:
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


class Reader:
    """Reads the parent state of a namespace from the cluster."""

    def __init__(self, client) -> None:
        self.client = client

    def parent_state(self, namespace: str) -> ParentState:
        from lightkube import ApiError
        from lightkube.resources.core_v1 import Namespace, Secret

        try:
            ns = self.client.get(Namespace, namespace)
        except ApiError as err:
            if err.status.code == 404:
                return ParentState(None, namespace_found=False)
            raise
        label = (ns.metadata.labels or {}).get(VGPU_LABEL)
        try:
            secret = self.client.get(Secret, SECRET_NAME, namespace=namespace)
        except ApiError as err:
            if err.status.code == 404:
                return ParentState(None, vgpu_label=label)
            raise
        try:
            values = read_values({"data": secret.data or {}, "stringData": secret.stringData or {}})
        except ValuesSecretError as err:
            return ParentState(None, vgpu_label=label, values_problem=str(err))
        return ParentState(values, vgpu_label=label)


class Controller:
    """Recompute and write the injected postRenderers of tenant releases."""

    def __init__(self, client, chart: str | Path, interval: float = 0.5, resync: float = 300.0,
                 on_change: Callable[[str, str], None] | None = None, metrics=None,
                 enabled: Callable[[], bool] = lambda: True) -> None:
        self.client = client
        self.chart = chart
        self.interval = interval  # how long a pass waits for the next event
        self.resync = resync  # seconds between full passes
        self.reader = Reader(client)
        self.on_change = on_change
        self.server_timeout = 30
        self.queue = CoalescingQueue()
        self.errors: dict[str, str] = {}  # release -> why it could not be recomputed
        self.metrics = metrics  # cozyrender.flux.metrics.FluxMetrics, or None
        # Whether injection is on now (the chart lists its MutatingWebhookConfiguration): while off,
        # the loop writes nothing; turned on again, it starts with a full pass.
        self.enabled = enabled
        self._queued_at: dict[str, float] = {}  # namespace -> when a watch first reported it since its last pass

    def _count(self, what: str, *labels: str) -> None:
        if self.metrics is not None:
            metric = getattr(self.metrics, what)
            (metric.labels(*labels) if labels else metric).inc()

    def reconcile_namespace(self, namespace: str) -> list[str]:
        """Bring every tenant release in `namespace` up to date; the names written."""
        resource = _helmrelease_resource()
        written = []
        parent = None
        for release in self.client.list(resource, namespace=namespace):
            obj = _plain(release)
            if not is_tenant_release(obj):
                continue
            name = obj["metadata"]["name"]
            try:
                parent = parent or self.reader.parent_state(namespace)
                wanted = injected(obj, parent, self.chart)
            except InjectError as err:
                self.errors[f"{namespace}/{name}"] = str(err)
                log.warning("cozyrender: %s", err)
                self._count("failures", "inputs")
                continue
            self.errors.pop(f"{namespace}/{name}", None)
            if (obj.get("spec") or {}).get("postRenderers", []) == wanted:
                continue
            from lightkube.types import PatchType

            try:
                self.client.patch(resource, name, {"spec": {"postRenderers": wanted}}, namespace=namespace,
                                  patch_type=PatchType.MERGE)  # a CRD takes no strategic merge
            except Exception:
                self._count("failures", "write")
                raise
            self._count("writes")
            log.info("cozyrender: wrote the postRenderers of HelmRelease %s/%s", namespace, name)
            written.append(name)
            if self.on_change:
                self.on_change(namespace, name)
        if self.metrics is not None:
            self.metrics.passes.inc()
            self.metrics.failing.set(len(self.errors))
            queued = self._queued_at.pop(namespace, None)
            if queued is not None:
                self.metrics.lag.observe(time.monotonic() - queued)
        return written

    def _informers(self) -> list:
        """Three watches (kube.watch), each keeping of an object only what is an
        input: a namespace's vGPU label, a values Secret's resourceVersion, a
        release's generation (its status updates are not changes). The store
        compares what it keeps, so only a change of an input reaches the queue."""
        from cozyrender.kube.client import Watched
        from cozyrender.kube.watch import Informer, Selection

        def kept(value):
            def transform(obj: dict) -> dict:
                meta = obj.get("metadata") or {}
                return {"metadata": {"namespace": meta.get("namespace") or meta.get("name"),
                                     "name": meta.get("name")}, "value": value(meta)}
            return transform

        def handler(event: str, new: dict | None, old: dict | None) -> None:
            namespace = (new or old)["metadata"]["namespace"]
            self._queued_at.setdefault(namespace, time.monotonic())
            self.queue.add(namespace)

        def failed(problem: str) -> None:
            self._count("failures", "watch")

        client = lambda: self.client  # noqa: E731 - one client, as the loop writes with it
        return [
            Informer(client, Watched("", "v1", "Namespace", "namespaces", False), handler,
                     transform=kept(lambda meta: str((meta.get("labels") or {}).get(VGPU_LABEL))),
                     server_timeout=self.server_timeout, on_failure=failed),
            Informer(client, Watched("", "v1", "Secret", "secrets", True), handler,
                     selection=Selection(fields={"metadata.name": SECRET_NAME}),
                     transform=kept(lambda meta: str(meta.get("resourceVersion"))),
                     server_timeout=self.server_timeout, on_failure=failed),
            Informer(client, Watched("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", True),
                     handler, transform=kept(lambda meta: str(meta.get("generation"))),
                     server_timeout=self.server_timeout, on_failure=failed),
        ]

    def run(self, stop: threading.Event) -> None:
        """Reconcile every namespace the first lists hold, then those the
        watches report (a burst once each); a full pass again every `resync`
        seconds, so nothing missed stays behind."""
        informers = self._informers()
        for informer in informers:
            informer.start()
        next_resync = time.monotonic() + self.resync
        while not stop.is_set():
            if not self.enabled():
                next_resync = 0.0  # a full pass once it is on again
                stop.wait(self.interval)
                continue
            if time.monotonic() >= next_resync:
                self.queue.add(*{key[0] or key[1] for informer in informers for key in list(informer.store)})
                next_resync = time.monotonic() + self.resync
            pending = self.queue.take(timeout=self.interval)
            for namespace in sorted(pending):
                try:
                    self.reconcile_namespace(namespace)
                except Exception as err:  # a failed namespace is retried by the next resync
                    log.warning("cozyrender: reconciling %s failed: %s", namespace, _why(err))
                    self._count("failures", "pass")
        for informer in informers:
            informer.stop()


def _why(err: Exception) -> str:
    """An exception in words: the API server's message, or the type and text (a read
    timeout has no text of its own)."""
    status = getattr(err, "status", None)
    message = getattr(status, "message", None)
    return message or f"{type(err).__name__}: {err}".rstrip(": ")


def start(client, chart: str | Path, interval: float = 0.5, **options) -> tuple[Controller, threading.Event,
                                                                                 threading.Thread]:
    """Run the loop in a daemon thread of this process (the webhook's)."""
    controller = Controller(client, chart, interval, **options)
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), name="cozyrender-flux", daemon=True)
    thread.start()
    return controller, stop, thread


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
