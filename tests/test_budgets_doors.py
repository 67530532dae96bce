"""The other doors to a GPU (cozyrender.budgets.doors, holders, door_checks):
how Pods, KubeVirt VirtualMachines and VirtualMachineInstances are read, who
in a chain is charged, and the properties the rules promise:

- the live index equals a fresh index of its objects after any sequence of
  door, app and class events (the LiveIndex contract);
- two replicas with lagging watches sharing one ledger, writing through
  every door (apps, VMs, VMIs, launcher pods, plain pods, DRA
  ResourceClaims), the attacker's
  moves included (claims of owners that do not exist or have another uid,
  more devices than the owner, parents shrunk below their children, writes
  admitted but never stored): the devices held in a pool never exceed its
  budget, by an oracle that reads the objects from scratch;
- check's answer for a door write equals the webhook's.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_budgets_builders import gpuclass, tenant, vm
from test_webhook_admission import review


from cozyrender.budgets import check_write, index_state
from cozyrender.budgets.doors import Device, Parent, door_projection, larger_door, read_door
from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.shape import ShapeError
from cozyrender.webhook.ledger import Arbiter, MemoryShards, identity
from cozyrender.webhook.metrics import Metrics

A100, H100, VG = "nvidia.com/a100", "nvidia.com/h100", "nvidia.com/GRID_A100-4C"
DRA = "gpu.example.com"  # the DeviceClass of class a100
CLASSES = [gpuclass("a100", A100), gpuclass("h100", H100)]
CLASSES[0]["spec"]["deviceClassName"] = DRA
KEY = "gpuclass.cozystack.io/devices"
APP_ANNOTATION = "gpuclass.cozystack.io/app"


def pod(namespace: str, name: str, limits: dict | None = None, owner: dict | None = None, uid: str = "",
        init: dict | None = None, overhead: dict | None = None, phase: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                    "controller": True, **owner}]
    spec: dict = {"containers": [{"name": "c", "resources": {"limits": {k: str(v) for k, v in (limits or {}).items()}}}]}
    if init is not None:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": {k: str(v) for k, v in init.items()}}}]
    if overhead is not None:
        spec["overhead"] = {k: str(v) for k, v in overhead.items()}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def kvm(namespace: str, name: str, gpus: list[str] = (), host: list[str] = (), uid: str = "",
        app: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if app is not None:
        meta["annotations"] = {APP_ANNOTATION: app}
    devices = {"gpus": [{"name": f"g{i}", "deviceName": d} for i, d in enumerate(gpus)],
               "hostDevices": [{"name": f"h{i}", "deviceName": d} for i, d in enumerate(host)]}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
            "spec": {"running": False, "template": {"spec": {"domain": {"devices": devices}}}}}


def kvmi(namespace: str, name: str, gpus: list[str] = (), uid: str = "", owner: dict | None = None,
         app: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "controller": True,
                                    **owner}]
    if app is not None:
        meta["annotations"] = {APP_ANNOTATION: app}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta,
            "spec": {"domain": {"devices": {"gpus": [{"name": f"g{i}", "deviceName": d} for i, d in enumerate(gpus)]}}}}


# -- reading ---------------------------------------------------------------------

def test_a_pod_asks_for_what_kubernetes_counts() -> None:
    # The larger of the init phase and the containers' sum, plus overhead; extended resources only.
    door = read_door(pod("tenant-a", "p", {A100: 1, "cpu": "2"}, init={A100: 3}, overhead={H100: 1}))
    assert door.counts() == {A100: 3, H100: 1}
    assert read_door(pod("tenant-a", "p", {"cpu": 1, "memory": "1Gi"})).devices == ()
    with pytest.raises(ShapeError, match="whole number of devices"):
        read_door(pod("tenant-a", "p", {A100: "500m"}))


def test_a_finished_pod_holds_nothing() -> None:
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 1}), pod("tenant-a", "done", {A100: 1}, phase="Succeeded")])
    assert state.reserved.get("tenant-a", {}) == {}


def test_kubevirt_devices_are_gpus_and_host_devices() -> None:
    door = read_door(kvm("tenant-a", "v", gpus=[A100, A100], host=[H100, "intel.com/qat"]))
    assert [(d.resource, d.count, d.gpu) for d in door.devices] == [
        (A100, 1, True), (A100, 1, True), (H100, 1, False), ("intel.com/qat", 1, False)]
    assert door.devices[0].path == "spec.template.spec.domain.devices.gpus[0].deviceName"
    # A DRA-backed GPU (claimName) is a ResourceClaim's device, not this entry's.
    dra = kvmi("tenant-a", "i")
    dra["spec"]["domain"]["devices"]["gpus"] = [{"name": "g", "claimName": "c", "requestName": "r"}]
    assert read_door(dra).devices == ()
    bad = kvmi("tenant-a", "i")
    bad["spec"]["domain"]["devices"]["gpus"] = [{"name": "g"}]
    with pytest.raises(ShapeError, match="deviceName"):
        read_door(bad)


def test_claims_are_read_from_owner_references_and_the_contract_annotation() -> None:
    owned = read_door(kvmi("tenant-a", "v", [A100], owner={"name": "v", "uid": "u1"}, app="VMInstance/web"))
    assert owned.parent == Parent("VirtualMachine", "v", "u1", "metadata.ownerReferences[0]")
    assert read_door(kvm("tenant-a", "v", app="VMInstance/web")).parent.kind == "VMInstance"
    assert read_door(kvm("tenant-a", "v", app="Secret/x")).parent.kind == ""  # names nothing that can exist
    launcher = read_door(pod("tenant-a", "virt-launcher-v", {A100: 1}, owner={"name": "v", "uid": "u2"}))
    assert launcher.parent.kind == "VirtualMachineInstance"


@pytest.mark.parametrize("obj", [
    pod("tenant-a", "p", {A100: 2, H100: 1}, owner={"name": "i", "uid": "u"}, uid="p1"),
    kvm("tenant-a", "v", gpus=[A100], host=[H100, H100], uid="v1", app="Kubernetes/k"),
    kvmi("tenant-a", "i", gpus=[A100, A100], uid="i1", owner={"name": "i", "uid": "u"}),
])
def test_the_ledgers_projection_reads_as_the_same_door(obj) -> None:
    door, projected = read_door(obj), read_door(door_projection(obj))
    assert (projected.identity, projected.uid, projected.parent.kind, projected.parent.name, projected.parent.uid) \
        == (door.identity, door.uid, door.parent.kind, door.parent.name, door.parent.uid)
    assert sorted((d.resource, d.count, d.gpu) for d in _merged(projected.devices)) \
        == sorted((d.resource, d.count, d.gpu) for d in _merged(door.devices))
    assert read_door(larger_door(door_projection(obj), door_projection(obj))).counts() == door.counts()


def _merged(devices) -> list[Device]:
    found: dict = {}
    for d in devices:
        found[(d.resource, d.gpu)] = found.get((d.resource, d.gpu), 0) + d.count
    return [Device("", r, n, g) for (r, g), n in found.items()]


# -- charging ---------------------------------------------------------------------

def test_a_chain_is_charged_once_at_its_head() -> None:
    vm_obj = kvm("tenant-a", "v", gpus=[A100, A100], uid="vu")
    vmi_obj = kvmi("tenant-a", "v", gpus=[A100, A100], uid="iu", owner={"name": "v", "uid": "vu"})
    launcher = pod("tenant-a", "virt-launcher-v", {A100: 2}, owner={"name": "v", "uid": "iu"})
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4}), vm_obj, vmi_obj, launcher])
    assert state.reserved["tenant-a"] == {"a100": 2}
    assert list(state.workloads) == [("VirtualMachine", "tenant-a", "v")]


def test_a_parent_shrunk_below_its_children_is_charged_what_they_hold() -> None:
    vmi_obj = kvmi("tenant-a", "v", gpus=[A100, A100, A100], uid="iu", owner={"name": "v", "uid": "vu"})
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4}), kvm("tenant-a", "v", gpus=[A100], uid="vu"), vmi_obj])
    assert state.reserved["tenant-a"] == {"a100": 3}


def test_an_orphan_or_a_claim_of_another_uid_is_charged_itself() -> None:
    state = index_state(CLASSES + [tenant("a", quotas={KEY: 4}), kvm("tenant-a", "v", gpus=[A100], uid="vu"),
                                   kvmi("tenant-a", "v", gpus=[A100], owner={"name": "v", "uid": "other"}),
                                   pod("tenant-a", "p", {A100: 1}, owner={"name": "gone", "uid": "g"})])
    assert state.reserved["tenant-a"] == {"a100": 3}


def test_the_door_check_refuses_what_the_budget_or_the_claim_does_not_allow() -> None:
    base = CLASSES + [tenant("a", quotas={KEY: 2}), kvm("tenant-a", "v", gpus=[A100, A100], uid="vu")]
    state = index_state(base)
    over = check_write(state, pod("tenant-a", "p", {A100: 1}))
    assert not over.allowed and "requested 1, reserved 2, carved out 0, budget 2" in over.reasons[0].message
    assert check_write(state, kvmi("tenant-a", "v", [A100, A100], owner={"name": "v", "uid": "vu"})).allowed
    more = check_write(state, kvmi("tenant-a", "v", [A100, A100, A100], owner={"name": "v", "uid": "vu"}))
    assert "requested 3, held by its other claimants 0, it holds 2" in more.reasons[0].message
    raw = check_write(state, kvm("tenant-a", "w", gpus=["nvidia.com/unknown"]))
    assert "is no GPUClass's resource" in raw.reasons[0].message
    # Outside the tenant tree, no budget applies; a pod with no device of a class is not held back.
    assert check_write(state, pod("kube-system", "p", {A100: 8})).allowed
    assert check_write(state, pod("tenant-a", "fpga", {"vendor.example/fpga": 9})).allowed


# -- properties --------------------------------------------------------------------

NAMESPACES = ("tenant-a", "tenant-a-b")
door_ops = st.one_of(
    st.tuples(st.just("app"), st.sampled_from(NAMESPACES), st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("vm"), st.sampled_from(NAMESPACES), st.integers(0, 2), st.integers(0, 3),
              st.sampled_from([None, "VMInstance/app0", "VMInstance/app1", "Secret/x"])),
    st.tuples(st.just("vmi"), st.sampled_from(NAMESPACES), st.integers(0, 2), st.integers(0, 3),
              st.sampled_from(["owner", "stranger", "none"])),
    st.tuples(st.just("pod"), st.sampled_from(NAMESPACES), st.integers(0, 3), st.integers(0, 3),
              st.sampled_from(["launcher", "stranger", "none"])),
    st.tuples(st.just("claim"), st.sampled_from(NAMESPACES), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(["vm", "vmi", "app", "claim"]),
              st.integers(0, 2)),
)
FATES = st.sampled_from(["stored", "stored", "stored", "never"])
TENANTS = [tenant("a", quotas={KEY: 3}), tenant("b", "tenant-a", quotas={KEY: 2})]


def _door_object(op: tuple, stored: dict) -> dict | None:
    """The object an op writes, given what is stored (uids of owners read from there)."""
    kind, namespace = op[0], op[1]
    if kind == "app":
        return vm(namespace, f"app{op[2]}", [{"class": "a100", "count": op[3]}])
    if kind == "vm":
        return kvm(namespace, f"v{op[2]}", gpus=[A100] * op[3], app=op[4])
    if kind == "vmi":
        owner = stored.get(("kubevirt.io", "VirtualMachine", namespace, f"v{op[2]}"))
        ref = {"name": f"v{op[2]}", "uid": owner["metadata"]["uid"] if owner else "missing"}
        if op[4] == "stranger":
            ref["uid"] = "stranger"
        return kvmi(namespace, f"v{op[2]}", [A100] * op[3], owner=None if op[4] == "none" else ref)
    if kind == "pod":
        owner = stored.get(("kubevirt.io", "VirtualMachineInstance", namespace, f"v{op[2] % 3}"))
        ref = {"name": f"v{op[2] % 3}", "uid": owner["metadata"]["uid"] if owner else "missing"}
        if op[4] == "stranger":
            ref["uid"] = "stranger"
        return pod(namespace, f"p{op[2]}", {A100: op[3]}, owner=None if op[4] == "none" else ref)
    if kind == "claim":
        return claim(namespace, f"c{op[2]}", op[3])
    return None


def claim(namespace: str, name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA, "count": count}}]}}}


def held_oracle(objects: list[dict]) -> dict[str, int]:
    """Per namespace, a100 devices held, from scratch: every chain charged
    once, at its head, the larger of its own devices and its children's sum."""
    by_id = {}
    for obj in objects:
        by_id[(obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    def own(obj: dict) -> int:
        if obj["kind"] == "VMInstance":
            return sum(e["count"] for e in obj["spec"]["gpus"])
        return read_door(obj).counts().get(DRA if obj["kind"] == "ResourceClaim" else A100, 0)

    def parent(obj: dict):
        if obj["kind"] == "VMInstance":
            return None
        door = read_door(obj)
        if door.parent is None or not door.parent.kind:
            return None
        key = (door.parent.kind, door.namespace, door.parent.name)
        target = by_id.get(key)
        if target is None or (door.parent.uid and target["metadata"].get("uid") != door.parent.uid):
            return None
        allowed = {"Pod": ("VirtualMachineInstance",), "VirtualMachineInstance": ("VirtualMachine", "VMInstance"),
                   "VirtualMachine": ("VMInstance",)}[obj["kind"]]
        return key if door.parent.kind in allowed else None

    children: dict = {}
    for key, obj in by_id.items():
        up = parent(obj)
        if up is not None:
            children.setdefault(up, []).append(key)

    def charge(key) -> int:
        return max(own(by_id[key]), sum(charge(c) for c in children.get(key, ())))

    held: dict[str, int] = {}
    for key, obj in by_id.items():
        if parent(obj) is None:
            held[key[1]] = held.get(key[1], 0) + charge(key)
    return held


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(door_ops, st.integers(0, 1), FATES, st.booleans()), min_size=1, max_size=25))
# A VM shrunk below the VMI it runs, then a pod into the room it seems to free.
@example([(("vm", "tenant-a-b", 0, 2, None), 0, "stored", True), (("vmi", "tenant-a-b", 0, 2, "owner"), 0, "stored", True),
          (("vm", "tenant-a-b", 0, 0, None), 0, "stored", True), (("pod", "tenant-a-b", 3, 2, "none"), 0, "stored", True)])
# An app edited below the VMs claiming it, then another VM claiming the room.
@example([(("app", "tenant-a", 0, 2), 0, "stored", True), (("vm", "tenant-a", 0, 2, "VMInstance/app0"), 1, "stored", True),
          (("app", "tenant-a", 0, 0), 0, "stored", True), (("vm", "tenant-a", 1, 2, None), 1, "stored", True)])
# A launcher pod whose VMI is deleted, then re-created by another VM write.
@example([(("vmi", "tenant-a-b", 0, 2, "none"), 0, "stored", True), (("pod", "tenant-a-b", 0, 2, "launcher"), 0, "stored", True),
          (("delete", "tenant-a-b", "vmi", 0), 0, "stored", True), (("pod", "tenant-a-b", 1, 1, "none"), 1, "stored", False)])
def test_no_pool_holds_more_than_its_budget_through_any_door(sequence) -> None:
    """Two replicas, lagging watches, one in-memory ledger; writes through
    every door, some admitted but never stored. After every stored write,
    tenant-a-b holds at most 2 and tenant-a's subtree at most 3 devices."""
    clock, store = Clock(), MemoryShards()
    stored: dict[tuple, dict] = {}
    judges, lag = [], [[], []]
    for _ in range(2):
        index, lock, seen = LiveIndex(CLASSES + TENANTS), threading.Lock(), {}
        judges.append((Arbiter(index, lock, Metrics(), ledger=store, clock=clock, lookup=stored.get,
                               seen=lambda uid, generation, seen=seen: seen.get(uid, -1) >= generation), index, seen))
    uids = iter(range(10**6))

    def sync(replica: int) -> None:
        _, index, seen = judges[replica]
        for action, obj in lag[replica]:
            (index.upsert if action == "put" else index.remove)(obj)
            seen[obj["metadata"]["uid"]] = obj["metadata"]["generation"]
        lag[replica].clear()

    for op, replica, fate, catch_up in sequence:
        if catch_up:  # the judging replica's watch has caught up
            sync(replica)
        if op[0] == "delete":
            kind = {"vm": "VirtualMachine", "vmi": "VirtualMachineInstance", "app": "VMInstance",
                    "claim": "ResourceClaim"}[op[2]]
            group = {"VMInstance": "apps.cozystack.io", "ResourceClaim": "resource.k8s.io"}.get(kind, "kubevirt.io")
            name = f"app{op[3] % 2}" if kind == "VMInstance" else f"{'c' if kind == 'ResourceClaim' else 'v'}{op[3]}"
            gone = stored.pop((group, kind, op[1], name), None)
            if gone is not None:
                for r in (0, 1):
                    lag[r].append(("drop", gone))
            continue
        obj = _door_object(op, stored)
        key = identity(obj)
        previous = stored.get(key)
        meta = obj["metadata"]
        if previous is None:
            meta.update(uid=f"u{next(uids)}", generation=1)
            operation, old = "CREATE", None
        else:
            meta.update(uid=previous["metadata"]["uid"], generation=previous["metadata"]["generation"] + 1)
            operation, old = "UPDATE", previous
        answer = judges[replica][0](review(obj, operation, old))["response"]
        if not answer["allowed"] or fate != "stored":
            clock.now += 1
            continue
        stored[key] = obj
        for r in (0, 1):
            lag[r].append(("put", obj))
        held = held_oracle(list(stored.values()))
        assert held.get("tenant-a-b", 0) <= 2, (held, sequence)
        assert held.get("tenant-a", 0) + held.get("tenant-a-b", 0) <= 3, (held, sequence)


door_writes = st.tuples(door_ops.filter(lambda op: op[0] != "delete"), FATES)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(door_writes, max_size=8), door_ops.filter(lambda op: op[0] != "delete"))
def test_the_live_index_and_the_checks_agree_with_a_fresh_index(history, write) -> None:
    """The LiveIndex contract over door events, and check's answer equal to
    the webhook's (one replica, no ledger) for a door write."""
    from cozyrender.webhook import admission

    stored: dict[tuple, dict] = {}
    live = LiveIndex(CLASSES + TENANTS)
    for n, (op, _) in enumerate(history):
        obj = _door_object(op, stored)
        obj["metadata"]["uid"] = f"h{n}"
        stored[identity(obj)] = obj
        live.upsert(obj)
    fresh = index_state(CLASSES + TENANTS + list(stored.values()))
    assert live.state == fresh
    obj = _door_object(write, stored)
    old = stored.get(identity(obj))
    decision = check_write(fresh, obj)
    answer = admission.admit(live.state, review(obj, "UPDATE" if old else "CREATE", old))["response"]
    assert answer["allowed"] is decision.allowed


def test_the_audit_and_the_tree_count_every_door(tmp_path) -> None:
    from test_budgets_builders import run_check_json

    state = CLASSES + [tenant("a", quotas={KEY: 2}), vm("tenant-a", "app", [{"class": "a100", "count": 1}]),
                       kvm("tenant-a", "v", gpus=[A100], uid="vu"), pod("tenant-a", "p", {H100: 1})]
    code, answer = run_check_json(tmp_path, state)
    assert code == 1
    over = [f for f in answer if f["kind"] == "over-committed"]
    assert len(over) == 1 and "reserved 3 + carved out 0 = 3 > budget 2" in over[0]["message"]
    from cozyrender.budgets import audit
    from cozyrender.tree.model import build_tree

    indexed = index_state(state)
    tree = build_tree(indexed, audit(indexed))
    [row] = tree.nodes["tenant-a"].keys
    assert sorted((r.kind, r.name, r.devices) for r in row.reservations) == [
        ("Pod", "p", 1), ("VMInstance", "app", 1), ("VirtualMachine", "v", 1)]
