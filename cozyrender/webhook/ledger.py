"""Race safety: the API server arbitrates between concurrent writes, through
a reservation ledger sharded by pool root and updated with compare-and-swap.

Rules:
- Shards: one ConfigMap per pool root (a tenant namespace whose Tenant
  declares keys), `<prefix>-<namespace>` in the webhook's namespace, created
  on first use. Per pool root and not per budget holder: a pool root is the
  unit every budget figure is kept for (its budget, its reservations, its
  carving children's charges, the devices in its subtree), so a write that
  could make another fail in that pool always meets it in that pool's shard,
  and two pools that share no pool root above them never touch the same
  object (Kubernetes' ResourceQuota admission and Capsule's
  GlobalResourceQuota keep their ledger with the quota in the same way).
- A write takes the shards of its chain of pool roots: the root of the pool
  it is in (for a Tenant, of the pool above it, and its own namespace's
  while it declares keys before or after the write), then the pool root
  above that one, up to the top. A write no pool covers takes tenant-root's
  shard, where any Tenant that would make a pool appear above it (the root
  tenant's included) meets it. The chain is computed on the watched view
  with the read entries laid over it, and read again until no new shard
  appears. The shards are written in one fixed order (ancestors first, then
  by name), each with compare-and-swap: a 409 means another decision wrote
  that shard since it was read: re-read, re-check, retry until the
  request's deadline, then refuse saying so. Of two writes
  that each fit alone but not together, both charge some pool whose budget
  the pair exceeds; both write that pool's shard, and the second to write it
  read the first's entry: never both admitted. Optimistic writes hold no
  lock, so they cannot deadlock; the first writer of a contended shard wins
  it, so no round is lost by all.
- An entry is one admitted growing write: the object's identity, uid and
  generation, the request it came from, the compact projection the rules
  read (a workload's class entries and replica numbers under renamed node
  groups; a Tenant's resourceQuotas and vGPU flag; never any other field),
  the admission time and expiry (TTL, 60 s by default). An entry is at most
  MAX_ENTRY_BYTES. In a shard, the in-flight entries (not yet seen stored)
  of one tenant subtree (the subtree of the child of the shard's pool root
  the write's own namespace is in) are capped: MAX_GROUP_ENTRIES objects,
  MAX_GROUP_BYTES, MAX_GROUP_TENANTS Tenant objects; so no tenant can fill a
  shard another tenant needs. Objects are counted, not attempts: a write
  replaces its object's earlier entries that carry the same fields the
  rules read (a retry, whatever its request) or that its UPDATE's old
  object shows stored or superseded (`replacing`); the versions that may
  still be stored stay (at most MAX_VERSIONS) and count as the larger of
  them, so a tenant is never refused for its own earlier attempts and
  nothing counts less. Refusals never state the shard's size or anyone's
  entries.
- Reservations only ever take room. A pending workload counts as the larger
  of itself and what is stored, class by class. A pending Tenant counts as
  the larger of itself and what is stored (key by key) everywhere it is
  charged, and as the smaller where its own budgets apply: a write inside
  its subtree sees its lower value, so an increase charges its parent at
  once but raises nothing below it until stored, and a decrease takes room
  below at once but frees its parent's room only once stored. A pending
  Tenant whose versions declare different keys (a pool root appearing, a
  class a subtree stops capping) has no one tightest version: where that
  bears on the write, it is checked with each version in view (at most
  MAX_COMBINATIONS views). A CREATE whose identity the watched view holds
  is refused at once (409 AlreadyExists: the API server would refuse it
  too) and never laid over the stored object.
- An entry stops counting when this replica's watch shows its object at its
  generation or later, and then leaves its shards `settle` seconds after
  its admission (the other replicas' watches have seen it by then). An
  entry never seen is released once the API server has had `settle` seconds
  to answer (the time from this answer to the write being stored, other
  webhooks included) and a read from the API server shows the object was
  never stored at that uid and generation (AlreadyExists, a later admission
  plugin refusing, a timeout; or an object of another uid there that this
  replica's watch already shows), at most MAX_RELEASE_LOOKUPS reads per
  decision, the oldest first; or once this replica's cache listed its kind
  after the write was decided, or after another replica's watch showed it
  stored or deleted (the entry's `seen_at`, stamped when a replica whose
  watch shows it next writes the shard), without showing it (`known_since`:
  an object created and deleted before a replica started, issue 34's
  restart; the replicas' clocks are taken to agree to well within
  `settle`, as NTP keeps nodes). Never by age alone: an entry that
  may be stored counts until the watch shows it (its expiry is kept in the
  entry, and no longer releases it).
- Every decision is bounded by its request's deadline (`deadline`: the
  configurations' timeoutSeconds less a margin): the turn, every ledger
  read and write and every lookup wait at most the time left; past it
  nothing is written, and a request refused or answered too late has its
  entries taken out of its shards at once (`_release`, after the answer).
- Within one replica, writes sharing a shard take turns (by the topmost
  shard of their chain), so 409s come only from other replicas.
- A write that grows nothing is checked without the ledger, and a dry run
  writes nothing (sideEffects NoneOnDryRun).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction

from cozyrender.budgets import check_write
from cozyrender.budgets.checks import growth
from cozyrender.budgets.doors import door_kind, door_projection, is_claim_template, larger_door, read_door
from cozyrender.budgets.holders import resolve
from cozyrender.kube.pods import extended_resource_names
from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.model import WORKLOAD_KINDS, parse_declaration, parse_workload
from cozyrender.namespaces import ROOT_NAMESPACE, ancestors, is_tenant_namespace, is_within, parent_namespace
from cozyrender.gpuclass.classes import identity_group
from cozyrender.kube.identity import identity_of
from cozyrender.kube.shape import ShapeError

from . import admission
from . import deadline as deadlines
from .metrics import Metrics

DEFAULT_PREFIX = "cozyrender-ledger"
DATA_KEY = "reservations.json"
DEFAULT_TTL = 60.0
DEFAULT_SETTLE = 10.0  # seconds from an answer to the write stored or refused (the webhook timeout)
MAX_SHARD_BYTES = 900 * 1024  # a ConfigMap holds at most 1 MiB
MAX_ENTRY_BYTES = 4096
MAX_GROUP_ENTRIES = 32  # one tenant subtree's pending entries in one shard
MAX_GROUP_BYTES = 64 * 1024
MAX_GROUP_TENANTS = 2  # one tenant subtree's pending Tenant writes in one shard
MAX_COMBINATIONS = 81  # views a decision checks with pending Tenants declaring different keys
MAX_RELEASE_LOOKUPS = 4  # API reads per decision to release entries never stored
MAX_VERSIONS = 8  # distinct versions of one object in flight in one shard (retries of one version: one)
LOOKUP_TIME = 2.0  # seconds a release lookup may take; none is made with less time left
RELEASE_TIME = 5.0  # seconds a release of a refused or late request's entries may take (after its answer)
ALREADY_EXISTS = (409, "AlreadyExists")


class Conflict(Exception):
    """A shard changed since it was read (409)."""


class LedgerError(Exception):
    """A shard cannot be read or written; str() says why."""


@dataclass(frozen=True)
class Entry:
    identity: tuple
    uid: str
    generation: int
    obj: dict
    admitted: float
    expires: float
    request: str = ""
    seen_at: float = 0.0  # when a replica's watch first showed it stored (or deleted); 0: not yet

    def as_dict(self) -> dict:
        out = {"identity": list(self.identity), "uid": self.uid, "generation": self.generation,
               "object": self.obj, "admitted": self.admitted, "expires": self.expires, "request": self.request}
        if self.seen_at:
            out["seen"] = self.seen_at
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> Entry:
        return cls(tuple(data["identity"]), str(data.get("uid") or ""), int(data.get("generation") or 0),
                   dict(data["object"]), float(data["admitted"]), float(data["expires"]),
                   str(data.get("request") or ""), float(data.get("seen") or 0.0))

    @property
    def namespace(self) -> str:
        return self.identity[2] or ""

    def size(self) -> int:
        return len(encode([self]))


# -- the compact projection ----------------------------------------------------

def _class_entries(gpus: object) -> list[dict]:
    """`gpus` as the rules count it: class entries with their count (device
    names, which reserve nothing, and every other field dropped)."""
    out = []
    for entry in gpus if isinstance(gpus, list) else ():
        if isinstance(entry, Mapping) and entry.get("class") is not None:
            out.append({"class": entry["class"], "count": entry.get("count", 1)})
    return out


def _pool(spec: Mapping) -> dict:
    """A worker pool or node group: its class entries and maxReplicas."""
    out: dict = {"gpus": _class_entries(spec.get("gpus"))}
    if spec.get("maxReplicas") is not None:
        out["maxReplicas"] = spec["maxReplicas"]
    return out


def projection(obj: Mapping) -> dict:
    """What the ledger keeps of an object: its identity and the fields the
    budget rules read, nothing else (a node group's name is not read: groups
    are renamed g0, g1, ... in their sorted order)."""
    if door_kind(obj) is not None:  # a Pod, VM or VMI: its devices and claim (`budgets.doors`)
        return door_projection(obj)
    meta = obj.get("metadata") or {}
    kept = {key: meta[key] for key in ("name", "namespace") if key in meta}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    kind = obj.get("kind")
    if kind == "Tenant":
        out: dict = {}
        if isinstance(spec.get("resourceQuotas"), Mapping):
            out["resourceQuotas"] = dict(spec["resourceQuotas"])
        gpu = spec.get("gpu")
        if isinstance(gpu, Mapping) and "vgpu" in gpu:
            out["gpu"] = {"vgpu": gpu["vgpu"]}
    elif kind == "Kubernetes":
        groups = spec.get("nodeGroups") if isinstance(spec.get("nodeGroups"), Mapping) else {}
        out = {"nodeGroups": {f"g{i}": _pool(groups[name]) for i, name in enumerate(sorted(groups, key=str))
                              if isinstance(groups[name], Mapping)}}
    elif kind == "KubernetesNodes":
        out = _pool(spec)
    else:
        out = {"gpus": _class_entries(spec.get("gpus"))}
    return {"apiVersion": obj.get("apiVersion"), "kind": kind, "metadata": kept, "spec": out}


# -- the larger (or smaller) of two versions -------------------------------------

def _reserves(pool: Mapping, replicas: int = 1) -> dict[str, int]:
    found: dict[str, int] = {}
    for entry in pool.get("gpus") or ():
        found[entry["class"]] = found.get(entry["class"], 0) + entry["count"] * replicas
    return found


def _larger_pool(a: Mapping, b: Mapping, replicated: bool) -> dict:
    """A pool reserving, class by class, at least what `a` and `b` each
    reserve: the larger maxReplicas, and per class the entries of the side
    reserving more."""
    ra, rb = (a.get("maxReplicas") or 0, b.get("maxReplicas") or 0) if replicated else (1, 1)
    mine, theirs = _reserves(a, ra), _reserves(b, rb)
    gpus = []
    for gpu_class in sorted(set(mine) | set(theirs)):
        side = a if mine.get(gpu_class, 0) >= theirs.get(gpu_class, 0) else b
        gpus += [entry for entry in side.get("gpus") or () if entry["class"] == gpu_class]
    out: dict = {"gpus": gpus}
    if replicated and (ra or rb or gpus):
        out["maxReplicas"] = max(ra, rb)
    return out


def _larger_workload(a: Mapping, b: Mapping) -> dict:
    kind = a["kind"]
    if kind == "Kubernetes":
        ga, gb = a["spec"].get("nodeGroups") or {}, b["spec"].get("nodeGroups") or {}
        empty: dict = {"gpus": []}
        spec = {"nodeGroups": {name: _larger_pool(ga.get(name, empty), gb.get(name, empty), True)
                               for name in sorted(set(ga) | set(gb))}}
    else:
        spec = _larger_pool(a["spec"], b["spec"], kind == "KubernetesNodes")
    return dict(a, spec=spec)


def _value(key: str, value: object) -> Fraction | None:
    """A declared value as a number (None: unusable, counted as 0)."""
    from cozyrender.budgets.bounds import quantity_text_problem
    from cozyrender.keys import declared_in_budget_domain, parse_budget_value
    from cozyrender.kube.quantity import parse_quantity

    try:
        if declared_in_budget_domain(key):
            return Fraction(parse_budget_value(value))
        if quantity_text_problem(value) is not None:
            return None
        return parse_quantity(value)
    except Exception:
        return None


def _tenant_bound(a: Mapping, b: Mapping, larger: bool) -> dict:
    """A Tenant declaring every key either declares, each at the larger
    (`larger`) or the smaller value of the two, and entitled to vGPU when
    either (larger) or both (smaller) are."""
    from cozyrender.entitlement import flag_value

    qa, qb = a["spec"].get("resourceQuotas") or {}, b["spec"].get("resourceQuotas") or {}
    quotas = {}
    for key in list(qa) + [key for key in qb if key not in qa]:
        if key not in qa or key not in qb:
            quotas[key] = qa[key] if key in qa else qb[key]
            continue
        va, vb = _value(key, qa[key]), _value(key, qb[key])
        if va is None or vb is None:  # unusable counts as 0: the smaller
            pick_a = (va is None) != larger
        else:
            pick_a = va >= vb if larger else va <= vb
        quotas[key] = qa[key] if pick_a else qb[key]
    spec: dict = {"resourceQuotas": quotas}
    flags = [bool(flag_value((side["spec"].get("gpu") or {}).get("vgpu"))) for side in (a, b)]
    spec["gpu"] = {"vgpu": any(flags) if larger else all(flags)}
    return dict(a, spec=spec)


def effective(pending: list[dict], stored: Mapping | None, anchor: str) -> dict:
    """What pending versions of one object count as for a write at namespace
    `anchor` (a workload's namespace; a Tenant's own namespace): never less
    room taken than the stored object (`stored`, None when absent) or any
    pending version. A Tenant counts at its smaller values inside its own
    subtree (its budgets bound the write there) and at its larger ones
    elsewhere (its charge above)."""
    versions = [dict(projection(stored))] if stored is not None else []
    versions += pending
    result = versions[0]
    if result["kind"] == "Tenant":
        owned = _owned_namespace(result)
        larger = not (owned and is_within(anchor, owned))
        for other in versions[1:]:
            result = _tenant_bound(result, other, larger)
    elif result["kind"] in WORKLOAD_KINDS:
        for other in versions[1:]:
            result = _larger_workload(result, other)
    elif door_kind(result) is not None:
        for other in versions[1:]:
            result = larger_door(result, other)
    return result


def _declares_differently(versions: list[dict], stored: Mapping | None) -> bool:
    """Whether a Tenant's versions (pending, and stored or absent) differ in
    the keys they declare: then no one version is the tightest everywhere."""
    keys = [frozenset((v["spec"].get("resourceQuotas") or {})) for v in versions]
    if stored is not None:
        keys.append(frozenset(projection(stored)["spec"].get("resourceQuotas") or {}))
    else:
        keys.append(None)  # absent: no pool root here at all
    return len(set(keys)) > 1


def _bears_on(state, tenant: Mapping, anchor: str, pools: set[str], held: Callable[[], Iterable[str]],
              root: str | None = None) -> bool:
    """Whether which keys a pending Tenant declares can change the decision
    of a write at `anchor` (whose chain of pool roots is `pools`): the write
    is in its subtree, or its subtree holds something (`held()`: namespaces
    with reservations, tenants or usage, walked only when the pools meet)
    counted in a pool the write is charged to. `root`: the namespace of a
    Tenant being written, a pool root once written though the view may not
    hold it as one yet (a pending sub-tenant that escapes its keys takes its
    subtree's devices out of that pool)."""
    owned = _owned_namespace(tenant)
    if owned is None:
        return False
    if is_within(anchor, owned):
        return True
    parent = parent_namespace(owned)
    meets = bool(pools.intersection(chain(state, parent))) or (root is not None and is_within(parent, root))
    return meets and any(is_within(namespace, owned) for namespace in held())


def _owned_namespace(tenant: Mapping) -> str | None:
    try:
        return parse_declaration(tenant).namespace
    except ShapeError:
        return None


# -- what a write charges: its shards ---------------------------------------------

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
    if door_kind(obj) is not None and old is not None:  # devices (by name) that grow, or another claim
        new, before = read_door(obj), read_door(old)
        counts = before.counts()
        return new.parent != before.parent or any(n > counts.get(r, 0) for r, n in new.counts().items())
    return True  # a kind the rules do not read as a workload: treat as growing (the check decides)


def chain(state, namespace: str | None) -> list[str]:
    """The pool roots charged from `namespace`: its own, then each above."""
    found: list[str] = []
    root = state.budget_root(namespace) if namespace else None
    while root is not None:
        found.append(root)
        parent = parent_namespace(root)
        root = state.budget_root(parent) if parent else None
    return found


def anchor_of(obj: Mapping) -> str:
    """Where a write's own budgets are judged: a workload's namespace, a Tenant's own namespace."""
    if obj.get("kind") == "Tenant":
        return parse_declaration(obj).namespace
    return (obj.get("metadata") or {}).get("namespace") or ""


def shards_of(state, obj: Mapping, old: Mapping | None) -> set[str]:
    """The pool roots whose shards a write takes (see the module's rules)."""
    if obj.get("kind") == "Tenant":
        own = parse_declaration(obj)
        if not is_tenant_namespace(own.namespace):
            return set()
        stored = state.declarations.get(own.namespace)
        declares = own.is_budget_root or (stored is not None and stored.is_budget_root) or (
            old is not None and bool(((old.get("spec") or {}).get("resourceQuotas"))))
        parent = parent_namespace(own.namespace)
        found = chain(state, parent) or [ROOT_NAMESPACE]
        return set(found) | ({own.namespace} if declares else set())
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    if not is_tenant_namespace(namespace):
        return set()
    return set(chain(state, namespace) or [ROOT_NAMESPACE])


def _anchor(entry: Entry) -> str:
    """An entry's `anchor_of` (a Tenant's own namespace)."""
    if entry.identity[1] == "Tenant":
        return _owned_namespace(entry.obj) or entry.namespace
    return entry.namespace


def shard_order(namespace: str) -> tuple[int, str]:
    """The one order shards are written in: ancestors first, then by name."""
    return (namespace.count("-"), namespace)


def group_of(shard: str, namespace: str) -> str:
    """Whose share of shard `shard` an entry in `namespace` uses: the child
    of the shard's pool root whose subtree holds it (or the root itself)."""
    below = None
    for level in ancestors(namespace):
        if level == shard:
            return below or shard
        below = level
    return namespace


def replacing(entries: list[Entry], entry: Entry, old: Mapping | None) -> list[Entry]:
    """A shard's kept entries with the write's `entry` about to join them:
    its object's earlier versions it replaces dropped. Retries of one write
    hold one entry: an earlier entry of the same object with the same
    fields the rules read (a retry, whatever its request) goes, as does,
    for an UPDATE, one the request's old object shows stored or superseded
    (another uid, or its uid at the old object's generation or before).
    Versions that may still be stored stay: they count as the larger of
    them (`effective`), never less."""
    meta = (old or {}).get("metadata") or {}
    old_uid = meta.get("uid") if old is not None else None
    old_generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0

    def superseded(other: Entry) -> bool:
        if other.identity != entry.identity:
            return False
        if other.obj == entry.obj:
            return True
        if old_uid:
            return other.uid != old_uid or other.generation <= old_generation
        return False

    return [other for other in entries if not superseded(other)]


def encode(entries: list[Entry]) -> str:
    return json.dumps([entry.as_dict() for entry in entries], separators=(",", ":"), sort_keys=True)


def decode(text: str | None) -> list[Entry]:
    if not text:
        return []
    try:
        return [Entry.from_dict(item) for item in json.loads(text)]
    except (ValueError, KeyError, TypeError) as err:
        raise LedgerError(f"a ledger shard's {DATA_KEY} cannot be read: {err}") from None


# -- the shards in the API server ----------------------------------------------------

class ConfigMapShards:
    """The ledger's shards: ConfigMaps `<prefix>-<pool root>` in `namespace`,
    read and compare-and-swapped (created on first write) through lightkube.
    Each call waits at most `timeout` seconds (the decision's remaining
    time), the client's own timeout otherwise; one that runs out raises
    LedgerError (a write may then have been stored or not)."""

    def __init__(self, client, namespace: str, prefix: str = DEFAULT_PREFIX) -> None:
        self.client, self.namespace, self.prefix = client, namespace, prefix

    def name(self, shard: str) -> str:
        return f"{self.prefix}-{shard}"

    def _call(self, method: str, timeout: float | None, **request):
        from cozyrender.kube.bounded import Overdue, call

        try:
            return call(self.client, method, timeout, **request)
        except Overdue as err:
            raise LedgerError(f"the ledger: {err}") from None

    def read(self, shard: str, timeout: float | None = None) -> tuple[list[Entry], object]:
        """The shard's entries and what to write it back with (None: absent)."""
        from lightkube.core.exceptions import ApiError
        from lightkube.resources.core_v1 import ConfigMap

        try:
            configmap = self._call("get", timeout, res=ConfigMap, name=self.name(shard), namespace=self.namespace)
        except ApiError as err:
            if err.status.code == 404:
                return [], None
            raise LedgerError(f"cannot read the ledger shard {self.namespace}/{self.name(shard)}: "
                              f"{err.status.code} {err.status.message}") from None
        return decode((configmap.data or {}).get(DATA_KEY)), configmap

    def write(self, shard: str, entries: list[Entry], read: object, timeout: float | None = None) -> None:
        from lightkube.core.exceptions import ApiError
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import ConfigMap

        data = {DATA_KEY: encode(entries)}
        try:
            if read is None:
                created = ConfigMap(metadata=ObjectMeta(
                    name=self.name(shard), namespace=self.namespace,
                    labels={"app.kubernetes.io/name": "cozyrender-webhook",
                            "app.kubernetes.io/component": "ledger"}), data=data)
                self._call("post", timeout, obj=created, namespace=self.namespace)
            else:
                read.data = dict(read.data or {}, **data)  # metadata.resourceVersion: the CAS
                self._call("put", timeout, obj=read, namespace=self.namespace)
        except ApiError as err:
            if err.status.code == 409:
                raise Conflict() from None
            raise LedgerError(f"cannot write the ledger shard {self.namespace}/{self.name(shard)}: "
                              f"{err.status.code} {err.status.message}") from None


class MemoryShards:
    """Shards in memory with the same compare-and-swap (tests, benchmarks)."""

    def __init__(self) -> None:
        self.shards: dict[str, tuple[int, str]] = {}
        self.lock = threading.Lock()
        self.writes = 0

    def read(self, shard: str, timeout: float | None = None) -> tuple[list[Entry], object]:
        with self.lock:
            version, text = self.shards.get(shard, (0, ""))
        return decode(text), version

    def write(self, shard: str, entries: list[Entry], read: object, timeout: float | None = None) -> None:
        with self.lock:
            if self.shards.get(shard, (0, ""))[0] != read:
                raise Conflict()
            self.shards[shard] = (int(read) + 1, encode(entries))  # type: ignore[call-overload]
            self.writes += 1

    def entries(self) -> list[Entry]:
        with self.lock:
            return [entry for _, text in self.shards.values() for entry in decode(text)]


# -- the decisions ---------------------------------------------------------------------

class Arbiter:
    """Decides AdmissionReviews against the cache's index, the ledger's
    reservations and the request's own objects (the `/validate` route)."""

    def __init__(self, index: LiveIndex, lock: threading.Lock, metrics: Metrics, ledger=None,
                 seen: Callable[[str, int], bool] = lambda uid, generation: False,
                 unreadable: Callable[[], dict] = dict, ttl: float = DEFAULT_TTL, timeout: float = deadlines.TIMEOUT,
                 platform_vgpu: bool | None = None, clock: Callable[[], float] = time.time,
                 settle: float = DEFAULT_SETTLE, lookup: Callable[[tuple], Mapping | None] | None = None,
                 known_since: Callable[[str], float | None] = lambda kind: None,
                 monotonic: Callable[[], float] = time.monotonic, release_in_background: bool = True) -> None:
        self.index, self.lock, self.metrics, self.ledger = index, lock, metrics, ledger
        self.seen, self.unreadable, self.known_since = seen, unreadable, known_since
        self.ttl, self.timeout, self.platform_vgpu, self.clock = ttl, timeout, platform_vgpu, clock
        self.settle, self.lookup, self.monotonic = settle, lookup, monotonic
        self.release_in_background = release_in_background
        self._turns: dict[str, list] = {}  # topmost shard -> [its lock, how many wait on it]
        self._turns_lock = threading.Lock()

    def __call__(self, body: object) -> dict:
        try:
            review = admission.read_review(body)
        except admission.ReviewError as err:
            return admission.envelope(admission.cannot_decide(None, err.uid, str(err)))
        if not review.checked:
            return admission.envelope(admission.allow(review.uid))
        return admission.envelope(self.decide(review))

    def deadline(self) -> deadlines.Deadline:
        """The current call's deadline (set by the server), else one from now."""
        return deadlines.current() or deadlines.Deadline.after(self.timeout, clock=self.monotonic)

    def decide(self, review: admission.Review) -> dict:
        limit = self.deadline()
        try:
            obj = admission.written_object(review)
            if (door_kind(obj) is not None or is_claim_template(obj)) and not self._holds_gpus(obj):
                return admission.answer(review, self._check(review, obj, None, []))  # no GPU: nothing to hold back
            with self.lock:  # only the writes whose pools hold an unreadable object (issue 28 item 2)
                why = admission.unreadable_bearing(self.index.state, self.unreadable(), obj)
            if why is not None:
                return admission.cannot_decide(review, review.uid, why)
            old = dict(review.old) if review.old is not None and review.operation == "UPDATE" else None
            if review.operation == "CREATE":
                with self.lock:
                    exists = self.index.get(obj) is not None
                if exists:
                    return admission.refuse(
                        review.uid, f"{review.display()} already exists: a create of a name the cluster holds is "
                        "refused, as the API server would refuse it (if it was just deleted, try again)",
                        ALREADY_EXISTS, review)
            if not grows(obj, old) or self.ledger is None or not self._holds_gpus(obj):
                return admission.answer(review, self._check(review, obj, old, []))
            return self._reserve(review, obj, old, limit)
        except ShapeError as err:
            return admission.unreadable(review, err)
        except LedgerError as err:
            return admission.cannot_decide(review, review.uid, str(err))
        except Exception as err:  # fail closed, saying why
            return admission.cannot_decide(review, review.uid, f"{type(err).__name__}: {err}")

    def _holds_gpus(self, obj: dict) -> bool:
        """False for a door (`budgets.doors`) holding no device of any class
        in a tenant namespace, and for a ResourceClaimTemplate (the claims
        made from it hold the devices): nothing to reserve, so no ledger entry."""
        if is_claim_template(obj):
            return False
        if door_kind(obj) is None:
            return True
        if obj.get("kind") == "Pod":  # by name first: a pod naming no class's resource holds no GPU
            with self.lock:
                if not extended_resource_names(obj) & self.index.state.class_resources.keys():
                    return False
        door = read_door(obj)
        if not is_tenant_namespace(door.namespace) or not door.devices:
            return False
        with self.lock:
            return bool(resolve(self.index.state, door).entries)

    def _reserve(self, review: admission.Review, obj: dict, old: dict | None, limit: deadlines.Deadline) -> dict:
        """The decision of a growing write, with its entry written to its
        shards. Within this process, writes sharing a shard take turns (by
        the topmost shard of their chain: two chains that share any shard
        share their topmost one), so only other replicas' writes cause 409s.
        A turn is waited for at most until the deadline."""
        wanted = self._judge(review, obj, old, [])[1]
        top = min(wanted, key=shard_order) if wanted else ""
        with self._turn(top, limit) as got:
            if not got:
                return admission.cannot_decide(review, review.uid, f"{review.display()} was not decided within "
                                               f"{limit.said()}: other writes of pool {top} held this replica's "
                                               "turn; nothing was reserved; try again")
            return self._reserve_in_turn(review, obj, old, limit)

    @contextmanager
    def _turn(self, shard: str, limit: deadlines.Deadline):
        with self._turns_lock:
            lock = self._turns.setdefault(shard, [threading.Lock(), 0])
            lock[1] += 1
        got = False
        try:
            got = lock[0].acquire(timeout=limit.remaining())
            yield got
        finally:
            if got:
                lock[0].release()
            with self._turns_lock:
                lock[1] -= 1
                if not lock[1]:
                    del self._turns[shard]

    def _late(self, review: admission.Review, limit: deadlines.Deadline, written: Iterable[str],
              spent: Mapping[str, float] | None = None) -> dict:
        """The refusal of a decision the deadline overtook, saying where the time went (`spent`:
        seconds by step, the rest before the ledger: the request's wait and reading, the
        checks); what it wrote is released."""
        self._release(written, review.uid)
        where = ""
        if spent is not None:
            used = limit.timeout - deadlines.margin(limit.timeout) + (self.monotonic() - limit.at)
            steps = ", ".join(f"{step} {value:g}" if step == "conflicts" else f"{step} {value:.2f} s"
                              for step, value in spent.items() if value)
            where = f" ({used:.2f} s since it arrived" + (f"; {steps}" if steps else "") + ")"
        return admission.cannot_decide(review, review.uid, f"{review.display()} was not decided within "
                                       f"{limit.said()}{where}: the reservation ledger answered too slowly or "
                                       "was contended; nothing was reserved; try again")

    def _reserve_in_turn(self, review: admission.Review, obj: dict, old: dict | None,
                         limit: deadlines.Deadline) -> dict:
        entry = self._entry(review, obj)
        if entry.size() > MAX_ENTRY_BYTES:
            return admission.refuse(review.uid, f"{review.display()} cannot be reserved: the fields the GPU budget "
                                    f"rules read take more than {MAX_ENTRY_BYTES} bytes", admission.INVALID, review)
        written: set[str] = set()  # shards holding this request's entry from an earlier try
        touching = ""
        spent = {"reads": 0.0, "sifting": 0.0, "writes": 0.0, "conflicts": 0.0}
        try:
            while True:
                if limit.expired():
                    return self._late(review, limit, written, spent)
                read: dict[str, tuple[list[Entry], object]] = {}
                wanted = self._judge(review, obj, old, [])[1]
                while True:
                    for shard in sorted(wanted - read.keys(), key=shard_order):
                        started, clock = time.perf_counter(), self.monotonic()
                        read[shard] = self.ledger.read(shard, timeout=limit.remaining())
                        spent["reads"] += self.monotonic() - clock
                        self.metrics.ledger_seconds.labels("read").observe(time.perf_counter() - started)
                    clock = self.monotonic()
                    kept, live = self._sift(read, entry.identity, review.uid, limit)
                    spent["sifting"] += self.monotonic() - clock
                    decision, needed = self._judge(review, obj, old, live)
                    if needed <= read.keys():
                        break
                    wanted = needed | read.keys()
                self.metrics.ledger_entries.set(len(live))
                if not decision.allowed or review.dry_run:
                    self._release(written, review.uid)
                    return admission.answer(review, decision)
                mine = {shard: replacing(entries, entry, old) for shard, entries in kept.items()}
                full = self._full(review, entry, mine)
                if full is not None:
                    self._release(written, review.uid)
                    return full
                try:
                    for shard in sorted(read, key=shard_order):
                        if limit.expired():
                            return self._late(review, limit, written, spent)
                        started, clock = time.perf_counter(), self.monotonic()
                        touching = shard
                        try:
                            self.ledger.write(shard, mine[shard] + [entry], read[shard][1],
                                              timeout=limit.remaining())
                        finally:
                            spent["writes"] += self.monotonic() - clock
                        written.add(shard)
                        touching = ""
                        self.metrics.ledger_seconds.labels("write").observe(time.perf_counter() - started)
                    if limit.expired():  # answered too late: the API server has refused it already
                        return self._late(review, limit, written, spent)
                    self.metrics.ledger_writes.inc()
                    return admission.answer(review, decision)
                except Conflict:
                    touching = ""
                    spent["conflicts"] += 1
                    self.metrics.ledger_conflicts.inc()
                    entry = self._entry(review, obj)
        except LedgerError:
            # A write that failed or ran out of time may have been stored all the same.
            self._release(written | ({touching} if touching else set()), review.uid)
            raise

    def _release(self, shards: Iterable[str], request: str) -> None:
        """Take request `request`'s entries out of `shards` (it was refused
        or answered too late): on a thread of its own after the answer, or
        at once (`release_in_background=False`), trying for at most
        RELEASE_TIME seconds; an entry it cannot take out stays until it is
        released as never stored."""
        shards = sorted(set(shards), key=shard_order)
        if not shards or not request:
            return
        if self.release_in_background:
            threading.Thread(target=self._release_now, args=(shards, request), name="ledger-release",
                             daemon=True).start()
        else:
            self._release_now(shards, request)

    def _release_now(self, shards: list[str], request: str) -> None:
        limit = deadlines.Deadline(self.monotonic() + RELEASE_TIME, RELEASE_TIME, self.monotonic)
        for shard in shards:
            while not limit.expired():
                try:
                    entries, version = self.ledger.read(shard, timeout=limit.remaining())
                    left = [entry for entry in entries if entry.request != request]
                    if len(left) != len(entries):
                        self.ledger.write(shard, left, version, timeout=limit.remaining())
                    break
                except Conflict:
                    continue
                except Exception:  # noqa: BLE001 - it stays until released as never stored
                    break

    def _sift(self, read: Mapping[str, tuple[list[Entry], object]], own: tuple, request: str,
              limit: deadlines.Deadline | None = None) -> tuple[dict[str, list[Entry]], list[Entry]]:
        """Per shard, the entries to keep writing (those this replica's watch
        shows stored once `settle` has passed, those known never stored and
        this request's own from an earlier try dropped; never one by its age
        alone), and the entries to lay over the view (kept, not yet seen by
        this replica's watch, of another identity than the write's)."""
        now = self.clock()
        released: set[tuple] = set()
        looked: dict[tuple, bool] = {}
        kept: dict[str, list[Entry]] = {}
        live: dict[tuple, Entry] = {}
        for shard, (entries, _) in read.items():
            kept[shard] = []
            for entry in sorted(entries, key=lambda each: each.admitted):  # the oldest are looked up first
                key = (entry.identity, entry.request, entry.admitted)
                if key in released or (request and entry.request == request):
                    continue
                if self._caught_up(entry):
                    if now - entry.admitted <= self.settle:  # other replicas' watches may lag behind
                        kept[shard].append(entry if entry.seen_at else replace(entry, seen_at=now))
                    continue
                if self._listed_after(entry):
                    released.add(key)
                    continue
                if key not in looked and entry.admitted + self.settle <= now and self.lookup is not None \
                        and len(looked) < MAX_RELEASE_LOOKUPS and (limit is None or limit.remaining() > LOOKUP_TIME):
                    looked[key] = self._never_stored(entry)
                if looked.get(key):
                    released.add(key)
                    continue
                kept[shard].append(entry)
                if entry.identity != own:
                    live[key] = entry
        return kept, list(live.values())

    def _listed_after(self, entry: Entry) -> bool:
        """Whether this replica's cache listed the entry's kind after its
        write was decided (`settle` after its admission), or after another
        replica's watch showed it stored or deleted (`seen_at`, stamped by
        that replica's next write of the shard), and does not show it: then
        it was never stored, or was deleted before that list, or the list
        holds it as stored (a replica started after the write: issue 34's
        restart)."""
        since = self.known_since(entry.identity[1]) if entry.uid else None
        if since is None:
            return False
        return entry.admitted + self.settle <= since or bool(entry.seen_at and entry.seen_at <= since)

    def _never_stored(self, entry: Entry) -> bool:
        """Whether the API server shows the entry's write is not stored and
        the watched view holds what is: no object at its identity, one at an
        older generation of its uid, or one of another uid this replica's
        watch already shows (the entry's was never stored, or since deleted)."""
        try:
            found = self.lookup(entry.identity)
        except Exception:
            return False  # unknown: keep it
        if found is None:
            return True
        meta = found.get("metadata") or {}
        generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
        if entry.uid and meta.get("uid") != entry.uid:
            return self.seen(str(meta.get("uid") or ""), generation)
        return bool(entry.uid) and generation < entry.generation

    def _full(self, review: admission.Review, entry: Entry, kept: Mapping[str, list[Entry]]) -> dict | None:
        """A refusal when the write's tenant subtree already holds its share
        of a shard's in-flight objects (admitted, not yet seen stored), or the
        shard is full; never saying what others hold. Objects are counted,
        not attempts: the write's own object counts once whatever its earlier
        attempts (`replacing` kept at most MAX_VERSIONS of its versions)."""
        for shard, entries in kept.items():
            mine = group_of(shard, _anchor(entry))
            same = [other for other in entries if group_of(shard, _anchor(other)) == mine
                    and other.identity != entry.identity and not self._caught_up(other)]
            objects = {other.identity for other in same}
            tenants = {key for key in objects if key[1] == "Tenant"}
            versions = [other for other in entries if other.identity == entry.identity]
            if len(objects) >= MAX_GROUP_ENTRIES or sum(other.size() for other in same) + entry.size() > MAX_GROUP_BYTES \
                    or (entry.identity[1] == "Tenant" and len(tenants) >= MAX_GROUP_TENANTS):
                return admission.cannot_decide(review, review.uid, f"too many writes of {mine} are in flight "
                                               f"in pool {shard}; try again once they are stored")
            if len(versions) >= MAX_VERSIONS:
                return admission.cannot_decide(review, review.uid, f"{MAX_VERSIONS} other versions of "
                                               f"{review.display()} are in flight; try again once they are stored")
            if len(encode(entries)) + entry.size() > MAX_SHARD_BYTES:
                return admission.cannot_decide(review, review.uid, f"pool {shard} has too many writes in flight; "
                                               "try again in a few seconds")
        return None

    def _entry(self, review: admission.Review, obj: dict) -> Entry:
        meta = obj.get("metadata") or {}
        generation = meta.get("generation")
        now = self.clock()
        return Entry(identity(obj), str(meta.get("uid") or ""), generation if isinstance(generation, int) else 0,
                     projection(obj), now, now + self.ttl, review.uid)

    def _caught_up(self, entry: Entry) -> bool:
        """Whether this replica's watch already shows the entry's write."""
        if entry.uid:
            return self.seen(entry.uid, entry.generation)
        with self.lock:
            cached = self.index.get(entry.obj)
        return cached is not None and projection(cached)["spec"] == entry.obj.get("spec")

    def _check(self, review: admission.Review, obj: dict, old: dict | None, entries: Iterable[Entry]):
        """check_write's decision over the view `_judge` builds."""
        return self._judge(review, obj, old, entries)[0]

    def _judge(self, review: admission.Review, obj: dict, old: dict | None, entries: Iterable[Entry]):
        """check_write on the watched view with `entries` and `old` (UPDATE)
        laid over it, reverted after; and the shards the write takes in that
        view. Each pending identity counts as `effective` says, except a
        Tenant whose versions differ in the keys they declare (a pool root
        appearing, a key a subtree escapes by): the write must fit with each
        of its versions in view, every combination of them."""
        anchor = anchor_of(obj)
        own = identity(obj)
        pending: dict[tuple, list[dict]] = {}
        for entry in entries:
            if entry.identity != own:
                pending.setdefault(entry.identity, []).append(entry.obj)
        fixed, choices = [], []
        with self.lock:
            state = self.index.state
            pools = set(chain(state, anchor)) | set(chain(state, parent_namespace(anchor))) if pending else set()

            def held() -> Iterable[str]:  # every namespace of the view: walked only when a pending Tenant needs it
                return itertools.chain(state.reserved, state.declarations, state.usage,
                                       (key[2] for key in pending if key[1] != "Tenant"))

            for versions in pending.values():
                stored = self.index.get(versions[0])
                if versions[0]["kind"] == "Tenant" and _declares_differently(versions, stored) \
                        and _bears_on(state, versions[0], anchor, pools, held,
                                      anchor if obj.get("kind") == "Tenant" else None):
                    choices.append([None] + versions)  # None: as the watched view holds it
                else:
                    fixed.append(effective(versions, stored, anchor))
        combinations = 1
        for choice in choices:
            combinations *= len(choice)
        if combinations > MAX_COMBINATIONS:
            raise LedgerError("too many Tenant changes are in flight in this pool to decide it; try again in a "
                              "few seconds")
        shards: set[str] = set()
        decision = None
        for combination in itertools.product(*choices):
            laid = fixed + [version for version in combination if version is not None]
            with self._overlaid(laid, old if review.operation == "UPDATE" else None):
                decision = check_write(self.index.state, obj, platform_vgpu=self.platform_vgpu)
                shards |= shards_of(self.index.state, obj, old)
            if not decision.allowed:
                break
        return decision, shards

    @contextmanager
    def _overlaid(self, laid: list[dict], old: dict | None):
        with self.lock:
            undo: list[tuple[Mapping, Mapping | None]] = []
            try:
                for version in laid:
                    self._put(version, undo)
                if old is not None:
                    cached = self.index.get(old)
                    if not _same(cached, old):  # the watch lags behind the stored object
                        self._put(old, undo)
                yield
            finally:
                for probe, previous in reversed(undo):
                    if previous is None:
                        self.index.remove(probe)
                    else:
                        self.index.upsert(previous)

    def _put(self, obj: Mapping, undo: list) -> None:
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
