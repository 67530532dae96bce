"""The DRA driver on the real node (tools/node/draplugin, started by tools/controlplane/node.py as
`make cluster` starts it): what it publishes, and a claim taken through the real kube-scheduler
and kubelet.

- the driver's ResourceSlice for the node: 4 devices gpu-0..gpu-3 of driver gpu.cozyrender.io,
  each with the attribute `model` A100 and the capacity `memory` 40Gi, owned by the Node; the
  DeviceClass gpu.cozyrender.io selects them by CEL;
- a ResourceClaim for one device of the DeviceClass and a pod using it: the scheduler allocates a
  device of this node and driver (the claim's status.allocation names them) and reserves the
  claim for the pod; the kubelet prepares the claim through the plugin, which writes the claim's
  CDI spec (the device's COZYRENDER_DRA_GPU_<n> variable) and gives the kubelet its CDI device ID
  (the kubelet's DRA checkpoint records it); the pod runs and its container has the variable
  (put there by tools/node/cdi_runc.py, the stand-in for containerd 1.7's CDI step);
- deleting the pod unprepares the claim (its CDI spec is gone, the checkpoint forgets it), the
  reservation is released, and the claim can be deleted;
- through the webhook (the chart installed by Helm from the image, one webhook and one controller
  replica): in a tenant namespace with a budget of one device of a GPUClass naming the DeviceClass,
  a claim for one device is admitted, a pod using it is scheduled and runs with the device the
  kubelet prepared through the plugin, and a second claim past the budget is refused, naming
  why; the class's status (the controller on the node) counts the driver's devices and the one
  the claim holds.

Own plane: the machine has one node. The claims in `dra-test` (not a tenant namespace) are not
charged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402
from kubeapi import KubeAPI  # noqa: E402
from test_node_cluster import kubectl_json, wait_for  # noqa: E402
from test_webhook_doors_live import claim, claims_path, refused, tenant, wait_until_registered  # noqa: E402
from node import DRA_DRIVER, NODE_NAME  # noqa: E402

NAMESPACE = "dra-test"
GPUCLASS = "dra-a100"  # a GPUClass offering the driver's DeviceClass
KEY = f"{GPUCLASS}.gpuclass.cozystack.io/devices"


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("node-dra"), BIN, webhook_replicas=0, node=True, dra_gpus=4,
                         namespaces=("cozy-system", "cozyrender-system", "tenant-root", NAMESPACE))
    plane.start()
    try:
        # One replica of each: a single node on a shared machine (the chart's default is two).
        plane.node.install_webhook_chart(1, extra_values={"controller": {"replicas": 1}})
    except BaseException:
        plane.stop()
        raise
    yield plane
    plane.stop()


def get(plane, *args: str) -> dict:
    return kubectl_json(plane, "get", *args)


def test_the_driver_publishes_the_nodes_gpus_in_a_resource_slice(plane):
    (slice_,) = plane.node.resource_slices()
    spec = slice_["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (DRA_DRIVER, NODE_NAME, NODE_NAME)
    devices = {d["name"]: d for d in spec["devices"]}
    assert sorted(devices) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    for device in devices.values():
        assert device["attributes"] == {"model": {"string": "A100"}}
        assert device["capacity"] == {"memory": {"value": "40Gi"}}
    node = get(plane, "node", NODE_NAME)
    (owner,) = slice_["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", NODE_NAME, node["metadata"]["uid"])
    device_class = get(plane, "deviceclass", DRA_DRIVER)
    assert device_class["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]


def claim_and_pod() -> list[dict]:
    one_gpu = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": DRA_DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "uses-gpu", "namespace": NAMESPACE},
           "spec": {"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "one-gpu"}],
                    "containers": [{"name": "c", "image": build.image_reference(), "imagePullPolicy": "Never",
                                    "command": ["sh", "-c", "env | grep ^COZYRENDER_; exec sleep 3600"], "resources": {"claims": [{"name": "gpu"}]}}]}}
    return [one_gpu, pod]


def pod_using(namespace: str, name: str, claim_name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
                     "containers": [{"name": "c", "image": build.image_reference(), "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", "env | grep ^COZYRENDER_; exec sleep 3600"],
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_a_claim_is_allocated_by_the_scheduler_prepared_through_the_plugin_and_unprepared(plane):
    checkpoint = plane.node.dir / "kubelet" / "dra_manager_state"
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": claim_and_pod()}))
    wait_for("the pod Running", lambda: get(plane, "-n", NAMESPACE, "pod", "uses-gpu")["status"].get("phase")
             == "Running", 120)
    one_gpu = get(plane, "-n", NAMESPACE, "resourceclaim", "one-gpu")
    pod = get(plane, "-n", NAMESPACE, "pod", "uses-gpu")
    allocation = one_gpu["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    assert (result["driver"], result["pool"], result["request"]) == (DRA_DRIVER, NODE_NAME, "gpu")
    assert result["device"] in {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
    (term,) = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert NODE_NAME in json.dumps(term)
    assert [(r["resource"], r["name"], r["uid"]) for r in one_gpu["status"]["reservedFor"]] == \
        [("pods", "uses-gpu", pod["metadata"]["uid"])]
    assert pod["spec"]["nodeName"] == NODE_NAME

    # Prepared by the kubelet through the plugin: the claim's CDI spec, and its ID in the kubelet's state.
    uid, device = one_gpu["metadata"]["uid"], result["device"]
    spec_file = plane.node.cdi_dir / f"{DRA_DRIVER}-{uid}.json"
    spec = json.loads(spec_file.read_text())
    variable = "COZYRENDER_DRA_" + device.upper().replace("-", "_")
    assert spec == {"cdiVersion": "0.6.0", "kind": f"{DRA_DRIVER}/gpu", "devices": [
        {"name": f"{uid}-{device}", "containerEdits": {"env": [f"{variable}={NAMESPACE}/one-gpu"]}}]}
    assert f"{DRA_DRIVER}/gpu={uid}-{device}" in checkpoint.read_text()
    # The container has the device's variable, and nothing of the device plugin's.
    logs = wait_for("the pod's log", lambda: plane.kubectl("-n", NAMESPACE, "logs", "uses-gpu", check=False).stdout, 30)
    assert logs.split() == [f"{variable}={NAMESPACE}/one-gpu"]

    # Deleting the pod unprepares the claim and releases it; the claim can then go.
    plane.kubectl("-n", NAMESPACE, "delete", "pod", "uses-gpu", "--wait=true", "--timeout=60s")
    wait_for("the claim's CDI spec removed", lambda: not spec_file.exists(), 60)
    assert uid not in checkpoint.read_text()
    wait_for("the claim released", lambda: not get(plane, "-n", NAMESPACE, "resourceclaim", "one-gpu")
             ["status"].get("reservedFor"), 60)
    plane.kubectl("-n", NAMESPACE, "delete", "resourceclaim", "one-gpu", "--wait=true", "--timeout=60s")


def test_a_tenant_claim_within_its_budget_runs_on_the_device_and_one_past_it_is_refused(plane):
    api = KubeAPI(plane)
    status, body = api.create("/apis/cozystack.io/v1alpha1/gpuclasses", {
        "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": GPUCLASS},
        "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                 "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/DRA_A100", "deviceClassName": DRA_DRIVER}})
    assert status == 201, body
    wait_until_registered(api, [DRA_DRIVER], timeout=60)  # the replica holds the class: its claims are sent
    namespace = tenant(api, "dra", {KEY: 1})

    status, body = api.create(claims_path(namespace), claim(namespace, "first", 1, DRA_DRIVER))
    assert status == 201, body.get("message", body)
    status, body = api.create(f"/api/v1/namespaces/{namespace}/pods", pod_using(namespace, "trainer", "first"))
    assert status == 201, body.get("message", body)
    wait_for("the tenant's pod Running", lambda: get(plane, "-n", namespace, "pod", "trainer")["status"].get("phase")
             == "Running", 120)
    (result,) = get(plane, "-n", namespace, "resourceclaim", "first")["status"]["allocation"]["devices"]["results"]
    variable = "COZYRENDER_DRA_" + result["device"].upper().replace("-", "_")
    logs = wait_for("the pod's log", lambda: plane.kubectl("-n", namespace, "logs", "trainer", check=False).stdout, 30)
    assert logs.split() == [f"{variable}={namespace}/first"]  # the device the kubelet prepared through the plugin

    status, body = api.create(claims_path(namespace), claim(namespace, "second", 1, DRA_DRIVER))
    refused(status, body, "exceeded GPU budget", "requested 1, reserved 1", "budget 1")

    # The controller on the node counts the driver's four devices, one of them held by the claim.
    def figures():
        found = get(plane, "gpuclass", GPUCLASS).get("status") or {}
        return found.get("free"), found.get("allocatable"), found.get("nodes")
    wait_for("the class's status counting the claim's device", lambda: figures() == (3, 4, 1), 60)

    plane.kubectl("-n", namespace, "delete", "pod", "trainer", "--wait=true", "--timeout=60s")
    plane.kubectl("-n", namespace, "delete", "resourceclaim", "first", "--wait=true", "--timeout=60s")
    wait_for("the device free again in the class's status", lambda: figures() == (4, 4, 1), 60)
