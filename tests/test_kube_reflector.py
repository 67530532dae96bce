"""`kube.watch.Reflector`, the one list+watch loop (the webhook's cache, the
controllers, the Flux loop), against a scripted client: what it lists, when
it relists, how long it waits, and what its hooks hear. The live tests run
it against a real API server (tests/test_webhook_live.py: 410 Gone and an
API server that goes away; the controllers' and Flux's live tests)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cozyrender.kube.client import Watched
from cozyrender.kube.watch import (
    GONE, HEALTHY, MISSING, NOT_SERVED_RETRY, RETRY, TIMEOUT, Failure, Informer, Reflector,
)

KIND = Watched("", "v1", "ConfigMap", "configmaps", True)


class ApiError(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.status = SimpleNamespace(code=code, message=message)


class ReadTimeout(Exception):
    pass


def obj(name: str, version: str) -> dict:
    return {"metadata": {"name": name, "namespace": "n", "resourceVersion": version}}


class Listing:
    """A chunked list: yields its items one at a time, noting each in `log`."""

    def __init__(self, items: list[dict], version: str, log: list) -> None:
        self.items, self.resourceVersion, self.log = items, version, log

    def __iter__(self):
        for item in self.items:
            self.log.append(("listed", item["metadata"]["name"]))
            yield item


class Script:
    """A client whose lists and watches follow `steps`: ("list", items, version),
    ("list", an exception), ("watch", [(event, obj), ...]) or ("watch", an exception); the reflector
    is stopped when the script runs out."""

    def __init__(self, steps: list, log: list) -> None:
        self.steps, self.log, self.reflector = list(steps), log, None

    def _next(self, kind: str):
        if not self.steps:
            self.reflector.stop()
            raise ReadTimeout("the script is over")
        step = self.steps.pop(0)
        assert step[0] == kind, (step, kind)
        return step

    def list(self, resource, chunk_size: int, **options):
        self.log.append(("list", options.get("namespace")))
        step = self._next("list")
        if isinstance(step[1], Exception):
            raise step[1]
        _, items, version = step
        return Listing(items, version, self.log)

    def watch(self, resource, server_timeout: int, resource_version: str | None, **options):
        self.log.append(("watch", resource_version))
        _, events = self._next("watch")
        if isinstance(events, Exception):
            raise events
        return iter(events)

    def close(self) -> None:
        pass


class Stopping:
    """The reflector's stop event, recording each wait instead of sleeping."""

    def __init__(self, log: list) -> None:
        self.log, self.stopped = log, False

    def is_set(self) -> bool:
        return self.stopped

    def set(self) -> None:
        self.stopped = True

    def wait(self, seconds: float) -> bool:
        self.log.append(("wait", seconds))
        return self.stopped


class Sink:
    def __init__(self, log: list) -> None:
        self.log = log

    def replace(self, listed) -> None:
        self.log.append(("replace",))
        for item in listed:
            self.log.append(("stored", item["metadata"]["name"]))

    def apply(self, event: str, item: dict) -> None:
        self.log.append((event, item["metadata"]["name"]))


def run(steps: list, clock=None, **hooks) -> tuple[list, Reflector]:
    log: list = []
    client = Script(steps, log)
    reflector = Reflector(lambda: client, KIND, Sink(log), **hooks)
    client.reflector = reflector
    reflector.stopping = Stopping(log)
    if clock is not None:
        reflector.clock = clock
    reflector._run()
    return log, reflector


def test_a_list_is_streamed_into_the_sink_then_watched_from_its_version():
    hooks: list[str] = []
    log, _ = run([("list", [obj("a", "5"), obj("b", "6")], "7"),
                          ("watch", [("ADDED", obj("c", "8")), ("BOOKMARK", obj("", "9"))])],
                         on_listed=lambda: hooks.append("listed"), before_watch=lambda: hooks.append("watch"))
    # each item reaches the sink before the next is read: the list is never held whole
    assert log[:7] == [("list", "*"), ("replace",), ("listed", "a"), ("stored", "a"), ("listed", "b"),
                       ("stored", "b"), ("watch", "7")]
    assert ("ADDED", "c") in log and ("BOOKMARK", "") not in log
    assert log[log.index(("ADDED", "c")) + 1] == ("watch", "9")  # resumed from the last version seen
    assert hooks[:3] == ["listed", "watch", "watch"]  # listed once, then each watch


def test_410_gone_relists_at_once_and_errors_back_off_until_a_watch_succeeds():
    failures: list[Failure] = []
    log, _ = run([
        ("list", [], "1"), ("watch", ApiError(410, "too old")),   # gone: relist, no wait
        ("list", [], "2"), ("watch", ApiError(500, "boom")),      # error: wait RETRY[0]
        ("list", [], "3"), ("watch", ReadTimeout("silent")),      # timeout: wait RETRY[1]
        ("list", [], "4"), ("watch", []),                         # a watch ends well: the count resets
        ("watch", ApiError(503, "busy")),                         # resumed from "4", then RETRY[0] again
        ("list", [], "5"),
    ], on_failure=lambda failure: failures.append(failure))
    assert [f.reason for f in failures][:4] == [GONE, "error", TIMEOUT, "error"]
    assert failures[1] == Failure("error", 500, "500: boom")
    waits = [entry[1] for entry in log if entry[0] == "wait"]
    assert waits[:3] == [RETRY[0], RETRY[1], RETRY[0]]
    lists = [entry for entry in log if entry[0] == "list"]
    assert len(lists) == 5  # every failure relists: only a list proves the sink current
    assert ("watch", "4") in log and log.count(("watch", "4")) == 2


def test_a_failure_hook_may_take_a_failure_over_and_say_when_to_list_again():
    def not_served(failure: Failure) -> float | None:
        return 30.0 if failure.reason == MISSING else None

    log, _ = run([("list", [], "1"), ("watch", ApiError(404, "not found")), ("list", [], "2"),
                  ("watch", ApiError(500, "boom"))], on_failure=not_served)
    waits = [entry[1] for entry in log if entry[0] == "wait"]
    assert waits[:2] == [30.0, RETRY[0]]  # the 404 it took over did not count towards the back-off


@pytest.mark.parametrize("version", ["", "42"])
def test_a_given_version_is_watched_without_listing_first(version):
    log, _ = run([("watch", [])] if version else [("list", [], "1"), ("watch", [])], version=version)
    assert log[0] == (("watch", "42") if version else ("list", "*"))


def test_a_410_again_right_after_a_relist_backs_off():
    """The first 410 relists at once; a list slower than the compaction would meet 410s
    without end, so the next ones in a row back off."""
    log, _ = run([("list", [], "1"), ("watch", ApiError(410)), ("list", [], "2"), ("watch", ApiError(410)),
                  ("list", [], "3"), ("watch", ApiError(410)), ("list", [], "4")])
    assert [entry[1] for entry in log if entry[0] == "wait"][:2] == [RETRY[0], RETRY[1]]
    assert log.index(("list", "*")) == 0 and log[3] == ("list", "*")  # no wait before the first relist


def test_a_watch_that_stayed_up_starts_the_back_off_afresh():
    """lightkube's watch re-opens itself and returns only on stop, so the count of failures in
    a row resets when a watch had been up for HEALTHY seconds before it failed."""
    now = [0.0]

    def clock() -> float:
        now[0] += HEALTHY  # each reading HEALTHY later: every watch was up that long when it failed
        return now[0]

    steps = []
    for version in range(6):
        steps += [("list", [], str(version)), ("watch", ApiError(500, "boom"))]
    log, _ = run(steps, clock=clock)
    assert [entry[1] for entry in log if entry[0] == "wait"][:5] == [RETRY[0]] * 5
    log, _ = run(steps)  # watches failing at once: the back-off grows
    assert [entry[1] for entry in log if entry[0] == "wait"][:5] == list(RETRY[:5])


@pytest.mark.parametrize("optional", [True, False])
def test_an_optional_kind_not_served_is_synced_and_empty_until_it_is_served(optional):
    """A 404 before the first list: an optional kind (the status controller's DRA kinds on a
    cluster without resource.k8s.io/v1) is synced with nothing in it, and asked again after
    NOT_SERVED_RETRY; any other kind stays unsynced and backs off. A 404 after a list is a failure
    like any other, for both."""
    log: list = []
    heard: list = []
    client = Script([("list", ApiError(404, "not found")), ("list", [obj("a", "5")], "5"),
                     ("watch", ApiError(404, "gone away")), ("list", [], "6")], log)
    informer = Informer(lambda: client, KIND, lambda event, new, old: heard.append((event, informer.synced.is_set())),
                        optional=optional)
    client.reflector = informer.reflector

    class Watching(Stopping):
        def wait(self, seconds: float) -> bool:
            self.log.append(("synced", informer.synced.is_set()))
            return super().wait(seconds)

    informer.reflector.stopping = Watching(log)
    informer.reflector._run()
    waits = [entry[1] for entry in log if entry[0] == "wait"]
    assert waits[:2] == ([NOT_SERVED_RETRY, RETRY[0]] if optional else [RETRY[0], RETRY[1]])
    assert log[log.index(("wait", waits[0])) - 1] == ("synced", optional)  # synced (and empty) before it was served
    # the list (an optional kind already synced by the 404), then the relist after the second 404
    assert heard == [("ADDED", optional), ("DELETED", True)]


def test_stopping_wakes_a_blocked_read_without_releasing_its_descriptor():
    """`Reflector.stop` runs on another thread than the watch's read: it shuts the client's
    sockets down (the read returns at once) and leaves closing them to the reading thread. A
    descriptor released under a blocked read could be given to a socket opened meanwhile, whose
    bytes the reader would then take."""
    import socket
    import threading
    import time

    from cozyrender.kube.watch import _interrupt

    reading, peer = socket.socketpair()
    client = SimpleNamespace(_client=SimpleNamespace(_transport=SimpleNamespace(pool=[SimpleNamespace(_sock=reading)])))
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(reading.recv(10)))
    reader.start()
    time.sleep(0.2)  # the reader is blocked in recv
    _interrupt(client)
    reader.join(30)
    assert not reader.is_alive() and got == [b""]  # woken with end-of-stream
    assert reading.fileno() != -1  # still the reader's to close
    reading.close()
    peer.close()


def test_stopping_a_client_without_sockets_closes_it():
    from cozyrender.kube.watch import _interrupt

    closed = []
    _interrupt(SimpleNamespace(close=lambda: closed.append(True)))
    assert closed == [True]
