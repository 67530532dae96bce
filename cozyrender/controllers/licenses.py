"""The vGPU license copier: a thin shell that keeps the copies the contract
asks for (`cozyrender.gpuclass.license.plan`).

Watches (`cozyrender.kube.watch`):
- GPUClasses (the vgpu ones' spec.license);
- Namespaces, kept as name and labels;
- the copies: Secrets labelled `app.kubernetes.io/managed-by:
  cozyrender-license-copier` (a label-selected watch: no other Secret is
  held in memory);
- each source Secret named by a class, watched alone (its namespace and a
  `metadata.name` field selector), started and stopped as classes change.

Every event queues the namespaces it touches (a namespace event: that
namespace and its whole subtree, since entitlement is a chain; a copy: its
namespace; a class or a source: every namespace), and the worker plans and
writes for those namespaces only. Writes:
- a copy is created only after the namespace, and each ancestor, are read
  again from the API server and still entitled (the watch may lag a
  revocation); the chart's ValidatingAdmissionPolicy refuses the copier any
  Secret in a namespace not labelled entitled, and any write to a Secret
  it does not own, so neither a bug here nor a lagging watch can put a
  copy where it does not belong;
- a create answered 409 AlreadyExists means a foreign Secret of that name:
  remembered, reported, and tried again only at the next resync;
- a full pass every `resync` seconds catches anything missed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cozyrender.namespaces import ancestors, is_tenant_namespace, is_within
from cozyrender.gpuclass.license import (
    COPY_PREFIX, MANAGED_BY, MANAGED_BY_LABEL, entitled, is_copy, license_of, plan,
)
from cozyrender.kube.client import Watched, resource
from cozyrender.kube.watch import CoalescingQueue, Informer, Selection, key_of

log = logging.getLogger("cozyrender.controllers.licenses")

GPUCLASS = Watched("cozystack.io", "v1alpha1", "GPUClass", "gpuclasses", False)
NAMESPACE = Watched("", "v1", "Namespace", "namespaces", False)
SECRET = Watched("", "v1", "Secret", "secrets", True)
ALL = "*"  # queue key: every namespace
FIELD_MANAGER = "cozyrender-license-copier"


def _small_namespace(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})}}


def _small_secret(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"metadata": {key: meta.get(key) for key in ("name", "namespace", "labels", "annotations", "uid",
                                                        "resourceVersion")},
            "type": obj.get("type"), "data": dict(obj.get("data") or {})}


class LicenseCopier:
    def __init__(self, make_client: Callable[[], object], resync: float = 30.0, settle: float = 0.05) -> None:
        self.make_client = make_client
        self.client = make_client()
        self.resync = resync
        self.settle = settle
        self.queue = CoalescingQueue()
        self.lock = threading.Lock()
        self.classes: dict[str, dict] = {}
        self.sources: dict[tuple[str, str], Informer] = {}
        self.foreign: set[tuple[str, str]] = set()
        self.problems: list[str] = []
        self.writes = 0
        self.informers = [
            Informer(make_client, GPUCLASS, self._on_class),
            Informer(make_client, NAMESPACE, self._on_namespace, transform=_small_namespace),
            Informer(make_client, SECRET, self._on_copy, transform=self._copy_transform,
                     selection=Selection(labels={MANAGED_BY_LABEL: MANAGED_BY})),
        ]
        self._namespaces, self._copies = self.informers[1], self.informers[2]

    # ------------------------------------------------------------- events

    def _on_class(self, event, new, old) -> None:
        name = key_of(new or old)[1]
        with self.lock:
            if new is None:
                self.classes.pop(name, None)
            else:
                self.classes[name] = new
            self._follow_sources()
        self.queue.add(ALL)

    def _follow_sources(self) -> None:
        """One informer per source Secret the classes name (under self.lock)."""
        wanted = set()
        for gpuclass in self.classes.values():
            source = license_of(gpuclass)
            if source is not None:
                wanted.add((source.namespace, source.name))
        for key in [key for key in self.sources if key not in wanted]:
            self.sources.pop(key).stop()
        for namespace, name in wanted - set(self.sources):
            informer = Informer(self.make_client, SECRET, lambda *args: self.queue.add(ALL),
                                selection=Selection(namespace=namespace, fields={"metadata.name": name}),
                                transform=_small_secret)
            self.sources[(namespace, name)] = informer.start()

    def _on_namespace(self, event, new, old) -> None:
        name = key_of(new or old)[1]
        before = ((old or {}).get("metadata") or {}).get("labels") or {}
        after = ((new or {}).get("metadata") or {}).get("labels") or {}
        if event == "MODIFIED" and before.get("namespace.cozystack.io/vgpu") == after.get("namespace.cozystack.io/vgpu"):
            return  # another label: entitlement did not move
        if is_tenant_namespace(name):
            # Entitlement is a chain: the subtree below moves with it.
            below = [ns for ns in self._namespaces.store if is_within(ns[1], name)]
            self.queue.add(name, *(ns[1] for ns in below))
        else:
            self.queue.add(name)

    def _copy_transform(self, obj: dict) -> dict | None:
        return _small_secret(obj) if is_copy(obj) else None

    def _on_copy(self, event, new, old) -> None:
        self.queue.add(key_of(new or old)[0])

    # ------------------------------------------------------------- work

    def synced(self) -> bool:
        with self.lock:
            sources = list(self.sources.values())
        return all(i.synced.is_set() for i in self.informers) and all(i.synced.is_set() for i in sources)

    def _labels(self) -> dict[str, dict]:
        return {key[1]: obj["metadata"]["labels"] for key, obj in list(self._namespaces.store.items())}

    def _still_entitled(self, namespace: str) -> bool:
        """Read the namespace and its ancestors from the API server now."""
        from lightkube.core.exceptions import ApiError

        chain = list(ancestors(namespace)) if is_tenant_namespace(namespace) else [namespace]
        labels = {}
        for name in chain:
            try:
                labels[name] = dict(self.client.get(resource(NAMESPACE), name)).get("metadata", {}).get("labels") or {}
            except ApiError as err:
                if err.status.code == 404:
                    return False
                raise
        return entitled(namespace, labels)

    def reconcile(self, namespaces: set[str] | None) -> int:
        """Plan and write for `namespaces` (None: all); the writes made."""
        from lightkube.core.exceptions import ApiError

        with self.lock:
            classes = list(self.classes.values())
            sources = {key: (next(iter(informer.store.values()), None)) for key, informer in self.sources.items()}
        copies = {key: obj for key, obj in list(self._copies.store.items())}
        todo = plan(classes, sources, self._labels(), copies, self.foreign, only=namespaces)
        self.problems = todo.problems
        writes = 0
        for namespace, name in todo.delete:
            try:
                self.client.delete(resource(SECRET), name, namespace=namespace)
                writes += 1
            except ApiError as err:
                if err.status.code != 404:
                    raise
        for copy in todo.update:
            meta = copy["metadata"]
            current = copies.get((meta["namespace"], meta["name"]))
            body = dict(copy, metadata={**meta, "resourceVersion": (current or {}).get("metadata", {}).get(
                "resourceVersion")})
            try:
                self.client.replace(resource(SECRET)(body), namespace=meta["namespace"], field_manager=FIELD_MANAGER)
                writes += 1
            except ApiError as err:
                if err.status.code not in (404, 409):  # gone or changed meanwhile: its event re-queues it
                    raise
        for copy in todo.create:
            meta = copy["metadata"]
            if not self._still_entitled(meta["namespace"]):
                continue  # the watch lags a revocation: the namespace's event follows
            try:
                self.client.create(resource(SECRET)(copy), namespace=meta["namespace"], field_manager=FIELD_MANAGER)
                writes += 1
            except ApiError as err:
                if err.status.code == 409:
                    self.foreign.add((meta["namespace"], meta["name"]))
                    log.warning("Secret %s/%s exists and is not the license copier's: left alone",
                                meta["namespace"], meta["name"])
                elif err.status.code != 404:  # 404: the namespace went away
                    raise
        self.writes += writes
        return writes

    def run(self, stop: threading.Event) -> None:
        for informer in self.informers:
            informer.start()
        next_resync = 0.0
        while not stop.is_set():
            if not self.synced():
                stop.wait(0.1)
                continue
            if time.monotonic() >= next_resync:
                self.foreign.clear()  # a foreign Secret may have gone: try again
                self.queue.add(ALL)
                next_resync = time.monotonic() + self.resync
            batch = self.queue.take(timeout=0.5, settle=self.settle)
            if not batch:
                continue
            try:
                self.reconcile(None if ALL in batch else batch)
            except Exception as err:  # noqa: BLE001 - retried on the next pass
                log.warning("license copies: %s", err)
                self.queue.add(*batch)
                stop.wait(1)
        for informer in self.informers + list(self.sources.values()):
            informer.stop()

    def samples(self) -> list:
        counts: dict[str, int] = {}
        for obj in list(self._copies.store.values()):
            name = obj["metadata"]["name"]
            counts[name[len(COPY_PREFIX):]] = counts.get(name[len(COPY_PREFIX):], 0) + 1
        samples = [("cozyrender_license_copies", {"gpuclass": name}, float(count))
                   for name, count in sorted(counts.items())]
        samples.append(("cozyrender_license_foreign_secrets", {}, float(len(self.foreign))))
        return samples
