"""Device-time: the GPU devices each tenant holds, integrated over time into
the counters a hoster bills on, exported by the controller's leader
(`controllers.metrics`) and carried from one leader to the next in the
Lease it renews anyway (`controllers.lease`, `record`).

Figures, per tenant namespace and GPU class, a count of devices:
- reserved: what is reserved there through every door the budget checks,
  the pool tree's own per-namespace figure (`tree.model.Node.reserved`:
  each chain of holders charged once, at its head; what `used` sums);
- allocated: what its pods hold on nodes: each pod bound to a node
  (`spec.nodeName`) in phase Running, its devices as the doors read them
  (`budgets.doors`: the effective extended resources of `kube.pods`),
  each resource name counted under the class holding it
  (`budgets.holders.resolve`). Only tenant namespaces are billed.

Accrual (`DeviceTime`): devices × seconds, piecewise constant. The totals
are advanced to the moment of each change and of each collect; figures
computed after a change apply from the first change seen since the
previous computation. A namespace whose figures cannot be computed (an
object the rules cannot read bears on it) keeps its last figures.

The checkpoint, and why the counters never decrease. Every Lease write
the elector makes (acquire, renewal every retry period, release) carries
the annotation `cozyrender.io/device-seconds`: the totals advanced to the
write, plus `projectedSeconds` × the current figures (the renew deadline
on a renewal: a leader whose last renewal is that old no longer holds the
Lease, and another takes it no earlier; 0 on the release, after which it
exports nothing).
A replica never exports more than the checkpoint the Lease may hold (the
last one confirmed, or smaller when a later write's outcome is unknown),
and a new leader starts from the stored checkpoint: so no value exported
by any leader is ever above what the next one starts from, and
`increase()` never sees a false reset (which would count the whole total
again).

The bound. A new leader applies its first figures from the moment it saw
the taken-over record last change plus that record's projection (the old
leader counted up to its write plus the projection, and wrote no later
than the new leader saw it). With the devices unchanged during the
handover, what is lost is the time between the old leader's last write
and the new leader seeing it: at most one retry period plus one request
(2 s with the defaults), which is less than one lease duration
(15 s). Devices that change during the handover are counted at the
figures of either side of it (the old leader's projected, the new
leader's first), never twice over the same seconds.

Pure state, no I/O: the shell is `controllers.metrics.BudgetWatcher`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger("cozyrender.controllers.devicetime")

ANNOTATION = "cozyrender.io/device-seconds"
MAX_CHECKPOINT = 200_000  # bytes: a Lease's annotations may hold 256 KiB in all
KINDS = ("reserved", "allocated")
METRICS = {kind: f"cozyrender_tenant_{kind}_device_seconds_total" for kind in KINDS}
HELP = {
    METRICS["reserved"]: ("counter", "Devices reserved by a tenant namespace in a GPU class (through every door the "
                                     "budget checks), integrated over time, in device-seconds; leader only, carried "
                                     "across leaders"),
    METRICS["allocated"]: ("counter", "Devices of a GPU class held by a tenant namespace's Running pods on nodes, "
                                      "integrated over time, in device-seconds; leader only, carried across leaders"),
}

Key = tuple[str, str, str]  # (kind, tenant namespace, class)


def reserved_figures(tree) -> dict[Key, int]:
    """The tree's per-namespace reservations (`Node.reserved`) by class."""
    return {("reserved", node.namespace, gpu_class): count
            for node in tree.shown() for gpu_class, count in node.reserved.items() if count}


def allocated_figures(state, pods: Iterable[Mapping]) -> dict[Key, int]:
    """The devices of each class held by Running pods bound to a node, per tenant namespace."""
    from cozyrender.budgets.doors import read_door
    from cozyrender.budgets.holders import resolve
    from cozyrender.namespaces import is_tenant_namespace
    from cozyrender.kube.shape import ShapeError

    found: dict[Key, int] = {}
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        if status.get("phase") != "Running" or not spec.get("nodeName") or not is_tenant_namespace(namespace):
            continue
        try:
            door = read_door(pod)
        except ShapeError:  # left out of the state by the index too (`budgets.unreadable`)
            continue
        for gpu_class, count in resolve(state, door).reservations.items():
            key = ("allocated", namespace, gpu_class)
            found[key] = found.get(key, 0) + count
    return found


def _encode(values: Mapping[Key, float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {kind: {} for kind in KINDS}
    for (kind, tenant, gpu_class), value in sorted(values.items()):
        out[kind][f"{tenant}/{gpu_class}"] = value
    return out


def decode(text: str | None) -> tuple[dict[Key, float], float] | None:
    """(totals, projected seconds) of a checkpoint annotation; None when
    absent or unreadable (then a leader starts from zero, and says so)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        projected = float(data["projectedSeconds"])
        totals = {}
        for kind in KINDS:
            for series, value in data[kind].items():
                tenant, _, gpu_class = series.partition("/")
                totals[(kind, tenant, gpu_class)] = float(value)
        if projected < 0 or any(not value >= 0 for value in totals.values()):
            raise ValueError("negative figures")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        log.error("the device-time checkpoint in the Lease cannot be read (%s): the counters start from zero", err)
        return None
    return totals, projected


class DeviceTime:
    """The leader's running totals (see the module's rules). `projection`:
    the seconds a renewal's checkpoint counts ahead (the renew deadline)."""

    def __init__(self, projection: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.projection = projection
        self.clock = clock
        self._lock = threading.Lock()
        self._totals: dict[Key, float] = {}
        self._rates: dict[Key, int] | None = None  # None until the first figures
        self._last = 0.0  # monotonic moment the totals are advanced to
        self._start: float | None = None  # when the first figures apply from (a taken-over record's)
        self._cap: dict[Key, float] = {}  # the least the Lease may hold

    # -- the Lease (`LeaderElector.record`)

    def inherit(self, annotations: Mapping[str, str], changed_at: float) -> None:
        """Start from the checkpoint of the record being taken over."""
        with self._lock:
            if self._rates is not None:
                return  # already counting (never happens: one tenure per process)
            found = decode(annotations.get(ANNOTATION))
            totals, projected = found if found is not None else ({}, None)
            self._totals, self._cap = dict(totals), dict(totals)
            self._start = None if projected is None else changed_at + projected

    def annotations(self, releasing: bool = False) -> dict[str, str]:
        """The checkpoint for the write being made ({} before the first
        figures: the record taken over stays as it is)."""
        with self._lock:
            if self._rates is None:
                return {}
            now = self.clock()
            self._advance(now)
            ahead = 0.0 if releasing else self.projection
            checkpoint = {key: value + self._rates.get(key, 0) * ahead for key, value in self._totals.items()}
            text = json.dumps({"projectedSeconds": ahead, **_encode(checkpoint)}, sort_keys=True,
                              separators=(",", ":"))
            if len(text) > MAX_CHECKPOINT:
                log.error("the device-time checkpoint (%d bytes) is larger than %d: not written, the counters stay "
                          "at the last one", len(text), MAX_CHECKPOINT)
                return {}
            self._cap = {key: min(value, checkpoint[key]) for key, value in self._cap.items() if key in checkpoint}
            return {ANNOTATION: text}

    def written(self, annotations: Mapping[str, str]) -> None:
        """The API server stored `annotations`: the cap is what they hold."""
        found = decode(annotations.get(ANNOTATION))
        if found is not None:
            with self._lock:
                self._cap = dict(found[0])

    # -- the figures

    def _advance(self, now: float) -> None:
        elapsed = now - self._last
        if elapsed > 0 and self._rates:
            for key, devices in self._rates.items():
                self._totals[key] = self._totals.get(key, 0.0) + devices * elapsed
        self._last = max(self._last, now)

    def update(self, at: float, figures: Mapping[Key, int], keep: Callable[[str], bool] = lambda tenant: False) -> None:
        """New figures, applying from monotonic moment `at` (a series whose
        tenant `keep` names keeps its current figure)."""
        with self._lock:
            rates = {key: count for key, count in figures.items() if count and not keep(key[1])}
            rates.update((key, count) for key, count in (self._rates or {}).items() if keep(key[1]))
            if self._rates is None:  # the first figures apply from the taken-over record's end, if earlier
                self._last = self._start if self._start is not None and self._start < at else at
                self._rates = rates
            self._advance(max(at, self._last))
            self._rates = rates
            for key in rates:
                self._totals.setdefault(key, 0.0)

    def counting(self) -> bool:
        return self._rates is not None

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        """The counters now, never above the cap (see the module's rules)."""
        with self._lock:
            if self._rates is None:
                return []
            self._advance(self.clock())
            return [(METRICS[kind], {"tenant": tenant, "class": gpu_class},
                     min(value, self._cap.get((kind, tenant, gpu_class), 0.0)))
                    for (kind, tenant, gpu_class), value in sorted(self._totals.items())]
