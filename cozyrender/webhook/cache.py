"""The webhook's view of the cluster: list+watch of every kind `cozyrender
check` reads (`cozyrender.kube.client.WATCHED`), fed one event at a time into
a LiveIndex.

Rules:
- not ready until the first list of every kind has synced (a kind the
  cluster does not serve counts as synced and empty, and is listed again
  later);
- a watch resumes from the last resourceVersion it saw; 410 Gone (the
  version was compacted away) relists the kind and replaces its objects by
  difference, so the index changes only where the cluster did;
- watches carry a server timeout (`timeoutSeconds`) and a client read
  timeout a little longer, so a watch that went silent is noticed; a watch
  that fails (silent, cut, refused) relists its kind, and while a kind's
  watches and relists keep failing for more than 30 s the cache counts as
  stale: not ready, and decisions are refused until a list succeeds;
- every index change happens under `lock`, the lock decisions read under;
- an object the rules cannot read is kept out of the index and listed in
  `unreadable` (decisions are refused while there are any: fail closed);
- watch lag is measured (the object's last write in managedFields to the
  event here), and each apps object's uid and generation are remembered so
  the ledger knows which reservations the watch has caught up with.

lightkube drives the HTTP: its watch would silently restart from "now" on
410 (losing events) and has no read timeout, so both are handled here.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable

from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import WATCHED, Watched, list_kind, list_scope, plain, resource
from cozyrender.kube.shape import ShapeError

from .metrics import Metrics

log = logging.getLogger("cozyrender.webhook.cache")

SERVER_TIMEOUT = 240  # seconds the API server keeps a watch open before closing it cleanly
READ_MARGIN = 30  # more seconds of silence after that before the client gives up on it
RETRY = (0.5, 1, 2, 5, 10)  # back-off after errors
STALE_AFTER = 30.0  # seconds of failing watches and relists before the cache counts as stale (not ready)
SEEN_KEEP = 600.0  # seconds a deleted object's uid is remembered
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def compact(obj: dict) -> dict:
    """`obj` without what no rule reads and only costs memory: managedFields
    and kubectl's last-applied annotation."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and ("managedFields" in meta or LAST_APPLIED in (meta.get("annotations") or {})):
        meta = dict(meta)
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        obj = dict(obj, metadata=meta)
    return obj


def last_write(obj: dict) -> float | None:
    """The latest time in the object's managedFields (epoch seconds), or None."""
    meta = obj.get("metadata") or {}
    latest = None
    for entry in meta.get("managedFields") or ():
        stamp = entry.get("time") if isinstance(entry, dict) else None
        if isinstance(stamp, str):
            try:
                moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            latest = moment if latest is None or moment > latest else latest
    return latest


def _key(watched: Watched, obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace"), meta.get("name"))


class Cache:
    """List+watch of WATCHED into `index`, under `lock`."""

    def __init__(self, make_client: Callable[[], object], index: LiveIndex, lock: threading.Lock,
                 metrics: Metrics, server_timeout: int = SERVER_TIMEOUT, read_margin: int = READ_MARGIN,
                 watched: tuple[Watched, ...] = WATCHED, stale_after: float = STALE_AFTER) -> None:
        self.make_client = make_client
        self.index = index
        self.lock = lock
        self.metrics = metrics
        self.server_timeout = server_timeout
        self.read_margin = read_margin
        self.watched = watched
        self.stale_after = stale_after
        self._failing_since: dict[str, float] = {}  # kind -> when its watch started failing
        self._objects: dict[str, dict[tuple, dict]] = {w.kind: {} for w in watched}
        self._synced: dict[str, bool] = {w.kind: False for w in watched}
        self._problem: dict[str, str] = {}
        self.unreadable: dict[tuple, str] = {}
        self._seen: dict[str, tuple[int, float]] = {}  # uid -> (generation, when first seen at it)
        self._deleted: dict[str, float] = {}  # uid -> when deleted
        self._versions: dict[str, str] = {}  # kind -> the last resourceVersion seen
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: list = []

    # ----------------------------------------------------------------- public

    def start(self) -> None:
        for watched in self.watched:
            thread = threading.Thread(target=self._run, args=(watched,), name=f"watch-{watched.plural}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for client in list(self._clients):
            try:
                client.close()
            except Exception:
                pass

    def ready(self) -> bool:
        """Every first list synced, and no kind whose watch has been failing
        (and relisting failing) for more than `stale_after` seconds."""
        return all(self._synced.values()) and not self._stale()

    def _stale(self) -> list[str]:
        now = time.monotonic()
        return [kind for kind, since in self._failing_since.items() if now - since > self.stale_after]

    def not_ready_reason(self) -> str:
        waiting = [kind for kind, synced in self._synced.items() if not synced]
        stale = self._stale()
        if stale and not waiting:
            problems = "; ".join(f"{kind}: {self._problem.get(kind, 'failing')}" for kind in stale)
            return (f"the watch of {', '.join(stale)} has failed for more than {self.stale_after:g} s, so the "
                    f"cache may be stale ({problems})")
        if not waiting:
            return ""
        problems = "; ".join(f"{kind}: {self._problem[kind]}" for kind in waiting if kind in self._problem)
        return f"the first list of {', '.join(waiting)} has not synced" + (f" ({problems})" if problems else "")

    def seen(self, uid: str, generation: int) -> bool:
        """Whether this replica's watch has seen object `uid` at `generation`
        or later (or seen it deleted)."""
        if uid in self._deleted:
            return True
        known = self._seen.get(uid)
        return known is not None and known[0] >= generation

    def seen_at(self, uid: str) -> float | None:
        known = self._seen.get(uid)
        return known[1] if known else None

    def size(self) -> dict[str, int]:
        return {kind: len(objects) for kind, objects in self._objects.items()}

    # ----------------------------------------------------------------- events

    def apply(self, watched: Watched, event: str, obj: dict) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) into the index."""
        obj.setdefault("apiVersion", watched.api_version)
        obj.setdefault("kind", watched.kind)
        if event in ("ADDED", "MODIFIED"):
            written = last_write(obj)
            if written is not None:
                self.metrics.watch_lag.labels(watched.kind).observe(max(0.0, time.time() - written))
        if not watched.keeps(obj):
            return
        key = _key(watched, obj)
        objects = self._objects[watched.kind]
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        with self.lock:
            if event == "DELETED":
                if objects.pop(key, None) is not None:
                    self.index.remove(obj)
                self.unreadable.pop((watched.kind, *key), None)
                if isinstance(uid, str):
                    self._deleted[uid] = time.time()
                    self._seen.pop(uid, None)
            else:
                self._put(watched, key, compact(obj))
                if isinstance(uid, str) and watched.group == "apps.cozystack.io":
                    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
                    known = self._seen.get(uid)
                    if known is None or known[0] < generation:
                        self._seen[uid] = (generation, time.time())
        self.metrics.cache_objects.labels(watched.kind).set(len(objects))
        self.metrics.unreadable.set(len(self.unreadable))

    def _put(self, watched: Watched, key: tuple, obj: dict) -> None:
        objects = self._objects[watched.kind]
        try:
            self.index.upsert(obj)
        except ShapeError as err:
            # Unreadable: out of the index (its old copy too), refused loudly until fixed.
            self.unreadable[(watched.kind, *key)] = str(err)
            if objects.pop(key, None) is not None:
                self.index.remove(obj)
            return
        self.unreadable.pop((watched.kind, *key), None)
        objects[key] = obj

    def replace_all(self, watched: Watched, listed: list[dict]) -> None:
        """A (re)list: change the index only where the listed objects differ."""
        fresh = {}
        for obj in listed:
            obj.setdefault("apiVersion", watched.api_version)
            obj.setdefault("kind", watched.kind)
            fresh[_key(watched, obj)] = compact(obj)
        objects = self._objects[watched.kind]
        with self.lock:
            for key in [key for key in objects if key not in fresh]:
                self.index.remove(objects.pop(key))
            for key in [k for k in self.unreadable if k[0] == watched.kind and k[1:] not in fresh]:
                del self.unreadable[key]
            for key, obj in fresh.items():
                old = objects.get(key)
                if old is not None and _version(old) == _version(obj) and _version(obj):
                    continue
                self._put(watched, key, obj)
                meta = obj.get("metadata") or {}
                uid = meta.get("uid")
                if isinstance(uid, str) and watched.group == "apps.cozystack.io":
                    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
                    known = self._seen.get(uid)
                    if known is None or known[0] < generation:
                        self._seen[uid] = (generation, time.time())
            now = time.time()
            for uid in [uid for uid, when in self._deleted.items() if now - when > SEEN_KEEP]:
                del self._deleted[uid]
        self.metrics.cache_objects.labels(watched.kind).set(len(objects))
        self.metrics.unreadable.set(len(self.unreadable))

    # ----------------------------------------------------------------- the loop

    def _client(self):
        client = self.make_client()
        # lightkube's watch has no read timeout: a silent watch would hang forever.
        timeout = getattr(getattr(client, "_client", None), "_watch_timeout", None)
        if timeout is not None:
            import httpx2

            client._client._watch_timeout = httpx2.Timeout(10.0, read=self.server_timeout + self.read_margin)
        self._clients.append(client)
        return client

    def _run(self, watched: Watched) -> None:
        from lightkube.core.exceptions import ApiError

        client = self._client()
        failures = 0
        version = self._versions.get(watched.kind, "")  # empty: list first
        while not self._stop.is_set():
            try:
                if not version:
                    listed, version = list_kind(client, watched)
                    self.replace_all(watched, listed)
                    self._synced[watched.kind] = True
                    self._problem.pop(watched.kind, None)
                    self._failing_since.pop(watched.kind, None)
                    self._versions[watched.kind] = version
                    self.metrics.ready.set(1 if self.ready() else 0)
                self._watch(client, watched, version)
                version = self._versions[watched.kind]
                failures = 0
            except ApiError as err:
                code = err.status.code if err.status is not None else None
                if code == 410:
                    self.metrics.watch_restarts.labels(watched.kind, "gone").inc()
                    version = ""  # relist
                    continue
                if code == 404 and not self._synced[watched.kind]:
                    # Not served here: synced as empty, asked again later.
                    self._synced[watched.kind] = True
                    self._problem[watched.kind] = "not served by the API server"
                    self.metrics.ready.set(1 if self.ready() else 0)
                    self._stop.wait(30)
                    version = ""
                    continue
                failures += 1
                self._failing_since.setdefault(watched.kind, time.monotonic())
                self._problem[watched.kind] = f"{code}: {err.status.message if err.status else err}"
                self.metrics.watch_restarts.labels(watched.kind, "error").inc()
                version = ""
            except Exception as err:  # transport errors, read timeouts: restart from where it was
                if self._stop.is_set():
                    return
                failures += 1
                reason = "timeout" if "Timeout" in type(err).__name__ else "error"
                self._problem[watched.kind] = f"{type(err).__name__}: {err}"
                self.metrics.watch_restarts.labels(watched.kind, reason).inc()
                # Relist rather than resume: only a list proves the cache current again.
                version = ""
                self._failing_since.setdefault(watched.kind, time.monotonic())
                log.warning("watch of %s: %s: %s", watched.plural, type(err).__name__, err)
            self._stop.wait(RETRY[min(failures, len(RETRY)) - 1] if failures else 0)

    def _watch(self, client, watched: Watched, version: str) -> None:
        """Watch from `version`, remembering the last version seen in
        `_versions` (lightkube re-opens a watch the server closed cleanly;
        errors and read timeouts raise)."""
        events = client.watch(resource(watched), server_timeout=self.server_timeout, resource_version=version,
                              **list_scope(watched))
        for event, obj in events:
            if self._stop.is_set():
                break
            data = plain(obj)
            seen = (data.get("metadata") or {}).get("resourceVersion")
            if event in ("ADDED", "MODIFIED", "DELETED"):
                self.apply(watched, event, data)
            if seen:
                self._versions[watched.kind] = seen


def _version(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion") or ""
