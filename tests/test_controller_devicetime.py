"""Device-time counters (issue 35 item 2, `cozyrender.controllers.devicetime`):
piecewise-constant accrual of devices × seconds, exported never above the
checkpoint the Lease may hold, and carried from one leader to the next by
the Lease's own writes. The handover tests run two real electors against
a real kube-apiserver: after a crash (no release) and after a graceful
release the new leader's counters are never below the old leader's last
export, and at most lease-duration × devices below what was held
throughout (the stated bound is tighter: one retry period plus a
request)."""

from __future__ import annotations

import json
import time

import pytest

from cozyrender.budgets import index_state
from cozyrender.controllers.devicetime import ANNOTATION, DeviceTime, allocated_figures, decode
from cozyrender.controllers.lease import LeaderElector
from cozyrender.kube.client import make_client

NAMESPACE = "cozyrender-system"
RESERVED = ("reserved", "tenant-acme", "a100")
ALLOCATED = ("allocated", "tenant-acme", "a100")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def exported(devices: DeviceTime) -> dict:
    return {(name.split("_")[2], labels["tenant"], labels["class"]): value
            for name, labels, value in devices.samples()}


def test_accrual_is_devices_times_seconds_piecewise_and_never_above_the_stored_checkpoint() -> None:
    clock = Clock()
    devices = DeviceTime(projection=10, clock=clock)
    devices.inherit({}, clock.now)  # no checkpoint: counting starts at the first figures
    assert devices.samples() == [] and devices.annotations() == {}
    devices.update(clock.now, {RESERVED: 3})
    clock.now += 4
    assert exported(devices) == {("reserved", "tenant-acme", "a100"): 0}  # nothing stored yet: capped at 0
    written = devices.annotations()
    assert json.loads(written[ANNOTATION]) == {"projectedSeconds": 10, "reserved": {"tenant-acme/a100": 12 + 30},
                                                "allocated": {}}
    devices.written(written)
    clock.now += 2
    assert exported(devices)[RESERVED] == 18
    devices.update(clock.now, {RESERVED: 1, ALLOCATED: 2})  # a change: the old figures up to it, the new after
    clock.now += 5
    assert exported(devices)[RESERVED] == 23
    assert exported(devices)[ALLOCATED] == 0  # a new series: not in the stored checkpoint yet
    clock.now += 100
    assert exported(devices)[RESERVED] == 42  # never past the stored checkpoint (12 + 3 × 10)
    devices.annotations()  # a write whose outcome is unknown: the cap is the smaller of the two
    assert exported(devices)[RESERVED] == 42
    devices.written(devices.annotations())
    assert exported(devices) == {RESERVED: 123, ALLOCATED: 210}


def test_a_new_leader_starts_from_the_stored_checkpoint_and_counts_from_the_end_of_its_projection() -> None:
    """Two leaders on one clock: the old one's exports never exceed what the
    Lease holds; the new one starts there, and its first figures apply from
    the moment it saw the record change plus the record's projection."""
    clock = Clock()
    old = DeviceTime(projection=10, clock=clock)
    old.update(clock.now, {RESERVED: 2})
    clock.now += 5
    lease = old.annotations()  # the renewal at 105: 10 so far, 20 projected
    old.written(lease)
    clock.now += 8  # the old leader dies at 113, having exported up to 26 (under the stored 30)
    assert exported(old)[RESERVED] == 26
    new = DeviceTime(projection=10, clock=clock)
    new.inherit(lease, changed_at=105.5)  # it saw the renewal half a second after it was written
    clock.now = 125  # elected after the lease duration, synced later
    new.update(clock.now, {RESERVED: 2})
    assert exported(new)[RESERVED] == 30  # capped at the stored checkpoint until its own write
    new.written(new.annotations())
    # 30 up to 115 (the old leader's projection), then 2 from 115.5: half a second of 2 devices lost
    assert exported(new)[RESERVED] == 30 + 2 * (125 - 115.5)


def test_a_namespace_whose_figures_are_unknown_keeps_its_last_ones() -> None:
    clock = Clock()
    devices = DeviceTime(projection=0, clock=clock)
    devices.update(clock.now, {RESERVED: 2, ("reserved", "tenant-foo", "a100"): 1})
    devices.update(clock.now + 1, {}, keep=lambda tenant: tenant == "tenant-foo")
    clock.now += 11
    devices.written(devices.annotations())
    assert exported(devices) == {RESERVED: 2, ("reserved", "tenant-foo", "a100"): 11}


def test_allocated_counts_running_bound_pods_by_their_class() -> None:
    gpuclass = {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
                "spec": {"resourceName": "nvidia.com/A100", "mode": "passthrough"}}

    def pod(name: str, phase: str, node: str | None, count: int, namespace: str = "tenant-acme") -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                    "requests": {"nvidia.com/A100": str(count)}, "limits": {"nvidia.com/A100": str(count)}}}]},
                "status": {"phase": phase}}

    pods = [pod("run", "Running", "gpu-1", 2), pod("init", "Running", "gpu-1", 1), pod("wait", "Pending", None, 4),
            pod("bound", "Pending", "gpu-1", 8), pod("done", "Succeeded", "gpu-1", 16),
            pod("host", "Running", "gpu-1", 32, namespace="kube-system")]
    state = index_state([gpuclass, *pods])
    assert allocated_figures(state, pods) == {ALLOCATED: 3}


# ---------------------------------------------------------------- two electors, one Lease


def elector(client, name: str, identity: str, devices: DeviceTime) -> LeaderElector:
    return LeaderElector(client, NAMESPACE, name, identity, lease_duration=3, renew_deadline=2, retry_period=0.25,
                         record=devices)


def lead(candidate: LeaderElector, devices: DeviceTime, figures: dict) -> None:
    """What `Manager` does once elected: the metrics controller's first figures."""
    candidate.start()
    deadline = time.monotonic() + 15
    while not candidate.leading.is_set():
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.05)
    devices.update(time.monotonic(), figures)


def stored(client, name: str) -> dict:
    from lightkube.resources.coordination_v1 import Lease

    return decode(client.get(Lease, name, namespace=NAMESPACE).metadata.annotations[ANNOTATION])[0]


@pytest.mark.parametrize("graceful", [False, True], ids=["crash", "release"])
def test_a_new_leader_starts_from_the_checkpoint_within_the_stated_loss(apiserver, graceful: bool) -> None:
    client = make_client(str(apiserver.kubeconfig))
    name = f"devicetime-{'release' if graceful else 'crash'}"
    held = {RESERVED: 3, ALLOCATED: 2}
    first, second = DeviceTime(projection=2), DeviceTime(projection=2)
    a = elector(client, name, "a", first)
    lead(a, first, held)
    time.sleep(1.0)  # a few renewals, each carrying the checkpoint
    b = elector(client, name, "b", second)
    b.start()
    assert stored(client, name)[RESERVED] > 0
    if graceful:
        a.stop()
    else:
        a.release = lambda: None  # killed: no release, no more renewals
        a._stop.set()
    last = exported(first)
    ended = time.monotonic()
    deadline = time.monotonic() + 15
    while not b.leading.is_set():
        assert time.monotonic() < deadline, "no takeover"
        time.sleep(0.05)
    inherited = stored(client, name)
    second.update(time.monotonic(), held)
    assert exported(second)[RESERVED] >= last[RESERVED]  # never below an earlier export: no false reset
    while stored(client, name) == inherited:  # b's own first checkpoint, on its next renewal
        assert time.monotonic() < deadline, "no checkpoint from the new leader"
        time.sleep(0.05)
    after = exported(second)
    now = time.monotonic()
    for key, devices in held.items():
        assert after[key] >= last[key]
        # what was held from the old leader's last export until now, less at most one lease duration of it
        assert after[key] >= last[key] + devices * (now - ended) - devices * 3
    b.stop()
