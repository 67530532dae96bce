"""The webhook cache's readiness over `kube.watch.Reflector`, against scripted
clients (no API server): a kind the API server does not serve counts as synced
and empty however often it is asked again; a kind that was served and then
answers 404 fails closed (stale, not empty); resuming from versions is all
kinds or none. The live tests run the cache against a real API server
(tests/test_webhook_live.py)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import Watched
from cozyrender.webhook.cache import Cache
from cozyrender.webhook.metrics import Metrics

NAMESPACES = Watched("", "v1", "Namespace", "namespaces", False, "tenant-namespace")
TENANTS = Watched("apps.cozystack.io", "v1alpha1", "Tenant", "tenants", True)


class ApiError(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.status = SimpleNamespace(code=code, message=message)


class Listing:
    def __init__(self, items: list[dict], version: str) -> None:
        self.items, self.resourceVersion = items, version

    def __iter__(self):
        return iter([dict(item) for item in self.items])


class Client:
    """Lists answer `lists(n)` for the n-th list (a list of objects, or an
    exception); watches stay open, quiet, until the cache stops."""

    def __init__(self, lists) -> None:
        self.lists, self.listed, self.closed = lists, 0, threading.Event()

    def list(self, resource, chunk_size: int, **options):
        self.listed += 1
        answer = self.lists(self.listed)
        if isinstance(answer, Exception):
            raise answer
        return Listing(answer, str(self.listed))

    def watch(self, resource, server_timeout: int, resource_version, **options):
        def quiet():
            while not self.closed.wait(0.02):
                pass
            raise ConnectionError("closed")
            yield  # a generator

        return quiet()

    def close(self) -> None:
        self.closed.set()


def tenant(name: str) -> dict:
    return {"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": name, "namespace": "tenant-root", "resourceVersion": "1"}, "spec": {}}


def start(clients: dict, **options) -> Cache:
    order = iter([clients["Namespace"], clients["Tenant"]])
    cache = Cache(lambda: next(order), LiveIndex(), threading.Lock(), Metrics(), watched=(NAMESPACES, TENANTS),
                  **options)
    cache.start()
    return cache


def wait(what, probe, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_kind_not_served_stays_synced_and_empty_however_often_it_is_asked_again():
    clients = {"Namespace": Client(lambda n: []), "Tenant": Client(lambda n: ApiError(404, "not found"))}
    cache = start(clients, stale_after=0.2, not_served_retry=0.05)
    try:
        wait("ready", cache.ready)
        wait("asked again several times", lambda: clients["Tenant"].listed >= 6)
        time.sleep(0.3)  # longer than stale_after since the first 404
        assert cache.ready(), cache.not_ready_reason()
        assert cache.size()["Tenant"] == 0
    finally:
        cache.stop()


def test_a_kind_that_was_served_and_then_answers_404_fails_closed():
    """Its objects may still be in the cluster: the cache turns stale (not ready, saying
    why) instead of emptying the kind."""
    def tenants(n: int):
        return [tenant("a")] if n == 1 else ApiError(404, "not found")

    clients = {"Namespace": Client(lambda n: []), "Tenant": Client(tenants)}
    cache = start(clients, stale_after=0.2, not_served_retry=0.05)
    try:
        wait("ready", cache.ready)
        assert cache.size()["Tenant"] == 1
        clients["Tenant"].close()  # the quiet watch ends: the kind relists, and the API server answers 404
        wait("two lists answered 404", lambda: clients["Tenant"].listed >= 3)
        assert not cache.ready()
        assert "has failed for more than 0.2 s" in cache.not_ready_reason() and "404" in cache.not_ready_reason()
        assert cache.size()["Tenant"] == 1  # kept, not emptied
    finally:
        cache.stop()


def test_resuming_from_versions_names_every_kind_or_none():
    cache = Cache(lambda: None, LiveIndex(), threading.Lock(), Metrics(), watched=(NAMESPACES, TENANTS))
    with pytest.raises(ValueError, match="every watched kind"):
        cache.start(versions={"Tenant": "5"})
