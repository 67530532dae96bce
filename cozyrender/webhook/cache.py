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
- watches carry a server timeout (`timeoutSeconds`, WATCH_TIMEOUT) and a
  client read timeout a little longer, so a watch that went silent is
  noticed; a bookmark, or the API server closing the watch at its timeout
  (the watch resumes from the last version seen and receives at once what
  the API server holds after it), is a proof of progress
  (`kube.watch.Reflector(bookmarks=True)`). A kind without one for more
  than LAG_BOUND seconds (two watch rounds missed) counts as lagging: not ready, and decisions are refused saying so until
  it shows progress; the time since each kind's last proof is exported
  (`cozyrender_webhook_watch_progress_age_seconds`). A watch
  that fails (silent, cut, refused) relists its kind, and while a kind's
  watches and relists keep failing for more than 30 s the cache counts as
  stale: not ready, and decisions are refused until a list succeeds;
- every index change happens under `lock`, the lock decisions read under;
- an object the rules cannot read is kept out of the index and listed in
  `unreadable` (decisions are refused while there are any: fail closed);
- watch lag is measured (the object's last write in managedFields to the
  event here), and each checked object's (apps objects' and doors') uid and
  generation are remembered so the ledger knows which reservations the watch
  has caught up with; the time each kind's last list started is kept
  (`known_since`): an entry decided before it whose object the view does not
  show was never stored or was deleted (a replica started after the write,
  issue 34);
- memory (issue 26): only what the rules read is kept. A pod is kept as
  its name and its reading (`LiveIndex(compact_pods=True)`,
  `budgets.usage.compact_pod`: one shared reading per pod shape); other
  objects lose the metadata no rule reads (managedFields, annotations,
  labels but a Namespace's, owner references, ...). Pods are watched with
  the field selector `status.phase!=Succeeded,status.phase!=Failed`: the
  rules count no finished pod, and the API server sends a DELETED event
  when a pod finishes. Objects are kept once, in the index (no copy here);
- the first lists are indexed at once (`LiveIndex.extend`), not one event
  per object: each kind's list is kept (compact) until every kind has
  listed, then all are indexed together and the watches start from their
  lists' versions; a list holding an object the rules cannot read falls
  back to one object at a time, so that one is set aside and named.

The list+watch loop itself is `kube.watch.Reflector`, the one of the
controllers and the Flux loop: one per kind, delivering here (`_KindSink`);
this module keeps the index, the readiness rules and the ledger's
bookkeeping.
"""

from __future__ import annotations

import datetime
import logging
import marshal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial

from cozyrender.budgets.doors import DOOR_KINDS, door_kind, door_projection
from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import WATCHED, Watched, list_scope
from cozyrender.kube.shape import ShapeError
from cozyrender.kube.watch import GONE, MISSING, READ_MARGIN, SERVER_TIMEOUT, Failure, Reflector, Selection

from .admission import CHECKED_KINDS
from .metrics import Metrics

log = logging.getLogger("cozyrender.webhook.cache")

NOT_SERVED = "not served by the API server"
NOT_SERVED_RETRY = 30.0  # seconds before a kind not served is asked again
STALE_AFTER = 30.0  # seconds of failing watches and relists before the cache counts as stale (not ready)
WATCH_TIMEOUT = 20  # seconds a watch stays open (then resumed): the API server bookmarks it 2 s before
LAG_BOUND = 45.0  # seconds without a proof of progress (a bookmark) before the cache counts as lagging
SEEN_KEEP = 600.0  # seconds a deleted object's uid is remembered
# What any rule reads of an object's metadata (identity, the ledger's uid,
# generation and resourceVersion, a GPUClass's creation time); a Namespace's
# labels too (its vGPU label).
KEPT_METADATA = ("name", "namespace", "uid", "generation", "resourceVersion", "creationTimestamp")
FINISHED_PODS = ("Succeeded", "Failed")
_COMPACT_DOORS = frozenset({"VirtualMachine", "VirtualMachineInstance", "ResourceClaim"})


def compact(obj: dict) -> dict:
    """`obj` as the cache keeps it: without metadata other than
    KEPT_METADATA (a Namespace keeps its labels), its other fields shared
    with every other object holding the same value (`_shared`: a hoster's
    VMs differ in their names, rarely in their specs). Pods are made
    compact by the index (`LiveIndex(compact_pods=True)`)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    if obj.get("kind") in _COMPACT_DOORS and door_kind(obj) is not None:
        try:  # a VM, VMI or ResourceClaim: what the rules read of it (its devices and claim), and the ledger's metadata
            out = door_projection(obj)
        except ShapeError:
            pass  # kept whole below: the index names what it cannot read
        else:
            out["metadata"].update((key, meta[key]) for key in ("generation", "resourceVersion") if key in meta)
            return out
    kept = KEPT_METADATA + ("labels",) if obj.get("kind") == "Namespace" else KEPT_METADATA
    out = {}
    for key, value in obj.items():
        key = sys.intern(key) if type(key) is str else key
        if key == "metadata":
            value = {sys.intern(k): (_interned(v) if k in ("namespace", "labels", "creationTimestamp") else v)
                     for k, v in meta.items() if k in kept}
        elif key in ("apiVersion", "kind"):
            value = _interned(value)
        elif obj.get("kind") != "Secret":
            value = _shared(value)
        out[key] = value
    return out


_SHARED_KEPT = 65536  # distinct values remembered
_shared_values: dict[bytes, object] = {}


def _shared(value: object) -> object:
    """The one copy of `value` (a spec, a status) kept for every object
    holding an equal one, types and key order included (read-only: the
    cache and the rules never change a stored object)."""
    if not isinstance(value, (dict, list)):
        return _interned(value)
    try:
        key = marshal.dumps(value, 2)
    except ValueError:  # a value marshal cannot write: not shared
        return _interned(value)
    found = _shared_values.get(key)
    if found is None:
        if len(_shared_values) >= _SHARED_KEPT:
            _shared_values.clear()  # objects keep theirs; only sharing with new ones is lost
        found = _shared_values[key] = _interned(value)
    return found


def _interned(value: object) -> object:
    """`value` with its keys and short strings interned (one copy each in
    the process)."""
    if type(value) is dict:
        return {sys.intern(k) if type(k) is str else k: _interned(v) for k, v in value.items()}
    if type(value) is list:
        return [_interned(v) for v in value]
    if type(value) is str and len(value) <= 64:
        return sys.intern(value)
    return value


def scope(watched: Watched) -> dict:
    """`list_scope`, and for pods a field selector leaving out finished pods
    (the rules count none of them; `kube.pods.is_terminated`)."""
    options = list_scope(watched)
    if (watched.group, watched.kind) == ("", "Pod"):
        from lightkube import operators

        options["fields"] = {"status.phase": operators.not_in(list(FINISHED_PODS))}
    return options


def selection(watched: Watched) -> Selection:
    """`scope` in the form `kube.watch.Reflector` takes."""
    options = scope(watched)
    namespace = options.get("namespace")
    return Selection(namespace=None if namespace in (None, "*") else namespace, fields=options.get("fields"))


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
                 metrics: Metrics, server_timeout: int = WATCH_TIMEOUT, read_margin: int = READ_MARGIN,
                 watched: tuple[Watched, ...] = WATCHED, stale_after: float = STALE_AFTER,
                 not_served_retry: float = NOT_SERVED_RETRY, lag_bound: float = LAG_BOUND,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.make_client = make_client
        index.use_compact_pods()
        self.index = index
        self.lock = lock
        self.metrics = metrics
        self.server_timeout = server_timeout
        self.read_margin = read_margin
        self.watched = watched
        self.stale_after = stale_after
        self.not_served_retry = not_served_retry
        self.lag_bound, self.clock = lag_bound, clock
        self._progress: dict[str, float] = {}  # kind -> when its watch last proved progress (a bookmark)
        self._failing_since: dict[str, float] = {}  # kind -> when its watch started failing
        self._counts: dict[str, int] = {w.kind: 0 for w in watched}  # objects of each kind in the index
        # Kind -> its first list, until every kind has listed (then one index of them all).
        self._initial: dict[str, tuple] | None = {}
        self._built = threading.Event()
        self._synced: dict[str, bool] = {w.kind: False for w in watched}
        self._problem: dict[str, str] = {}
        self.unreadable: dict[tuple, str] = {}
        self._seen: dict[str, tuple[int, float]] = {}  # uid -> (generation, when first seen at it)
        self._deleted: dict[str, float] = {}  # uid -> when deleted
        self._list_started: dict[str, float] = {}  # kind -> when its list in progress started (epoch s)
        self._known_since: dict[str, float] = {}  # kind -> when the list the index holds started (epoch s)
        self._stop = threading.Event()
        self._reflectors: list[Reflector] = []

    # ----------------------------------------------------------------- public

    def start(self, versions: Mapping[str, str] | None = None) -> None:
        """One list+watch per kind. `versions` (tests): kind -> a
        resourceVersion to watch it from without listing first, as a restarted
        watch does, for every kind or none: the first lists are indexed
        together, so a kind that never lists would keep the others waiting."""
        if versions and set(versions) != {watched.kind for watched in self.watched}:
            raise ValueError("versions must name every watched kind, or none")
        for watched in self.watched:
            self._reflectors.append(Reflector(
                self.make_client, watched, _KindSink(self, watched), selection(watched), self.server_timeout,
                self.read_margin, on_listed=partial(self._listed, watched), on_failure=partial(self._failed, watched),
                before_watch=partial(self._await_first_index, watched),
                version=(versions or {}).get(watched.kind, ""), bookmarks=True,
                on_progress=partial(self.progressed, watched.kind)).start())
            self.metrics.watch_progress_age.labels(watched.kind).set_function(partial(self._age, watched.kind))

    def stop(self) -> None:
        self._stop.set()
        for reflector in self._reflectors:
            reflector.stop()

    def ready(self) -> bool:
        """Every first list synced, no kind whose watch has been failing
        (and relisting failing) for more than `stale_after` seconds, and no
        kind lagging (`lagging`)."""
        return all(self._synced.values()) and not self._stale() and not self.lagging()

    def progressed(self, kind: str) -> None:
        """A proof of progress of `kind`'s watch (a bookmark, a clean close)."""
        self._progress[kind] = self.clock()

    def _age(self, kind: str) -> float:
        since = self._progress.get(kind)
        return self.clock() - since if since is not None else 0.0

    def lagging(self) -> dict[str, float]:
        """The kinds whose watch has proved no progress for more than
        `lag_bound` seconds, with how long: the view may be that far behind
        (the API server's own watch cache's lag behind etcd not included).
        A kind is measured from its first proof on (a client that gives
        none, such as a test's, leaves it unmeasured)."""
        ages = {kind: self._age(kind) for kind in self._progress}
        return {kind: age for kind, age in ages.items() if age > self.lag_bound}

    def _stale(self) -> list[str]:
        now = time.monotonic()
        return [kind for kind, since in self._failing_since.items() if now - since > self.stale_after]

    def not_ready_reason(self) -> str:
        lagging = self.lagging()
        if lagging:
            return "the watch of " + ", ".join(f"{kind} has shown no progress for {age:.0f} s"
                                               for kind, age in sorted(lagging.items())) + \
                f" (more than the {self.lag_bound:g} s bound: the view may be that far behind the cluster)"
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

    def known_since(self, kind: str) -> float | None:
        """When the list this replica's view of `kind` comes from started
        (epoch seconds): every write stored before then is in the view, or
        was deleted before it (None: never listed)."""
        return self._known_since.get(kind)

    def seen_at(self, uid: str) -> float | None:
        known = self._seen.get(uid)
        return known[1] if known else None

    def size(self) -> dict[str, int]:
        return dict(self._counts)

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
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        with self.lock:
            if event == "DELETED":
                self._drop(watched, key, obj)
                self.unreadable.pop((watched.kind, *key), None)
                if isinstance(uid, str):
                    self._deleted[uid] = time.time()
                    self._seen.pop(uid, None)
            else:
                self._put(watched, key, obj if (watched.group, watched.kind) == ("", "Pod") else compact(obj))
                self._saw(watched, meta)
        self.metrics.cache_objects.labels(watched.kind).set(self._counts[watched.kind])
        self.metrics.unreadable.set(len(self.unreadable))

    def _saw(self, watched: Watched, meta: dict) -> None:
        uid = meta.get("uid")
        if isinstance(uid, str) and (watched.kind in CHECKED_KINDS or (watched.group, watched.kind) in DOOR_KINDS):
            generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
            known = self._seen.get(uid)
            if known is None or known[0] < generation:
                self._seen[uid] = (generation, time.time())

    def _drop(self, watched: Watched, key: tuple, obj: dict) -> None:
        try:
            present = self.index.get(obj) is not None
        except ShapeError:
            return
        if present:
            self.index.remove(obj)
            self._counts[watched.kind] -= 1

    def _put(self, watched: Watched, key: tuple, obj: dict) -> None:
        try:
            present = self.index.get(obj) is not None
            self.index.upsert(obj)
        except ShapeError as err:
            # Unreadable: out of the index (its old copy too), refused loudly until fixed.
            self.unreadable[(watched.kind, *key)] = str(err)
            self._drop(watched, key, obj)
            return
        self.unreadable.pop((watched.kind, *key), None)
        if not present:
            self._counts[watched.kind] += 1

    def replace_all(self, watched: Watched, listed: Iterable[dict]) -> None:
        """A (re)list: change the index only where the listed objects differ.
        The objects are read one at a time (a list streamed from the API
        server is never held whole); a kind's first list is indexed at once."""
        first = self._counts[watched.kind] == 0 and not any(k[0] == watched.kind for k in self.unreadable)
        if first:
            self._first_list(watched, listed)
            return
        fresh: set[tuple] = set()
        pod = (watched.group, watched.kind) == ("", "Pod")
        for obj in listed:
            obj.setdefault("apiVersion", watched.api_version)
            obj.setdefault("kind", watched.kind)
            key = _key(watched, obj)
            fresh.add(key)
            kept = obj if pod else compact(obj)
            with self.lock:
                if not pod:
                    try:
                        old = self.index.get(kept)
                    except ShapeError:
                        old = None
                    if old is not None and _version(old) == _version(kept) and _version(kept):
                        continue
                self._put(watched, key, kept)
                self._saw(watched, obj.get("metadata") or {})
        with self.lock:
            for identity in self.index.identities(watched.group, watched.kind):
                key = (identity[2], identity[3])
                if key not in fresh:
                    stand_in = {"apiVersion": watched.api_version, "kind": watched.kind,
                                "metadata": {"name": key[1], **({"namespace": key[0]} if key[0] else {})}}
                    self._drop(watched, key, stand_in)
            for key in [k for k in self.unreadable if k[0] == watched.kind and k[1:] not in fresh]:
                del self.unreadable[key]
            now = time.time()
            for uid in [uid for uid, when in self._deleted.items() if now - when > SEEN_KEEP]:
                del self._deleted[uid]
        self._gauges(watched)

    def _first_list(self, watched: Watched, listed: Iterable[dict]) -> None:
        """A kind the index holds nothing of yet: its objects kept as they
        stream in (a pod as its identity and reading), then indexed at once;
        if any cannot be read that way, one at a time."""
        objects: list[dict] = []
        pods: list[tuple] = []
        pod = (watched.group, watched.kind) == ("", "Pod")
        for obj in listed:
            obj.setdefault("apiVersion", watched.api_version)
            obj.setdefault("kind", watched.kind)
            if pod:
                try:
                    pods.append(self.index.pod_entry(obj))
                except ShapeError:
                    objects.append(obj)
            else:
                objects.append(compact(obj))
            with self.lock:
                self._saw(watched, obj.get("metadata") or {})
        with self.lock:
            if self._initial is not None:  # the first lists: indexed together once every kind has listed
                self._initial[watched.kind] = (watched, objects, pods)
                if len(self._initial) < len(self.watched):
                    return
                batches, self._initial = list(self._initial.values()), None
            else:
                batches = [(watched, objects, pods)]
            by_kind = {each.kind: each for each, _, _ in batches}
            leftover = self.index.extend([obj for _, objs, _ in batches for obj in objs],
                                         [entry for _, _, entries in batches for entry in entries])
            for each, objs, entries in batches:
                self._counts[each.kind] += len(objs) + len(entries)
            for obj in leftover:
                self._counts[obj["kind"]] -= 1
            for obj in leftover:
                each = by_kind[obj["kind"]]
                self._put(each, _key(each, obj), obj)
        self._built.set()
        for each, _, _ in batches:
            self._gauges(each)

    def _waiting(self, watched: Watched) -> bool:
        """Whether `watched`'s first list waits to be indexed with the others'."""
        with self.lock:
            return self._initial is not None and watched.kind in self._initial

    def _gauges(self, watched: Watched) -> None:
        self.metrics.cache_objects.labels(watched.kind).set(self._counts[watched.kind])
        self.metrics.unreadable.set(len(self.unreadable))

    # ----------------------------------------------------------------- the loop's hooks

    def _listed(self, watched: Watched) -> None:
        if watched.kind in self._list_started:
            self._known_since[watched.kind] = self._list_started[watched.kind]
        if watched.kind in self._progress:
            self._progress[watched.kind] = self.clock()  # a list is current as of its end
        self._synced[watched.kind] = True
        self._problem.pop(watched.kind, None)
        self._failing_since.pop(watched.kind, None)
        self.metrics.ready.set(1 if self.ready() else 0)

    def _failed(self, watched: Watched, failure: Failure) -> float | None:
        """A failed list or watch of `watched` (the Reflector relists it):
        counted, and stale once failing for `stale_after`. A kind the API
        server does not serve (404 before it ever listed) counts as synced
        and empty, however often it is asked again (`not_served_retry`). A kind that
        was served and then answers 404 fails like any error: its objects
        may still be there, so the cache turns stale rather than empty."""
        kind = watched.kind
        if failure.reason == GONE:
            self.metrics.watch_restarts.labels(kind, "gone").inc()
            return None
        if failure.reason == MISSING and (not self._synced[kind] or self._problem.get(kind) == NOT_SERVED):
            self.replace_all(watched, ())
            self._synced[kind] = True
            self._problem[kind] = NOT_SERVED
            self._failing_since.pop(kind, None)
            self.metrics.ready.set(1 if self.ready() else 0)
            return self.not_served_retry
        self._failing_since.setdefault(kind, time.monotonic())
        self._problem[kind] = failure.problem
        self.metrics.watch_restarts.labels(kind, "error" if failure.code is not None else failure.reason).inc()
        if failure.code is None:
            log.warning("watch of %s: %s", watched.plural, failure.problem)
        return None

    def _await_first_index(self, watched: Watched) -> None:
        """A kind is watched from its list's version once every first list is indexed."""
        while self._waiting(watched) and not self._stop.is_set():
            self._built.wait(1)


class _KindSink:
    """What a kind's Reflector delivers, into the cache."""

    def __init__(self, cache: Cache, watched: Watched) -> None:
        self.cache, self.watched = cache, watched

    def replace(self, listed: Iterable[dict]) -> None:
        # The list's request is sent at its first read, after this moment: a lower bound of its reading.
        self.cache._list_started[self.watched.kind] = time.time()
        self.cache.replace_all(self.watched, _kept(self.watched, listed))

    def apply(self, event: str, obj: dict) -> None:
        self.cache.apply(self.watched, event, obj)


def _version(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion") or ""


def _kept(watched: Watched, listed: Iterable[dict]) -> Iterator[dict]:
    for obj in listed:
        obj.setdefault("apiVersion", watched.api_version)
        obj.setdefault("kind", watched.kind)
        if watched.keeps(obj):
            yield obj
