"""Metrics to bill and alert on, in Prometheus' text format, named as
kube-state-metrics names its series (`<prefix>_<object>_<field>`, a
`type` label for the sides of a quota as `kube_resourcequota` has them, a
`condition`/`status` pair as `kube_<object>_status_condition` has them).

Who exports what (so a PromQL sum over replicas never counts twice):
- every replica: `cozyrender_controller_leader` (1 on the leader, 0 on a
  standby) and `cozyrender_controller_info`;
- the leader alone: every per-tenant, per-class and audit series below. A
  standby exports none of them; after a failover the new leader exports
  them from its own first lists.

Per tenant namespace and budget key (the pool tree, `cozyrender tree -o json`,
computed from the leader's watches by the same library calls):
    cozyrender_tenant_budget{namespace,tenant,key,quota_key,key_type,type}
        type="hard"        the budget the tenant declares
        type="used"        what its pool reserves (GPU: VMs and worker pools) or uses (ordinary)
        type="carved_out"  what sub-tenants carve out of it
        type="left"        what is left (may be negative)
    cozyrender_tenant_budget_over_committed{namespace,tenant,key}  1 when the pool is over budget
    cozyrender_tenant_budget_unknown{namespace,tenant}   1 when its figures cannot be computed
    cozyrender_tenant_tree_error                         1 when any figure cannot be computed
GPU figures are devices; ordinary ones are the quantity's value (cores, bytes).

An object the rules cannot read (issue 34 item 7) is left out of the state,
as the webhook leaves it out (`budgets.unreadable`): the namespaces whose
decisions it bears on (its own pools, the subtree a Tenant or Namespace of
it holds) lose their per-tenant series and get `..._budget_unknown 1`;
every other tenant's series stay. A hoster's object (a GPUClass, the
tenant-root Namespace or its values Secret) bears on every namespace.

Per GPU class (the status controller's figures, `cozyrender catalog`'s):
    cozyrender_gpuclass_nodes{gpuclass,resource}
    cozyrender_gpuclass_allocatable_units{gpuclass,resource}
    cozyrender_gpuclass_free_units{gpuclass,resource}
    cozyrender_gpuclass_conflict{gpuclass,resource,held_by}   1 in conflict, 0 not
    cozyrender_gpuclass_status_writes_total                     status writes made

Audit (`cozyrender check`'s findings over the whole state):
    cozyrender_audit_findings{kind,severity}
License copies:
    cozyrender_license_copies{gpuclass}    copies present
    cozyrender_license_foreign_secrets     same-named Secrets the copier does not own (left alone)

Device-time, per tenant namespace and GPU class (`controllers.devicetime`:
what is counted, the checkpoint carried in the Lease, the loss bound):
    cozyrender_tenant_reserved_device_seconds_total{tenant,class}
    cozyrender_tenant_allocated_device_seconds_total{tenant,class}
`tenant` is the namespace (not `namespace`, which a scrape object's target
labels would clash with); the figures are recomputed at each change the
watches see (and at a scrape), from the same pool tree as the series above.

The pure part (`budget_samples`, `class_samples`, `render`) takes the tree
and figures and returns text; the watcher and exporter are the I/O shell.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from fractions import Fraction

from cozyrender.controllers import devicetime
from cozyrender.kube.client import WATCHED, Watched
from cozyrender.kube.watch import Informer, Selection, list_scope_selection

log = logging.getLogger("cozyrender.controllers.metrics")

Sample = tuple[str, dict[str, str], float]

HELP = {
    "cozyrender_controller_leader": ("gauge", "1 on the replica holding the controller Lease, 0 on a standby"),
    "cozyrender_controller_info": ("gauge", "The replica's identity in the Lease"),
    "cozyrender_tenant_budget": ("gauge", "A tenant's budget key: hard (declared), used (reserved or used), "
                                 "carved_out (by sub-tenants) and left, by type; leader only"),
    "cozyrender_tenant_budget_over_committed": ("gauge", "1 when the pool of this tenant and key is over budget"),
    "cozyrender_tenant_budget_unknown": ("gauge", "1 when this tenant namespace's figures cannot be computed (an "
                                         "object the rules cannot read bears on its pools; the controller's log "
                                         "names it): its cozyrender_tenant_budget series are missing meanwhile"),
    "cozyrender_tenant_tree_error": ("gauge", "1 when some figures of the pool tree cannot be computed from the "
                                     "cluster's objects (an object the rules cannot read; the controller's log "
                                     "names it): the series of the pools it bears on are missing meanwhile"),
    "cozyrender_gpuclass_nodes": ("gauge", "Eligible nodes of a GPU class"),
    "cozyrender_gpuclass_allocatable_units": ("gauge", "Allocatable units of a GPU class on its eligible nodes"),
    "cozyrender_gpuclass_free_units": ("gauge", "Free units of a GPU class on its eligible nodes"),
    "cozyrender_gpuclass_conflict": ("gauge", "1 when the class's resource name is held by an older class"),
    "cozyrender_gpuclass_status_writes_total": ("counter", "GPUClass status writes made by this leader"),
    "cozyrender_audit_findings": ("gauge", "Audit findings over the whole state, by kind and severity"),
    "cozyrender_license_copies": ("gauge", "vGPU license copies present, by class"),
    "cozyrender_license_foreign_secrets": ("gauge", "Secrets named like a license copy that the copier did not "
                                           "write (never adopted, changed or deleted)"),
    **devicetime.HELP,
}


def _number(value) -> float:
    return float(Fraction(value))


def budget_samples(tree, unknown: Callable[[str], bool] = lambda namespace: False) -> list[Sample]:
    """Per tenant namespace and key, from a `tree.model.Tree`; a namespace
    for which `unknown(namespace)` holds gets `..._budget_unknown 1` instead."""
    samples: list[Sample] = []
    for node in tree.shown():
        if unknown(node.namespace):
            samples.append(("cozyrender_tenant_budget_unknown",
                            {"namespace": node.namespace, "tenant": node.tenant or ""}, 1.0))
            continue
        for row in node.keys:
            labels = {"namespace": node.namespace, "tenant": node.tenant or "", "key": row.key,
                      "quota_key": row.quota_key, "key_type": row.type}
            for kind, value in (("hard", row.budget), ("used", row.used), ("carved_out", row.carved_out),
                                ("left", row.left)):
                samples.append(("cozyrender_tenant_budget", {**labels, "type": kind}, _number(value)))
            samples.append(("cozyrender_tenant_budget_over_committed",
                            {"namespace": node.namespace, "tenant": node.tenant or "", "key": row.key},
                            1.0 if row.over_committed else 0.0))
    return samples


def finding_samples(findings: Iterable) -> list[Sample]:
    counts = Counter((finding.kind, finding.severity) for finding in findings)
    return [("cozyrender_audit_findings", {"kind": kind, "severity": severity}, float(count))
            for (kind, severity), count in sorted(counts.items())]


def class_samples(classes: dict[str, dict], figures: Callable[[str], object]) -> list[Sample]:
    """Per class, from the status controller's index (`ClassIndex.figures`)."""
    from cozyrender.gpuclass.classes import resource_name

    samples: list[Sample] = []
    for name in sorted(classes):
        answer = figures(name)
        if answer.capacity is None:
            continue
        labels = {"gpuclass": name, "resource": resource_name(classes[name])}
        samples += [
            ("cozyrender_gpuclass_nodes", labels, float(answer.capacity.eligible_nodes)),
            ("cozyrender_gpuclass_allocatable_units", labels, _number(answer.capacity.allocatable)),
            ("cozyrender_gpuclass_free_units", labels, _number(answer.capacity.free)),
            ("cozyrender_gpuclass_conflict", {**labels, "held_by": answer.conflict.holder if answer.conflict else ""},
             1.0 if answer.conflict else 0.0),
        ]
    return samples


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def render(samples: Iterable[Sample]) -> bytes:
    """Prometheus' text exposition format 0.0.4, series grouped under their HELP and TYPE."""
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(sample[0], []).append(sample)
    lines = []
    for name, group in grouped.items():
        kind, text = HELP[name]
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for _, labels, number in group:
            inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
            lines.append(f"{name}{{{inner}}} {_value(number)}" if inner else f"{name} {_value(number)}")
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------- the shell

def _keep(watched: Watched) -> Callable[[dict], dict | None]:
    from cozyrender.webhook.cache import compact

    return lambda obj: compact(obj) if watched.keeps(obj) else None


class BudgetWatcher:
    """List+watch of every kind `cozyrender check` reads (kube.client.WATCHED),
    and the pool tree and audit computed from them when a scrape asks and
    something changed since the last one."""

    def __init__(self, make_client: Callable[[], object], platform_vgpu: bool | None = None,
                 devices: devicetime.DeviceTime | None = None) -> None:
        self.platform_vgpu = platform_vgpu
        self.devices = devices  # the device-time totals, fed the figures of every computation
        self._changed = threading.Event()
        self._changed.set()
        self._wake = threading.Event()
        self._first_change: float | None = None  # monotonic moment of the first change not yet computed
        self._cached: tuple[list[Sample], str] | None = None
        self._lock = threading.Lock()
        self.informers = [
            Informer(make_client, watched, self._on_event, selection=list_scope_selection(watched),
                     transform=_keep(watched))
            for watched in WATCHED
        ]

    def _on_event(self, event, new, old) -> None:
        if self._first_change is None:
            self._first_change = time.monotonic()
        self._changed.set()
        self._wake.set()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def run(self, stop: threading.Event) -> None:
        for informer in self.informers:
            informer.start()
        if self.devices is not None:
            threading.Thread(target=self._accrue, args=(stop,), name="device-time", daemon=True).start()
        stop.wait()
        for informer in self.informers:
            informer.stop()

    def _accrue(self, stop: threading.Event) -> None:
        """Compute at each change once synced, so the device-time figures
        change when the state does (not only at a scrape)."""
        while not stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            if stop.is_set() or not self.synced():
                continue
            try:
                self.samples()
            except Exception as err:  # noqa: BLE001 - no tree at all: the figures stay as they were
                log.warning("the pool tree cannot be computed: %s", err)

    def objects(self) -> list[dict]:
        return [obj for informer in self.informers for obj in list(informer.store.values())]

    def samples(self) -> list[Sample]:
        """The tree's and the audit's samples, `cozyrender_tenant_tree_error`
        included; recomputed only after a change. Raises when no tree can be
        computed at all (a state no object's removal makes readable)."""
        with self._lock:
            if self._cached is not None and not self._changed.is_set():
                return self._cached[0]
            self._changed.clear()
            at, self._first_change = self._first_change or time.monotonic(), None
            objects = self.objects()
            try:
                samples, state, tree, unknown = _tree_figures(objects, self.platform_vgpu)
            except Exception:
                self._changed.set()  # try again at the next scrape
                raise
            if self.devices is not None:
                pods = [obj for obj in objects if obj.get("kind") == "Pod"]
                self.devices.update(at, {**devicetime.reserved_figures(tree),
                                         **devicetime.allocated_figures(state, pods)}, keep=unknown)
            self._cached = (samples, "")
            return samples


def tree_samples(objects: list[dict], platform_vgpu: bool | None = None) -> list[Sample]:
    """The pool tree's and the audit's samples of `objects`, each object the
    rules cannot read left out with the series of the namespaces it bears
    on (the rule above). Raises the ShapeError of a state that stays
    unreadable (two copies of one object, two Tenants owning a namespace,
    more than MAX_LEFT_OUT objects left out)."""
    return _tree_figures(objects, platform_vgpu)[0]


def _tree_figures(objects: list[dict], platform_vgpu: bool | None = None):
    """(samples, the indexed state, the tree, whether a namespace's figures are unknown): `tree_samples`'s,
    over the tree the GPUBudget writer reads too (`tree.objects.computed_tree`)."""
    from cozyrender.budgets.unreadable import described
    from cozyrender.tree.objects import computed_tree

    computed = computed_tree(objects, platform_vgpu)
    for item in computed.left_out:
        log.warning("left out of the metrics' pool tree: %s", described(item))

    def unknown(namespace: str) -> bool:  # what a write in `namespace` would read holds one of them
        return computed.problem(namespace) is not None

    samples = (budget_samples(computed.tree, unknown) + finding_samples(computed.findings)
               + [("cozyrender_tenant_tree_error", {}, 1.0 if computed.left_out else 0.0)])
    return samples, computed.state, computed.tree, unknown


class Exporter:
    """What `/metrics` answers, on every replica."""

    def __init__(self) -> None:
        self.status = None
        self.licenses = None
        self.budgets = None
        self.devices: devicetime.DeviceTime | None = None  # the device-time totals (the `metrics` controller's)

    def text(self, manager) -> bytes:
        leader = manager.leading
        samples: list[Sample] = [
            ("cozyrender_controller_leader", {}, 1.0 if leader else 0.0),
            ("cozyrender_controller_info", {"identity": manager.elector.identity}, 1.0),
        ]
        if leader:
            if self.status is not None and self.status.synced():
                with self.status.lock:
                    samples += class_samples(dict(self.status.index.classes), self.status.index.figures)
                samples.append(("cozyrender_gpuclass_status_writes_total", {}, float(self.status.writes)))
            if self.budgets is not None and self.budgets.synced():
                try:
                    samples += self.budgets.samples()
                except Exception as err:  # noqa: BLE001 - no tree at all: the other figures still go out
                    log.warning("the pool tree cannot be computed: %s", err)
                    samples.append(("cozyrender_tenant_tree_error", {}, 1.0))
            if self.licenses is not None and self.licenses.synced():
                samples += self.licenses.samples()
            if self.devices is not None:
                samples += self.devices.samples()
        return render(samples)
