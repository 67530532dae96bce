"""Lag never over-admits (issue 34 item 5), the cache's half: the webhook's
watches ask for bookmarks and hear each clean close at the server timeout,
either a proof of progress; a kind without one for more than the stated
bound makes the cache not ready (decisions are refused saying so) and the
time since each kind's last proof is exported. Against a real
kube-apiserver: the proofs arrive, and when it is paused (SIGSTOP) the
cache turns unready, then ready again once it resumes."""

from __future__ import annotations

import os
import signal
import threading
import time

from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import WATCHED, make_client
from cozyrender.webhook.cache import LAG_BOUND, Cache
from cozyrender.webhook.metrics import Metrics

NAMESPACES = tuple(w for w in WATCHED if w.kind == "Namespace")


class Ticks:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_a_kind_without_progress_past_the_bound_is_not_ready_and_says_so() -> None:
    ticks, metrics = Ticks(), Metrics()
    cache = Cache(lambda: None, LiveIndex(), threading.Lock(), metrics, watched=NAMESPACES, clock=ticks)
    cache._synced["Namespace"] = True
    assert cache.ready() and cache.lagging() == {}  # no bookmark yet: not measured
    cache.progressed("Namespace")
    ticks.now += LAG_BOUND
    assert cache.ready()
    ticks.now += 1
    assert not cache.ready() and cache.lagging() == {"Namespace": LAG_BOUND + 1}
    assert cache.not_ready_reason() == (f"the watch of Namespace has shown no progress for {LAG_BOUND + 1:.0f} s "
                                        f"(more than the {LAG_BOUND:g} s bound: the view may be that far behind "
                                        "the cluster)")
    cache.progressed("Namespace")
    assert cache.ready() and cache.not_ready_reason() == ""


def test_the_time_since_the_last_proof_is_exported() -> None:
    ticks, metrics = Ticks(), Metrics()
    cache = Cache(lambda: None, LiveIndex(), threading.Lock(), metrics, watched=NAMESPACES, clock=ticks)
    cache.metrics.watch_progress_age.labels("Namespace").set_function(lambda: cache._age("Namespace"))
    cache.progressed("Namespace")
    ticks.now += 7
    value = metrics.registry.get_sample_value("cozyrender_webhook_watch_progress_age_seconds", {"kind": "Namespace"})
    assert value == 7


def test_proofs_of_progress_arrive_from_the_api_server_and_a_paused_one_turns_the_cache_unready(tmp_path_factory) -> None:
    from conftest import _control_plane

    plane = _control_plane(tmp_path_factory, 0)  # its own (issue 36): this test pauses kube-apiserver
    try:
        metrics = Metrics()
        # A 3 s watch: closed by the API server (a proof of progress) every 3 s.
        cache = Cache(lambda: make_client(str(plane.kubeconfig), timeout=2.0), LiveIndex(), threading.Lock(),
                      metrics, server_timeout=3, read_margin=30, watched=NAMESPACES, lag_bound=4)
        started = time.time()
        cache.start()
        try:
            deadline = time.monotonic() + 30
            while "Namespace" not in cache._progress and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "Namespace" in cache._progress, "no proof of progress arrived"
            assert cache.ready(), cache.not_ready_reason()
            # The ledger's `known_since`: when the list the view comes from was asked for.
            assert started <= cache.known_since("Namespace") <= time.time()
            assert cache.known_since("Tenant") is None  # not watched here: nothing is known of it
            pid = plane.pids["kube-apiserver"]
            os.kill(pid, signal.SIGSTOP)
            try:
                deadline = time.monotonic() + 30
                while cache.ready() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not cache.ready()
                assert "Namespace has shown no progress for" in cache.not_ready_reason()
                age = metrics.registry.get_sample_value("cozyrender_webhook_watch_progress_age_seconds",
                                                        {"kind": "Namespace"})
                assert age > 4
            finally:
                os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + 60
            while not cache.ready() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert cache.ready(), cache.not_ready_reason()
        finally:
            cache.stop()
    finally:
        plane.stop()
