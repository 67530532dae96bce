"""Race safety: the API server arbitrates between concurrent writes, through
a reservation ledger updated with compare-and-swap.

Rules:
- One ledger object: the ConfigMap `cozyrender-reservations` in the
  webhook's namespace (created by the chart; the webhook may get and update
  it alone). It holds one entry per admitted growing write: the object's
  identity (group, kind, namespace, name), uid and generation, the compact
  projection the rules read (spec and identity), and an expiry (admission
  time + TTL, 60 s by default).
- A decision reads the ledger fresh (remembering its resourceVersion), lays
  its live entries over this replica's watched view (an entry replaces the
  watched object of the same identity; it is ignored once this replica's
  watch has seen that uid at the entry's generation or later, or after it
  expires), lays the request's oldObject over an UPDATE and takes the
  object away for a CREATE, then runs `check_write`: `cozyrender check`'s
  rules on that view. The overlay goes through LiveIndex upsert/remove and
  is reverted after the check, so a decision costs what it touches.
- When the write is admitted, grows something (a workload reserving more of
  some class; any change of a Tenant's resourceQuotas) and is not a dry
  run, its entry is written with an update carrying the resourceVersion
  read (expired entries dropped). A 409 Conflict means another decision
  got there first: re-read, re-check, retry until the deadline (8 s, well
  inside the webhook's timeout), then refuse saying the ledger was
  contended. So of two writes that each fit alone but not together, the
  second to reach the ledger is checked with the first's entry in view,
  whichever replica either reached: never both admitted.
- A write that grows nothing is checked without the ledger (growth is the
  only thing another pending write can make fail), and a dry run writes
  nothing (sideEffects NoneOnDryRun).
- A reservation whose object is never stored (another admission plugin
  refused it later) holds its devices until it expires: refusing a little
  too much for a minute, never admitting too much.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cozyrender.budgets import check_write
from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.model import WORKLOAD_KINDS, parse_workload
from cozyrender.budgets.checks import growth
from cozyrender.gpuclass.classes import identity_group
from cozyrender.kube.identity import identity_of
from cozyrender.kube.shape import ShapeError

from . import admission
from .metrics import Metrics

DEFAULT_NAME = "cozyrender-reservations"
DATA_KEY = "reservations.json"
DEFAULT_TTL = 60.0
DEADLINE = 8.0  # seconds; the webhook's timeoutSeconds is 10
MAX_LEDGER_BYTES = 900 * 1024  # a ConfigMap holds at most 1 MiB


class Conflict(Exception):
    """The ledger changed since it was read (409)."""


class LedgerError(Exception):
    """The ledger cannot be read or written; str() says why."""


@dataclass(frozen=True)
class Entry:
    identity: tuple
    uid: str
    generation: int
    obj: dict
    admitted: float
    expires: float

    def as_dict(self) -> dict:
        return {"identity": list(self.identity), "uid": self.uid, "generation": self.generation,
                "object": self.obj, "admitted": self.admitted, "expires": self.expires}

    @classmethod
    def from_dict(cls, data: Mapping) -> Entry:
        return cls(tuple(data["identity"]), str(data.get("uid") or ""), int(data.get("generation") or 0),
                   dict(data["object"]), float(data["admitted"]), float(data["expires"]))


def projection(obj: Mapping) -> dict:
    """What the ledger keeps of an object: the spec the rules read and its identity."""
    meta = obj.get("metadata") or {}
    kept = {key: meta[key] for key in ("name", "namespace", "uid", "generation") if key in meta}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept,
            "spec": obj.get("spec") or {}}


def identity(obj: Mapping) -> tuple:
    found = identity_of(obj, identity_group(obj))
    if found is None:
        raise ShapeError.at(obj, "metadata", "has no usable kind, name or namespace")
    return found


def grows(obj: Mapping, old: Mapping | None) -> bool:
    """Whether a write can take something another pending write could also
    want: a workload reserving more of some class than the object it
    replaces, or a Tenant whose resourceQuotas change (or are declared)."""
    if obj.get("kind") == "Tenant":
        quotas = (obj.get("spec") or {}).get("resourceQuotas")
        before = ((old or {}).get("spec") or {}).get("resourceQuotas") if old is not None else None
        return quotas != before if old is not None else bool(quotas)
    if obj.get("kind") in WORKLOAD_KINDS:
        return bool(growth(parse_workload(obj), parse_workload(old) if old is not None else None))
    return True  # a kind the rules do not read as a workload: treat as growing (the check decides)


def encode(entries: list[Entry]) -> str:
    return json.dumps([entry.as_dict() for entry in entries], separators=(",", ":"), sort_keys=True)


def decode(text: str | None) -> list[Entry]:
    if not text:
        return []
    try:
        return [Entry.from_dict(item) for item in json.loads(text)]
    except (ValueError, KeyError, TypeError) as err:
        raise LedgerError(f"the ledger's {DATA_KEY} cannot be read: {err}") from None


class ConfigMapLedger:
    """The ledger ConfigMap, read and compare-and-swapped through lightkube."""

    def __init__(self, client, namespace: str, name: str = DEFAULT_NAME) -> None:
        self.client, self.namespace, self.name = client, namespace, name

    def read(self) -> tuple[list[Entry], object]:
        from lightkube.core.exceptions import ApiError
        from lightkube.resources.core_v1 import ConfigMap

        try:
            configmap = self.client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as err:
            raise LedgerError(f"cannot read the ledger ConfigMap {self.namespace}/{self.name}: "
                              f"{err.status.code} {err.status.message}") from None
        return decode((configmap.data or {}).get(DATA_KEY)), configmap

    def write(self, entries: list[Entry], read: object) -> None:
        from lightkube.core.exceptions import ApiError

        text = encode(entries)
        if len(text) > MAX_LEDGER_BYTES:
            raise LedgerError(f"the ledger would hold {len(text)} bytes of live reservations, more than a "
                              f"ConfigMap takes ({MAX_LEDGER_BYTES}); they expire within the reservation TTL")
        configmap = read
        configmap.data = dict(configmap.data or {}, **{DATA_KEY: text})  # metadata.resourceVersion: the CAS
        try:
            self.client.replace(configmap)
        except ApiError as err:
            if err.status.code == 409:
                raise Conflict() from None
            raise LedgerError(f"cannot write the ledger ConfigMap {self.namespace}/{self.name}: "
                              f"{err.status.code} {err.status.message}") from None


class Arbiter:
    """Decides AdmissionReviews against the cache's index, the ledger's
    reservations and the request's own objects (the `/validate` route)."""

    def __init__(self, index: LiveIndex, lock: threading.Lock, metrics: Metrics, ledger=None,
                 seen: Callable[[str, int], bool] = lambda uid, generation: False,
                 unreadable: Callable[[], dict] = dict, ttl: float = DEFAULT_TTL, deadline: float = DEADLINE,
                 platform_vgpu: bool | None = None, clock: Callable[[], float] = time.time) -> None:
        self.index, self.lock, self.metrics, self.ledger = index, lock, metrics, ledger
        self.seen, self.unreadable = seen, unreadable
        self.ttl, self.deadline, self.platform_vgpu, self.clock = ttl, deadline, platform_vgpu, clock
        self._decisions = threading.Lock()  # one growing decision at a time in this process: fewer 409s

    def __call__(self, body: object) -> dict:
        try:
            review = admission.read_review(body)
        except admission.ReviewError as err:
            return admission.envelope(admission.cannot_decide(None, err.uid, str(err)))
        if not review.checked:
            return admission.envelope(admission.allow(review.uid))
        return admission.envelope(self.decide(review))

    def decide(self, review: admission.Review) -> dict:
        try:
            obj = admission.written_object(review)
            with self.lock:  # only the writes whose pools hold an unreadable object (issue 28 item 2)
                why = admission.unreadable_bearing(self.index.state, self.unreadable(), obj)
            if why is not None:
                return admission.cannot_decide(review, review.uid, why)
            old = dict(review.old) if review.old is not None and review.operation == "UPDATE" else None
            growing = grows(obj, old)
            if not growing or self.ledger is None:
                return admission.answer(review, self._check(review, obj, old, []))
            with self._decisions:
                return self._reserve(review, obj, old)
        except ShapeError as err:
            return admission.unreadable(review, err)
        except LedgerError as err:
            return admission.cannot_decide(review, review.uid, str(err))
        except Exception as err:  # fail closed, saying why
            return admission.cannot_decide(review, review.uid, f"{type(err).__name__}: {err}")

    def _reserve(self, review: admission.Review, obj: dict, old: dict | None) -> dict:
        give_up = time.monotonic() + self.deadline
        while True:
            started = time.perf_counter()
            entries, read = self.ledger.read()
            self.metrics.ledger_seconds.labels("read").observe(time.perf_counter() - started)
            now = self.clock()
            current = [entry for entry in entries if entry.expires > now]
            live = [entry for entry in current if not self._caught_up(entry)]
            self.metrics.ledger_entries.set(len(live))
            decision = self._check(review, obj, old, live)
            if not decision.allowed or review.dry_run:
                return admission.answer(review, decision)
            entry = self._entry(obj, now)
            kept = [other for other in current if other.identity != entry.identity] + [entry]
            try:
                started = time.perf_counter()
                self.ledger.write(kept, read)
                self.metrics.ledger_seconds.labels("write").observe(time.perf_counter() - started)
                self.metrics.ledger_writes.inc()
                return admission.answer(review, decision)
            except Conflict:
                self.metrics.ledger_conflicts.inc()
                if time.monotonic() > give_up:
                    return admission.cannot_decide(review, review.uid, f"the reservation ledger was contended for "
                                                   f"{self.deadline:g} s (other writes kept changing it); try again")

    def _entry(self, obj: dict, now: float) -> Entry:
        meta = obj.get("metadata") or {}
        generation = meta.get("generation")
        return Entry(identity(obj), str(meta.get("uid") or ""), generation if isinstance(generation, int) else 0,
                     projection(obj), now, now + self.ttl)

    def _caught_up(self, entry: Entry) -> bool:
        """Whether this replica's watch already shows the entry's write."""
        if entry.uid:
            return self.seen(entry.uid, entry.generation)
        with self.lock:
            cached = self.index.get(entry.obj)
        return cached is not None and (cached.get("spec") or {}) == entry.obj.get("spec")

    def _check(self, review: admission.Review, obj: dict, old: dict | None, entries: list[Entry]):
        """check_write on the watched view with `entries`, `old` (UPDATE) and
        no object of the write's identity (CREATE) laid over it, reverted after."""
        own = identity(obj)
        with self.lock:
            undo: list[tuple[dict, Mapping | None]] = []
            try:
                for entry in entries:
                    if entry.identity != own:
                        self._put(entry.obj, undo)
                if review.operation == "UPDATE" and old is not None:
                    cached = self.index.get(old)
                    if not _same(cached, old):  # the watch lags behind the stored object
                        self._put(old, undo)
                elif review.operation == "CREATE":
                    cached = self.index.get(obj)
                    if cached is not None:
                        undo.append((obj, cached))
                        self.index.remove(obj)
                return check_write(self.index.state, obj, platform_vgpu=self.platform_vgpu)
            finally:
                for probe, previous in reversed(undo):
                    if previous is None:
                        self.index.remove(probe)
                    else:
                        self.index.upsert(previous)

    def _put(self, obj: dict, undo: list) -> None:
        previous = self.index.get(obj)
        self.index.upsert(obj)
        undo.append((obj, previous))


def _version(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion") or ""


def _same(cached: Mapping | None, old: Mapping) -> bool:
    """Whether the watched copy is the request's oldObject (same
    resourceVersion, or the same content)."""
    if cached is None:
        return False
    version = _version(old)
    if version and _version(cached) == version:
        return True
    return {k: v for k, v in cached.items() if k != "metadata"} == {k: v for k, v in old.items() if k != "metadata"}
