"""The GPUClass status controller against a real kube-apiserver v1.35.4, as
the chart's service account (its RBAC is what the test grants): free units
follow bound and deleted pods; a cordoned, tainted or NotReady node stops
counting; a second class on the same resource name shows the Conflict
naming the older one, in `kubectl get gpuclasses` too; nothing is written
when nothing changed; the status equals `cozyrender catalog` over the same
objects; and when the leader is killed (SIGKILL, no release) the standby
takes the Lease over and keeps writing. A class naming a DeviceClass adds
the devices its CEL selectors select in a ResourceSlice (resource.k8s.io/v1,
served by this kube-apiserver) and loses one when a claim's allocation
holds it; a selector not evaluable offline makes it say DevicesUncounted."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from controller_plane import (
    ControllerPlane, add_node, gpuclass, node_status, pod, start_plane, wait_for,
)
from kubeapi import GPUCLASSES

A100 = "nvidia.com/GA100_A100_PCIE_40GB"
NS = "tenant-root"
PODS = f"/api/v1/namespaces/{NS}/pods"


# Own plane (issue 36): its controllers count every Node and GPUClass and elect on the chart's one Lease.
@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    plane = start_plane(tmp_path_factory)
    controllers = ControllerPlane(plane)
    try:
        controllers.apply_chart()
        controllers.create(f"/api/v1/namespaces/{NS}/serviceaccounts",
                           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        controllers.start("controller-a", "status")
        controllers.start("controller-b", "status")
        wait_for(controllers.holder, what="a leader")
        yield controllers
    finally:
        plane.stop()


def status(cp, name: str) -> dict:
    code, obj = cp.api.get(f"{GPUCLASSES}/{name}")
    assert code == 200, obj
    return obj.get("status") or {}


def figures(cp, name: str):
    s = status(cp, name)
    return s.get("free"), s.get("allocatable"), s.get("nodes")


def condition(cp, name: str, kind: str) -> dict:
    return next((c for c in status(cp, name).get("conditions") or [] if c["type"] == kind), {})


def test_free_units_follow_bound_and_deleted_pods(cp):
    cp.create(GPUCLASSES, gpuclass("a100", A100))
    add_node(cp, "gpu-1", {A100: "4"})
    add_node(cp, "gpu-2", {A100: "2"})
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="6 free units on 2 nodes")
    ready = condition(cp, "a100", "Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == 1
    cp.create(PODS, pod("vm-1", "gpu-1", {A100: "1", "cpu": "1"}))
    cp.create(PODS, pod("vm-2", "gpu-2", {A100: "2"}))
    wait_for(lambda: figures(cp, "a100") == (3, 6, 2), what="3 free after two pods")
    cp.delete_pod(f"{PODS}/vm-2")
    wait_for(lambda: figures(cp, "a100") == (5, 6, 2), what="5 free after a delete")
    # A pod that finished holds nothing (the watch's field selector lets it go).
    cp.patch(f"{PODS}/vm-1", {"status": {"phase": "Succeeded"}}, "status")
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="6 free after the pod succeeded")
    cp.delete_pod(f"{PODS}/vm-1")


@pytest.mark.parametrize("change,undo", [
    ({"spec": {"unschedulable": True}}, {"spec": {"unschedulable": None}}),
    ({"spec": {"taints": [{"key": "maintenance", "value": "yes", "effect": "NoSchedule"}]}},
     {"spec": {"taints": None}}),
    ("not-ready", "ready"),
], ids=["cordoned", "tainted", "not-ready"])
def test_a_cordoned_tainted_or_not_ready_node_stops_counting(cp, change, undo):
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="the starting figures")

    def apply(what):
        if what in ("not-ready", "ready"):
            cp.patch("/api/v1/nodes/gpu-2", node_status({A100: "2"}, ready=what == "ready"), "status")
        else:
            cp.patch("/api/v1/nodes/gpu-2", what)

    apply(change)
    wait_for(lambda: figures(cp, "a100") == (4, 4, 1), what="gpu-2 no longer counting")
    apply(undo)
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="gpu-2 counting again")


def test_a_class_with_no_eligible_node_is_not_ready(cp):
    cp.create(GPUCLASSES, gpuclass("l4", "nvidia.com/AD104GL_L4"))
    wait_for(lambda: condition(cp, "l4", "Ready").get("reason") == "NoNodes", what="l4 NoNodes")
    assert figures(cp, "l4") == (0, 0, 0) and condition(cp, "l4", "Ready")["status"] == "False"


def test_a_second_class_on_the_same_resource_name_is_in_conflict(cp, kubectl):
    time.sleep(1.1)  # creationTimestamp has second resolution: the second class is strictly newer
    cp.create(GPUCLASSES, gpuclass("a100-copy", A100))
    wait_for(lambda: condition(cp, "a100-copy", "Conflict").get("status") == "True", what="the conflict")
    conflict = condition(cp, "a100-copy", "Conflict")
    assert "'a100'" in conflict["message"] and conflict["reason"] == "ResourceNameHeld"
    assert condition(cp, "a100-copy", "Ready")["reason"] == "Conflict"
    assert condition(cp, "a100", "Conflict")["status"] == "False"
    table = subprocess.run([str(kubectl), f"--kubeconfig={cp.plane.kubeconfig}", "get", "gpuclasses"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    header = table[0].split()
    assert ["FREE", "NODES", "CONFLICT"] == [h for h in header if h in ("FREE", "NODES", "CONFLICT")]
    starts = [table[0].index(h + " ") if h != header[-1] else table[0].rindex(h) for h in header]
    bounds = list(zip(starts, starts[1:] + [None]))
    rows = {line.split()[0]: {h: line[a:b].strip() for h, (a, b) in zip(header, bounds)} for line in table[1:]}
    assert rows["a100-copy"]["CONFLICT"] == "a100" and rows["a100"]["CONFLICT"] == ""
    assert rows["a100"]["FREE"] == "6" and rows["a100"]["NODES"] == "2"


def _writes(cp) -> int:
    text = cp.metrics(cp.holder())
    line = next(line for line in text.splitlines() if line.startswith("cozyrender_gpuclass_status_writes_total"))
    return int(float(line.split()[-1]))


def test_no_status_write_when_nothing_changed(cp):
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="the starting figures")
    written = _writes(cp)
    # Events that touch no figure: a node label, a pod without devices, a class's label.
    cp.patch("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"zone": "a"}}})
    cp.create(PODS, pod("web", "gpu-1", {"cpu": "1"}))
    l4_version = cp.patch(f"{GPUCLASSES}/l4", {"metadata": {"labels": {"tier": "b"}}})["metadata"]["resourceVersion"]
    # Then a change that does move figures: once it shows, the events above were handled too.
    cp.create(PODS, pod("vm-3", "gpu-1", {A100: "1"}))
    wait_for(lambda: figures(cp, "a100") == (5, 6, 2) and figures(cp, "a100-copy")[0] == 5, what="vm-3 counted")
    # Exactly two writes: the two classes on the A100 resource; l4 (relabelled) was reconciled, not written.
    assert _writes(cp) - written == 2
    assert cp.api.get(f"{GPUCLASSES}/l4")[1]["metadata"]["resourceVersion"] == l4_version
    cp.delete_pod(f"{PODS}/web")
    cp.delete_pod(f"{PODS}/vm-3")
    wait_for(lambda: figures(cp, "a100") == (6, 6, 2), what="vm-3 gone")


DRA = "/apis/resource.k8s.io/v1"
DRA_DRIVER = "gpu.example.com"


def test_dra_devices_count_in_free_units_and_an_allocated_claim_takes_one(cp):
    """Written as the scheduler and a DRA driver would write them (no scheduler or driver here):
    the slice as the driver publishes it, the claim's allocation as the scheduler records it."""
    selector = f'device.driver == "{DRA_DRIVER}" && device.attributes["{DRA_DRIVER}"].model == "A100"'
    cp.create(f"{DRA}/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                       "metadata": {"name": "dra-a100"},
                                       "spec": {"selectors": [{"cel": {"expression": selector}}]}})
    cp.create(GPUCLASSES, gpuclass("dra-a100", "example.com/dra-a100", deviceClassName="dra-a100"))
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}}}
               for i, model in enumerate(("A100", "A100", "L4"))]
    cp.create(f"{DRA}/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                        "metadata": {"name": "gpu-1-gpus"},
                                        "spec": {"driver": DRA_DRIVER, "nodeName": "gpu-1", "devices": devices,
                                                 "pool": {"name": "gpu-1", "generation": 1,
                                                          "resourceSliceCount": 1}}})
    wait_for(lambda: figures(cp, "dra-a100") == (2, 2, 1), what="the two A100 devices of the slice")
    assert "(2 of 2 DRA devices of DeviceClass 'dra-a100' among them)" in condition(cp, "dra-a100", "Ready")["message"]

    claims = f"{DRA}/namespaces/{NS}/resourceclaims"
    cp.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                           "deviceClassName": "dra-a100", "allocationMode": "ExactCount", "count": 1}}]}}})
    assert figures(cp, "dra-a100") == (2, 2, 1)  # created, not allocated: it holds nothing yet
    cp.patch(f"{claims}/one", {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRA_DRIVER, "pool": "gpu-1", "device": "gpu-0"}]}}}}, "status")
    wait_for(lambda: figures(cp, "dra-a100") == (1, 2, 1), what="one device held by the allocated claim")

    # A selector the API server takes (its regex library) but this CEL environment cannot compile.
    cp.patch(f"{DRA}/deviceclasses/dra-a100", {"spec": {"selectors": [
        {"cel": {"expression": 'device.attributes["gpu.example.com"].model.find("A1") == "A1"'}}]}})
    wait_for(lambda: condition(cp, "dra-a100", "Ready").get("reason") == "DevicesUncounted",
             what="the class saying its devices cannot be counted")
    assert "does not compile" in condition(cp, "dra-a100", "Ready")["message"]
    assert figures(cp, "dra-a100") == (0, 0, 0)
    cp.patch(f"{DRA}/deviceclasses/dra-a100", {"spec": {"selectors": [{"cel": {"expression": selector}}]}})
    wait_for(lambda: figures(cp, "dra-a100") == (1, 2, 1) and condition(cp, "dra-a100", "Ready")["status"] == "True",
             what="the devices counted again")


def test_the_status_equals_the_catalog_of_the_same_objects(cp, kubectl, tmp_path):
    cp.create(PODS, pod("vm-4", "gpu-2", {A100: "1"}))
    wait_for(lambda: figures(cp, "a100") == (5, 6, 2), what="vm-4 counted")
    listed = subprocess.run([str(kubectl), f"--kubeconfig={cp.plane.kubeconfig}", "get",
                             "nodes,pods,gpuclasses,deviceclasses,resourceslices,resourceclaims", "-A", "-o", "json"], capture_output=True, text=True, check=True).stdout
    state = tmp_path / "state.json"
    state.write_text(listed)
    catalog = json.loads(subprocess.run([sys.executable, "-m", "cozyrender", "catalog", "--state", str(state),
                                         "-o", "json"], capture_output=True, text=True, check=True).stdout)
    classes = {item["metadata"]["name"]: item.get("status") or {} for item in json.loads(listed)["items"]
               if item["kind"] == "GPUClass"}
    for row in catalog["gpuClasses"]:
        got = classes[row["name"]]
        assert (got["free"], got["allocatable"], got["nodes"]) == (row["freeUnits"], row["allocatableUnits"],
                                                                   row["eligibleNodes"]), row["name"]
        assert got.get("conflictWith") == (row["conflict"] or {}).get("heldBy"), row["name"]
    assert len(catalog["gpuClasses"]) == len(classes) == 4
    assert classes["dra-a100"]["free"] == 1  # the DRA class too: its claim holds one of its two devices
    cp.delete_pod(f"{PODS}/vm-4")


def test_the_standby_takes_over_when_the_leader_is_killed(cp):
    leader = wait_for(cp.holder, what="a leader")
    standby = next(name for name in cp.replicas if name != leader)
    assert "cozyrender_controller_leader 1" in cp.metrics(leader)
    assert "cozyrender_controller_leader 0" in cp.metrics(standby)
    assert "cozyrender_gpuclass_free_units" not in cp.metrics(standby)  # the leader alone exports figures
    killed = time.monotonic()
    cp.kill(leader)
    wait_for(lambda: cp.holder() == standby, timeout=60, step=0.05, what="the standby holding the Lease")
    took = time.monotonic() - killed
    # The new leader writes: a pod bound now shows in the status.
    cp.create(PODS, pod("vm-5", "gpu-1", {A100: "2"}))
    wait_for(lambda: figures(cp, "a100")[0] == 4, what="the new leader's write")
    print(f"\ntakeover after SIGKILL: {took:.2f} s (lease duration 4 s, retry period 0.5 s)")
    # Bound: lease duration + retry period after the last renewal, plus slack for a loaded machine.
    assert took < 4 + 0.5 + 10
    cp.start(leader, "status")  # back as a standby for any later test
    wait_for(lambda: "cozyrender_controller_leader 0" in cp.metrics(leader), what="the restarted standby")


def test_a_leader_stopped_gracefully_hands_over_within_a_retry_period(cp):
    leader = wait_for(cp.holder, what="a leader")
    standby = next(name for name in cp.replicas if name != leader)
    wait_for(lambda: "cozyrender_controller_leader 0" in cp.metrics(standby), what="the standby answering")
    stopped = time.monotonic()
    cp.terminate(leader)  # SIGTERM: the Lease is released on the way out
    wait_for(lambda: cp.holder() == standby, timeout=60, step=0.05, what="the standby holding the Lease")
    took = time.monotonic() - stopped
    print(f"\ntakeover after SIGTERM: {took:.2f} s (retry period 0.5 s)")
    assert took < 4  # well under the 4 s lease: the release, not the expiry, handed it over
    cp.start(leader, "status")
