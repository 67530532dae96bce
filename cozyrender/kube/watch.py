"""List+watch one kind, as client-go's reflector and informer do: the one
watch loop of cozyrender's controllers, the Flux loop and the webhook's cache.

Rules:
- `Reflector` is the loop: a list (in chunks, streamed to its sink as it
  arrives, never held whole), then a watch from the list's resourceVersion,
  resumed from the last version seen when the API server closes it cleanly;
  410 Gone (the version was compacted away) relists at once (a 410 again
  right after backs off), a watch error, a read timeout or a cut connection
  relist after a back-off that grows with failures in a row (a watch that
  stayed up for 30 s starts it afresh). Only a list proves the sink current
  again, so every failure relists;
- a watch carries a server timeout and a client read timeout a little
  longer, so a watch that went silent is noticed; with `bookmarks`, it asks
  for watch bookmarks (`allowWatchBookmarks`: the API server sends one
  when its watch cache has moved past the last version sent, before the
  server timeout and about every minute) and hears each clean close at the
  server timeout (the watch resumes from the last version, receiving at
  once what the API server holds after it): either is a proof of progress
  (`on_progress`);
- the sink hears the list (`replace`, an iterable of plain objects) and each
  event (`apply`); hooks hear each list done and each failure (a failure
  hook may take a failure over, such as a kind the server does not serve,
  and say when to list again);
- `Informer` is a Reflector whose sink is a local store (key -> transformed
  object): a relist replaces the store *by difference*, so handlers hear
  ADDED/MODIFIED/DELETED only where the cluster changed; `transform` shrinks
  each object before it is stored (or returns None to keep it out); an
  `optional` kind the API server does not serve (404 before its first
  list) counts as synced and empty, and is asked again every
  `NOT_SERVED_RETRY` seconds (a cluster without DRA, say);
- handlers run on the watch's thread, outside any lock of ours: they are
  expected to be short (record what changed and let a work queue act).

`CoalescingQueue` is the other half: keys added while a worker is busy are
collected into one batch (a set), so a burst of events on one object is one
reconcile.

lightkube drives the HTTP (its own watch restarts from "now" on 410, losing
events, and has no read timeout, so both are handled here).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import types
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from cozyrender.kube.client import Watched, list_scope, plain, resource

log = logging.getLogger("cozyrender.kube.watch")

SERVER_TIMEOUT = 240  # seconds the API server keeps a watch open before closing it cleanly
READ_MARGIN = 30  # more seconds of silence after that before the client gives up on it
RETRY = (0.5, 1, 2, 5, 10)  # back-off after consecutive failures
HEALTHY = 30.0  # seconds a watch stays up before a failure of it counts as the first again
GONE, MISSING, TIMEOUT, ERROR = "gone", "missing", "timeout", "error"  # what a failure was
CLOSED = "CLOSED"  # the API server closed a watch at its timeout (with `bookmarks`)
NOT_SERVED_RETRY = 30.0  # seconds before an optional kind the API server does not serve is asked again

Handler = Callable[[str, "dict | None", "dict | None"], None]  # (event, new, old)


def key_of(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def status_resource(watched: Watched):
    """The lightkube resource class of `watched`'s status subresource."""
    from lightkube.core import resource as res
    from lightkube.generic_resource import GenericGlobalStatus, GenericNamespacedStatus

    main = resource(watched)
    base = GenericNamespacedStatus if watched.namespaced else GenericGlobalStatus
    info = res.ApiInfo(resource=main._api_info.resource, parent=main._api_info.resource,
                       plural=watched.plural, verbs=["get", "patch", "put"], action="status")
    return type(f"{watched.kind}Status", (base,), {"_api_info": info})


@dataclass
class Selection:
    """Which objects of a kind are listed and watched: a namespace (None:
    all, or the kind is cluster-scoped) and label and field selectors in
    lightkube's form."""

    namespace: str | None = None
    labels: dict | None = None
    fields: dict | None = None

    def options(self, watched: Watched) -> dict:
        options: dict = {}
        if watched.namespaced:
            options["namespace"] = self.namespace or "*"
        if self.labels:
            options["labels"] = self.labels
        if self.fields:
            options["fields"] = self.fields
        return options


def list_scope_selection(watched: Watched) -> Selection:
    """The selection `kube.client.list_scope` gives a kind the budget rules read."""
    scope = list_scope(watched)
    namespace = scope.get("namespace")
    return Selection(namespace=None if namespace in (None, "*") else namespace, fields=scope.get("fields"))


class Sink(Protocol):
    """Where a Reflector delivers: a (re)list, streamed, and each watch event."""

    def replace(self, listed: Iterable[dict]) -> None: ...

    def apply(self, event: str, obj: dict) -> None: ...


@dataclass(frozen=True)
class Failure:
    """A list or watch that failed: what it was (GONE, MISSING: 404, TIMEOUT,
    ERROR), the HTTP code when the API server answered, and why in words."""

    reason: str
    code: int | None
    problem: str


def _failure(err: Exception) -> Failure:
    status = getattr(err, "status", None)
    code = getattr(status, "code", None)
    if code is not None:
        reason = GONE if code == 410 else MISSING if code == 404 else ERROR
        return Failure(reason, code, f"{code}: {getattr(status, 'message', None) or err}")
    reason = TIMEOUT if "Timeout" in type(err).__name__ else ERROR
    return Failure(reason, None, f"{type(err).__name__}: {err}")


class Reflector:
    """The list+watch loop of one kind into `sink`, on a thread of its own.

    Hooks (each on the loop's thread): `on_listed()` after each list;
    `on_failure(failure)` after each failure, returning None, or the seconds
    to wait before listing again when it took the failure over (then it is
    not counted towards the back-off); `before_watch()` before each watch,
    which may block (the webhook's cache waits there until every kind's
    first list is indexed). `version`: a resourceVersion to watch from
    without listing first."""

    def __init__(self, make_client: Callable[[], object], watched: Watched, sink: Sink,
                 selection: Selection | None = None, server_timeout: int = SERVER_TIMEOUT,
                 read_margin: int = READ_MARGIN, on_listed: Callable[[], None] | None = None,
                 on_failure: Callable[[Failure], float | None] | None = None,
                 before_watch: Callable[[], None] | None = None, version: str = "", bookmarks: bool = False,
                 on_progress: Callable[[], None] | None = None) -> None:
        self.make_client = make_client
        self.bookmarks, self.on_progress = bookmarks, on_progress
        self.watched = watched
        self.sink = sink
        self.selection = selection or Selection()
        self.server_timeout = server_timeout
        self.read_margin = read_margin
        self.on_listed = on_listed
        self.on_failure = on_failure
        self.before_watch = before_watch
        self.version = version  # the last resourceVersion seen ("": list first)
        self.stopping = threading.Event()
        self.clock = time.monotonic
        self._thread: threading.Thread | None = None
        self._client = None

    def start(self) -> Reflector:
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.watched.plural}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop: its read is woken at once (`_interrupt`) and the loop's thread closes
        its client as it ends. Never closed from here, nor waited for: a stopping process
        releases its Lease next."""
        self.stopping.set()
        client = self._client
        if client is not None:
            _interrupt(client)

    def _new_client(self):
        client = self.make_client()
        inner = getattr(client, "_client", None)
        if getattr(inner, "_watch_timeout", None) is not None:
            import httpx2

            inner._watch_timeout = httpx2.Timeout(10.0, read=self.server_timeout + self.read_margin)
        self._client = client
        return client

    def _list(self, client) -> None:
        listing = client.list(resource(self.watched), chunk_size=500, **self.selection.options(self.watched))
        self.sink.replace(_plain(listing))
        try:
            self.version = listing.resourceVersion
        except Exception:  # noqa: BLE001 - an empty list that never started iterating
            self.version = ""

    def _events(self, client):
        """The watch's events; with `bookmarks` (and lightkube's client, whose
        `watch` can neither ask for bookmarks nor tell when the API server
        closed a watch at its timeout), bookmarks among them and a CLOSED
        event at each clean close (the watch resumes from the last version)."""
        options = self.selection.options(self.watched)
        inner = getattr(client, "_client", None)
        if not (self.bookmarks and hasattr(inner, "prepare_request")):
            return client.watch(resource(self.watched), server_timeout=self.server_timeout,
                                resource_version=self.version or None, **options)
        from lightkube.core.generic_client import WatchDriver
        from lightkube.core.selector import build_selector

        request = inner.prepare_request("list", res=resource(self.watched), namespace=options.get("namespace"),
                                        watch=True, params={
            "timeoutSeconds": self.server_timeout, "resourceVersion": self.version or None,
            "labelSelector": build_selector(options["labels"]) if options.get("labels") else None,
            "fieldSelector": build_selector(options["fields"], for_fields=True) if options.get("fields") else None,
            "allowWatchBookmarks": "true"})
        return _resumed(inner, WatchDriver(request, inner._client.build_request), self.stopping)

    def _watch(self, client) -> None:
        for event, obj in self._events(client):
            if self.stopping.is_set():
                return
            if obj is not None:
                data = plain(obj)
                version = (data.get("metadata") or {}).get("resourceVersion")
                if event in ("ADDED", "MODIFIED", "DELETED"):
                    self.sink.apply(event, data)
                if version:
                    self.version = version
            if event in ("BOOKMARK", CLOSED) and self.on_progress is not None:
                self.on_progress()

    def _run(self) -> None:
        client = self._new_client()
        try:
            self._loop(client)
        finally:
            _close(client)  # on the thread that reads it: see `_interrupt`

    def _loop(self, client) -> None:
        failures = 0  # in a row: a watch that stayed up for HEALTHY seconds starts the count afresh
        gone = 0  # 410s in a row: the first relists at once, the next ones back off
        while not self.stopping.is_set():
            wait = 0.0
            watching = None
            try:
                if not self.version:
                    self._list(client)
                    if self.on_listed is not None:
                        self.on_listed()
                if self.before_watch is not None:
                    self.before_watch()
                if self.stopping.is_set():
                    return
                watching = self.clock()
                self._watch(client)
                failures = gone = 0
            except Exception as err:  # noqa: BLE001 - 410, 404, transport errors, timeouts: relist
                if self.stopping.is_set():
                    return
                failure = _failure(err)
                self.version = ""  # only a list proves the sink current again
                if watching is not None and self.clock() - watching >= HEALTHY:
                    failures = gone = 0
                taken = self.on_failure(failure) if self.on_failure is not None else None
                if taken is not None:
                    wait = taken
                elif failure.reason == GONE:
                    # A version compacted away: relist at once; a 410 again right after (a list
                    # slower than the compaction) backs off, as client-go's reflector does.
                    gone += 1
                    wait = RETRY[min(gone - 1, len(RETRY)) - 1] if gone > 1 else 0.0
                else:
                    failures += 1
                    wait = RETRY[min(failures, len(RETRY)) - 1]
            if wait:
                self.stopping.wait(wait)


def _resumed(inner, driver, stopping: threading.Event) -> Iterator[tuple[str, object]]:
    """lightkube's watch loop (resumed from the last version after each clean
    close), saying (CLOSED, None) at each clean close; errors raised as
    lightkube raises them."""
    while not stopping.is_set():
        response = inner.send(driver.get_request(timeout=inner._watch_timeout), stream=True)
        try:
            response.raise_for_status()
            for line in response.iter_lines():
                yield driver.process_one_line(line)
        finally:
            response.close()
        yield CLOSED, None


def _plain(listing) -> Iterator[dict]:
    for item in listing:
        yield plain(item)


class Informer:
    """One kind, listed and watched into `store` (key -> transformed object)."""

    def __init__(self, make_client: Callable[[], object], watched: Watched, handler: Handler,
                 selection: Selection | None = None, transform: Callable[[dict], dict | None] | None = None,
                 server_timeout: int = SERVER_TIMEOUT, read_margin: int = READ_MARGIN,
                 on_failure: Callable[[str], None] | None = None, optional: bool = False) -> None:
        self.on_failure = on_failure  # told each failed list or watch, in words (a metric counts them)
        self.optional = optional
        self.watched = watched
        self.handler = handler
        self.transform = transform or (lambda obj: obj)
        self.store: dict[tuple[str, str], dict] = {}
        self.synced = threading.Event()
        self.problem = ""  # why the last list or watch failed, "" while healthy
        self.relists = 0
        self.reflector = Reflector(make_client, watched, self, selection, server_timeout, read_margin,
                                   on_listed=self._listed, on_failure=self._failed)

    # -------------------------------------------------------------- lifecycle

    def start(self) -> Informer:
        self.reflector.start()
        return self

    def stop(self) -> None:
        self.reflector.stop()

    def _listed(self) -> None:
        self.relists += 1
        self.problem = ""
        self.synced.set()

    def _failed(self, failure: Failure) -> float | None:
        if self.optional and failure.reason == MISSING and not self.relists:
            self.problem = "not served by the API server"
            self.synced.set()  # nothing of a kind not served: an empty store is the truth
            return NOT_SERVED_RETRY
        self.problem = failure.problem
        if failure.reason != GONE:
            log.warning("watch of %s: %s", self.watched.plural, self.problem)
        if self.on_failure is not None:
            self.on_failure(self.problem)
        return None

    # -------------------------------------------------------------- store

    def _deliver(self, event: str, new: dict | None, old: dict | None) -> None:
        try:
            self.handler(event, new, old)
        except Exception:  # a handler bug must not kill the watch
            log.exception("handler of %s failed on %s", self.watched.plural, event)

    def apply(self, event: str, raw: dict) -> None:
        """One watch event into the store, and to the handler when it changed
        what the store holds."""
        raw.setdefault("apiVersion", self.watched.api_version)
        raw.setdefault("kind", self.watched.kind)
        key = key_of(raw)
        old = self.store.get(key)
        new = None if event == "DELETED" else self.transform(raw)
        if new is None:
            if old is not None:
                del self.store[key]
                self._deliver("DELETED", None, old)
            return
        self.store[key] = new
        if old is None:
            self._deliver("ADDED", new, None)
        elif old != new:
            self._deliver("MODIFIED", new, old)

    def replace(self, listed: Iterable[dict]) -> None:
        """A fresh list: objects gone are DELETED, the rest applied by difference."""
        seen = set()
        for raw in listed:
            seen.add(key_of(raw))
            self.apply("MODIFIED" if key_of(raw) in self.store else "ADDED", raw)
        for key in [key for key in self.store if key not in seen]:
            old = self.store.pop(key)
            self._deliver("DELETED", None, old)


def _close(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a client that failed already
        pass


def _interrupt(client) -> None:
    """Wake a thread blocked reading `client`'s watch, from another thread, without releasing
    a file descriptor: each socket the client holds is shut down (the read returns at once),
    and the reading thread closes the client itself as it ends (`Reflector._run`).

    Closing the client here instead (as the loop did before) released each socket's descriptor
    while the reading thread's TLS layer still read that descriptor number. A socket opened
    meanwhile anywhere in the process could be given the number, and the reader's next read
    took that socket's bytes: a test process that had stopped a cache saw a later TLS handshake
    of its own fail (WRONG_VERSION_NUMBER in CI, BAD_RECORD_MAC in a local run); in the
    controller, which stops a license source's informer and goes on, a Lease renewal could
    have lost its answer the same way. A client holding no socket has no descriptor to lose:
    it is closed (the test doubles end their watches so)."""
    sockets = _sockets(client)
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # not connected, or closed by its own thread meanwhile
            pass
    if not sockets:
        _close(client)


def _sockets(root, depth: int = 10) -> list[socket.socket]:
    """The sockets reachable from `root`'s attributes (lightkube's client -> httpx2's transport ->
    httpcore2's pool -> each connection's stream), found by a bounded walk so that a renamed
    internal is followed rather than relied on."""
    found: list[socket.socket] = []
    seen: set[int] = set()
    todo = [(root, 0)]
    while todo:
        obj, level = todo.pop()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        if isinstance(obj, socket.socket):
            found.append(obj)
            continue
        if isinstance(obj, (str, bytes, bytearray, int, float, bool, type(None), type, types.ModuleType,
                            types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
            continue  # never into a module's or a class's namespace: only what the client holds
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            children = list(obj)
        else:
            children = list(getattr(obj, "__dict__", {}).values())
            children += [getattr(obj, name, None) for name in getattr(type(obj), "__slots__", ()) if isinstance(name, str)]
        todo.extend((child, level + 1) for child in children)
    return found


def wait_synced(informers: Iterable[Informer], timeout: float | None = None) -> bool:
    end = None if timeout is None else time.monotonic() + timeout
    for informer in informers:
        left = None if end is None else max(0.0, end - time.monotonic())
        if not informer.synced.wait(left):
            return False
    return True


class CoalescingQueue:
    """A set of keys to work on: a key added many times before the worker
    takes the batch is worked on once."""

    def __init__(self) -> None:
        self._keys: set[Hashable] = set()
        self._cond = threading.Condition()

    def add(self, *keys: Hashable) -> None:
        if not keys:
            return
        with self._cond:
            self._keys.update(keys)
            self._cond.notify()

    def take(self, timeout: float, settle: float = 0.0) -> set:
        """Wait up to `timeout` for a key, then `settle` seconds more for the
        rest of a burst, and return the batch (empty on timeout)."""
        with self._cond:
            if not self._keys:
                self._cond.wait(timeout)
            if not self._keys:
                return set()
        if settle:
            time.sleep(settle)
        with self._cond:
            batch, self._keys = self._keys, set()
        return batch

    def __len__(self) -> int:
        return len(self._keys)
