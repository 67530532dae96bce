"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
leaderelection package does it: one writer across replicas.

Rules (client-go's, with its default timings):
- a candidate takes the Lease when it has no holder, or when the record it
  last observed has not changed for `lease_duration` seconds *by its own
  clock* (the holder's renewTime is never compared with the local clock, so
  clock skew between nodes does not matter);
- every write is an update at the resourceVersion read (optimistic
  concurrency): of two candidates, the API server lets one win;
- the leader renews every `retry_period`; when it has not renewed for
  `renew_deadline` it stops leading (`on_stopped` is called; the
  `cozyrender controller` command then exits, so a Deployment restarts it
  as a candidate, as controller-runtime does);
- one leader at a time (issue 34 item 6): every attempt is bounded by the
  renew deadline (each GET, PUT or POST gets the time left until the
  last renewal's start plus `renew_deadline`, so an API server that hangs
  cannot keep an attempt going past it), and a renewal counts from the
  moment its attempt started (the record written can be no older). `holds()`
  is true only while that moment is less than `renew_deadline` ago: the
  others take over no earlier than `lease_duration` after they saw the
  record change, which is later still, so a leader stops acting (`Fenced`
  refuses its controllers' writes) before its lease can expire, even when
  the whole process was paused (SIGSTOP, a frozen VM) and resumes with
  stale threads. Left open, as in client-go: a pause between the check
  and the request leaving (no fencing token exists in the API);
- on a graceful stop the leader releases the Lease (holder emptied, a
  1-second duration), so a standby takes over within `retry_period`.

Takeover after a leader dies without releasing (SIGKILL, node lost): at
most lease_duration + retry_period after its last renewal (17 s with the
defaults 15/10/2). The live test measures it.

A record (`record`, optional) rides on the writes the election makes
anyway, never on writes of its own: `record.annotations(releasing)` is
merged into the Lease's annotations on every acquire, renewal and release
(`releasing` True) write, and
`record.written(annotations)` is called once the API server stored it; a
candidate that takes the Lease over calls `record.inherit(annotations,
changed_at)` first with the annotations of the record it took over and the
monotonic moment it saw that record last change (the device-time
checkpoint, `controllers.devicetime`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from cozyrender.kube.client import Watched, resource

log = logging.getLogger("cozyrender.controllers.lease")

LEASE = Watched("coordination.k8s.io", "v1", "Lease", "leases", True)
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


def micro_time(moment: float | None = None) -> str:
    """A MicroTime as the API server writes it."""
    stamp = datetime.fromtimestamp(time.time() if moment is None else moment, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client, namespace: str, name: str, identity: str,
                 lease_duration: float = LEASE_DURATION, renew_deadline: float = RENEW_DEADLINE,
                 retry_period: float = RETRY_PERIOD,
                 on_started: Callable[[], None] | None = None, on_stopped: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None, record=None) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("lease duration > renew deadline > retry period > 0 is required")
        self.client = client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_started, self.on_stopped, self.on_new_leader = on_started, on_stopped, on_new_leader
        self.record = record
        self.leading = threading.Event()
        self.holder = ""
        self._observed: dict | None = None  # the last spec seen
        self._observed_at = 0.0  # monotonic time it was seen to change
        self._renewed_at: float | None = None  # monotonic start of the last attempt that renewed
        self._stop = threading.Event()

    # ---------------------------------------------------------------- the record

    def _time_left(self, until: float | None) -> float | None:
        if until is None:
            return None
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the renew deadline ({self.renew_deadline:g} s) passed during the attempt")
        return left

    def _get(self, until: float | None = None) -> dict | None:
        from lightkube.core.exceptions import ApiError

        from cozyrender.kube.bounded import call

        try:
            return dict(call(self.client, "get", self._time_left(until), res=resource(LEASE), name=self.name,
                             namespace=self.namespace))
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise

    def holds(self) -> bool:
        """Whether this candidate may act as the leader now: leading, and its
        last renewal started less than `renew_deadline` ago (by the local
        monotonic clock, which runs on while the process is paused)."""
        renewed = self._renewed_at
        return self.leading.is_set() and renewed is not None and time.monotonic() - renewed < self.renew_deadline

    def _spec(self, transitions: int, acquire: str | None) -> dict:
        now = micro_time()
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": acquire or now, "renewTime": now, "leaseTransitions": transitions}

    def _annotate(self, lease: dict, releasing: bool = False) -> dict:
        """The record's annotations merged into `lease` (what is written); {} without a record."""
        if self.record is None:
            return {}
        extra = dict(self.record.annotations(releasing))
        if extra:
            metadata = lease.setdefault("metadata", {})
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **extra}
        return extra

    def try_acquire_or_renew(self, until: float | None = None) -> bool:
        """One attempt, each request of it bounded by monotonic time `until`
        (TimeoutError past it); True while this candidate holds the Lease."""
        from lightkube.core.exceptions import ApiError

        from cozyrender.kube.bounded import call

        lease = self._get(until)
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(0, None)}
            if self.record is not None:
                self.record.inherit({}, time.monotonic())
            written = self._annotate(body)
            try:
                call(self.client, "post", self._time_left(until), obj=resource(LEASE)(body), namespace=self.namespace)
            except ApiError as err:
                if err.status.code == 409:
                    return False
                raise
            self._saw(body["spec"])
            self._written(written)
            return True
        spec = dict(lease.get("spec") or {})
        self._saw(spec)
        holder = spec.get("holderIdentity") or ""
        mine = holder == self.identity
        expired = time.monotonic() > self._observed_at + float(spec.get("leaseDurationSeconds") or 0)
        if holder and not mine and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        new_spec = self._spec(transitions, spec.get("acquireTime") if mine else None)
        lease["spec"] = new_spec
        if self.record is not None and not self.leading.is_set():  # taking over: what the last holder left
            self.record.inherit(dict((lease.get("metadata") or {}).get("annotations") or {}), self._observed_at)
        written = self._annotate(lease)
        try:
            call(self.client, "put", self._time_left(until), obj=resource(LEASE)(lease), namespace=self.namespace)
        except ApiError as err:
            if err.status.code == 409:  # someone else wrote first: read again next round
                return False
            raise
        self._saw(new_spec)
        self._written(written)
        return True

    def _written(self, annotations: dict) -> None:
        if self.record is not None and annotations:
            self.record.written(annotations)

    def _saw(self, spec: dict) -> None:
        if spec != self._observed:
            self._observed = dict(spec)
            self._observed_at = time.monotonic()
            holder = spec.get("holderIdentity") or ""
            if holder != self.holder:
                self.holder = holder
                if self.on_new_leader:
                    self.on_new_leader(holder)

    def keeps_leading(self) -> bool:
        """One round of the leader: renew, unless its last renewal is already
        past the renew deadline (it was paused: no attempt can renew in
        time, and none is made, so it writes nothing); False once it must
        stop leading."""
        if not self.holds():
            return False
        return self._attempt() or self.holds()

    def release(self) -> None:
        """Give the Lease up (graceful stop): a standby takes it at its next try."""
        from lightkube.core.exceptions import ApiError

        try:
            lease = self._get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = dict(lease["spec"])
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time())
            lease["spec"] = spec
            written = self._annotate(lease, releasing=True)
            self.client.replace(resource(LEASE)(lease), namespace=self.namespace)
            self._written(written)
        except (ApiError, OSError) as err:
            log.warning("could not release the lease: %s", err)
        except Exception as err:  # noqa: BLE001 - transport errors on the way out
            log.warning("could not release the lease: %s", err)

    # ---------------------------------------------------------------- the loop

    def _attempt(self) -> bool:
        """One attempt, bounded: a leader's by its renew deadline, a
        candidate's by `renew_deadline` from now. A success records when the
        attempt started (the renewal's time for `holds`)."""
        started = time.monotonic()
        renewed = self._renewed_at if self.leading.is_set() else None
        until = (renewed if renewed is not None else started) + self.renew_deadline
        try:
            won = self.try_acquire_or_renew(until)
        except Exception as err:  # noqa: BLE001 - an unreachable API server is a failed attempt
            log.warning("lease %s/%s: %s", self.namespace, self.name, err)
            return False
        if won:
            self._renewed_at = started
        return won

    def run(self) -> None:
        """Campaign until elected, then renew until the renew deadline passes
        without a renewal or `stop()`; on_stopped is called when leading ends."""
        while not self._stop.is_set():
            if self._attempt():
                break
            self._stop.wait(self.retry_period)
        if self._stop.is_set():
            return
        self.leading.set()
        log.info("%s became the leader of %s/%s", self.identity, self.namespace, self.name)
        if self.on_started:
            self.on_started()
        while not self._stop.wait(self.retry_period):
            if not self.keeps_leading():
                log.error("%s lost the lease %s/%s", self.identity, self.namespace, self.name)
                break
        self.leading.clear()
        if self._stop.is_set():
            self.release()
        if self.on_stopped:
            self.on_stopped()

    def stop(self) -> None:
        self._stop.set()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        thread.start()
        return thread


class NotLeader(Exception):
    """A write refused because this replica may no longer act as the leader."""


WRITES = ("create", "replace", "patch", "delete", "deletecollection", "apply")


class Fenced:
    """A lightkube client whose writes (WRITES) first check `holds()` (the
    elector's) and raise NotLeader when it is false; reads pass through."""

    def __init__(self, client, holds: Callable[[], bool]) -> None:
        self._inner, self._holds = client, holds

    def __getattr__(self, name: str):
        attribute = getattr(self._inner, name)
        if name not in WRITES:
            return attribute

        def fenced(*args, **kwargs):
            if not self._holds():
                raise NotLeader(f"not writing ({name}): this replica no longer holds the lease in time")
            return attribute(*args, **kwargs)

        return fenced
