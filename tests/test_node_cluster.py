"""The cluster with a real node (tools/controlplane/node.py): kubelet and kube-scheduler v1.35.4,
containerd + runc + CNI bridge, the GPU device plugin, and the webhook chart installed by Helm 4
from the image built here, as `make cluster` gives it.

- Node allocatable for the GPU resource comes from the kubelet (the device plugin API), and pods
  requesting it are scheduled, admitted and counted by the real scheduler and kubelet;
  `cozyrender catalog` read from the cluster shows the free units the kubelet reports;
- the webhook runs as two pods from the image behind its Service (reached through the API
  server's aggregator routing), with the PodDisruptionBudget, RBAC and TLS from a Secret;
- 20 concurrent creates into a budget of 10 admit exactly 10, spread over both pods;
- a webhook pod deleted during concurrent writes, and `helm upgrade` (a rolling update) during
  them: nothing over-admitted, nothing lost, the Deployment back at two ready pods;
- a pod that cannot sync its cache is never Ready and receives no requests.

Pod addresses are in 10.250.N.0/24 on the bridge the run created; the tests send traffic only
there and to loopback.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubeapi import KubeAPI, apps_path
from test_webhook_live import A100, make_tenant, stored, vm_body

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402

GPU = "nvidia.com/GA100"
NAMESPACE = "cozyrender-system"
RELEASE = "cozyrender-webhook"


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("node-cluster"), BIN, webhook_replicas=2, node=True, gpus={GPU: 4})
    plane.start()
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def api(plane) -> KubeAPI:
    api = KubeAPI(plane)
    status, body = api.create("/apis/cozystack.io/v1alpha1/gpuclasses", {
        "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
        "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                 "sourceKind": "PCIHostDevice", "resourceName": GPU}})
    assert status in (201, 409), body
    return api


def kubectl_json(plane, *args: str) -> dict:
    return json.loads(plane.kubectl(*args, "-o", "json").stdout)


def wait_for(what: str, probe, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(0.5)


def webhook_pods(plane) -> list[dict]:
    pods = kubectl_json(plane, "-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=cozyrender-webhook")["items"]
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def pod_metric(plane, pod_ip: str, name: str) -> float:
    """A metric from one webhook pod's /metrics, at its pod address (its certificate names the
    Service, so the address is not checked against it; the chain still is, to the plane's CA)."""
    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    context.check_hostname = False
    text = urllib.request.urlopen(f"https://{pod_ip}:8443/metrics", context=context, timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def decisions(plane, pod_ip: str) -> float:
    return pod_metric(plane, pod_ip, 'cozyrender_webhook_decisions_total{kind="VMInstance"')


def deployment_settled(plane, replicas: int = 2) -> bool:
    deployment = kubectl_json(plane, "-n", NAMESPACE, "get", "deployment", RELEASE)
    status = deployment["status"]
    pods = webhook_pods(plane)
    return (status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas") == replicas and status.get("readyReplicas") == replicas
            and status.get("replicas") == replicas and len(pods) == replicas and all(map(ready, pods)))


def wait_cached_tenant(plane, namespace: str) -> None:
    """Until every ready webhook pod's cache holds every Tenant, the one a test races on included."""
    tenants = len(kubectl_json(plane, "get", "tenants.apps.cozystack.io", "-A")["items"])

    def seen() -> bool:
        return all(pod_metric(plane, pod["status"]["podIP"], 'cozyrender_webhook_cache_objects{kind="Tenant"') >= tenants
                   for pod in webhook_pods(plane) if ready(pod))

    wait_for(f"the webhook pods' caches hold the tenant of {namespace}", seen, 60)


# -- the node and the GPUs -------------------------------------------------------------


def test_node_is_ready_and_its_gpu_allocatable_comes_from_the_kubelet(plane):
    node = kubectl_json(plane, "get", "node", "cozyrender-node", "--show-managed-fields")
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.")
    assert node["status"]["allocatable"][GPU] == "4" and node["status"]["capacity"][GPU] == "4"
    # Written by the kubelet (its status manager), not by a test.
    writers = [entry["manager"] for entry in node["metadata"]["managedFields"]
               if f"f:{GPU}" in json.dumps(entry.get("fieldsV1", {}))]
    assert writers == ["kubelet"], writers


def gpu_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": build.image_reference(), "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", 'echo "devices=$COZYRENDER_GPU_DEVICES"; exec sleep 3600'],
                                     "resources": {"limits": {GPU: "1"}}}]}}


def test_gpu_pods_are_scheduled_admitted_and_counted_by_the_real_node(plane, api):
    names = [f"gpu-{i}" for i in range(5)]
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": [gpu_pod(n) for n in names]}))
    try:
        def placed():
            pods = kubectl_json(plane, "-n", "default", "get", "pods")["items"]
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            pending = [p for p in pods if any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                                              for c in p["status"].get("conditions", []))]
            return (running, pending) if len(running) == 4 and len(pending) == 1 else None

        running, pending = wait_for("4 GPU pods Running and 1 unschedulable", placed)
        message = next(c["message"] for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled")
        assert f"Insufficient {GPU}" in message
        # The kubelet handed each running pod its own device (the plugin's Allocate).
        devices = {wait_for("the pod's log", lambda p=p: plane.kubectl("-n", "default", "logs", p["metadata"]["name"],
                                                                        check=False).stdout.strip())
                   for p in running}
        assert len(devices) == 4 and all(d.startswith("devices=nvidia-com-GA100-") for d in devices), devices
        # `cozyrender catalog` read from the cluster: the free units the kubelet's allocatable leaves.
        state = plane.kubectl("get", "nodes,pods,gpuclasses", "-A", "-o", "yaml").stdout
        catalog = subprocess.run([sys.executable, "-m", "cozyrender", "catalog", "--state", "-", "-o", "json"],
                                 input=state, capture_output=True, text=True, cwd=ROOT)
        assert catalog.returncode == 0, catalog.stderr
        (row,) = json.loads(catalog.stdout)["gpuClasses"]
        assert (row["resourceName"], row["allocatableUnits"], row["freeUnits"]) == (GPU, 4, 0)
        # A device released is given to the pod that waited for it.
        plane.kubectl("-n", "default", "delete", "pod", running[0]["metadata"]["name"], "--wait=true")
        waiting = pending[0]["metadata"]["name"]
        wait_for(f"{waiting} Running", lambda: kubectl_json(plane, "-n", "default", "get", "pod", waiting)
                 ["status"].get("phase") == "Running")
    finally:
        plane.kubectl("-n", "default", "delete", "pods", "--all", "--wait=true", "--timeout=120s", check=False)


# -- the webhook as the chart deploys it ------------------------------------------------


def test_the_webhook_runs_from_the_image_behind_its_service(plane, api):
    assert deployment_settled(plane)
    pods = webhook_pods(plane)
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {build.image_reference()}
    assert all(p["spec"]["nodeName"] == "cozyrender-node" for p in pods)
    assert all(p["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] for p in pods)
    assert {p["spec"]["serviceAccountName"] for p in pods} == {"cozyrender-webhook"}
    slices = kubectl_json(plane, "-n", NAMESPACE, "get", "endpointslices",
                          "-l", f"kubernetes.io/service-name={RELEASE}")["items"]
    addresses = {a for s in slices for e in s.get("endpoints", []) for a in e["addresses"]}
    assert addresses == {p["status"]["podIP"] for p in pods}
    assert all(a.startswith(plane.node.gateway.rsplit(".", 1)[0] + ".") for a in addresses)
    pdb = kubectl_json(plane, "-n", NAMESPACE, "get", "pdb", RELEASE)
    assert pdb["spec"]["minAvailable"] == 1 and pdb["status"]["disruptionsAllowed"] == 1
    release = json.loads(plane.node.helm("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert release["info"]["status"] == "deployed"
    # An over-budget write refused by the deployed pods, reached at the Service's endpoints.
    namespace = make_tenant(api, "over", {A100: 2})
    wait_cached_tenant(plane, namespace)
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "big", 3))
    assert status == 403, body
    assert "exceeded GPU budget 'a100.gpuclass.cozystack.io/devices'" in body["message"]


def test_twenty_concurrent_creates_into_a_budget_of_ten_admit_exactly_ten_over_both_pods(plane, api):
    namespace = make_tenant(api, "race", {A100: 10})
    wait_cached_tenant(plane, namespace)
    ips = [p["status"]["podIP"] for p in webhook_pods(plane)]
    before = {ip: decisions(plane, ip) for ip in ips}
    start = threading.Barrier(20)
    local = threading.local()

    def create(name: str) -> int:
        if not hasattr(local, "api"):
            local.api = KubeAPI(plane)
        start.wait()
        status, body = local.api.create(apps_path("vminstances", namespace), vm_body(namespace, name, 1))
        assert status in (201, 403), body
        return status

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(create, [f"vm{i}" for i in range(20)]))
    assert statuses.count(201) == 10
    assert len(stored(api, namespace)) == 10
    spread = {ip: decisions(plane, ip) - before[ip] for ip in ips}
    assert all(count > 0 for count in spread.values()), spread
    assert sum(spread.values()) >= 20


def _writes_during(plane, api, namespace: str, disturb) -> tuple[dict[str, int], list[str]]:
    """30 creates of one GPU each into a budget of 10 from 6 threads while `disturb()` runs; a
    write the webhook could not answer (fail closed) is tried again. Returns each name's final
    status and the names stored."""
    names = [f"vm{i:02d}" for i in range(30)]
    results: dict[str, int] = {}
    local = threading.local()

    def create(name: str) -> None:
        if not hasattr(local, "api"):
            local.api = KubeAPI(plane)
        deadline = time.monotonic() + 120
        while True:
            status, body = local.api.create(apps_path("vminstances", namespace), vm_body(namespace, name, 1))
            budget = status == 403 and "exceeded GPU budget" in body.get("message", "")
            if status == 201 or budget or time.monotonic() > deadline:
                results[name] = status
                return
            # Refused without an answer on the budget (a webhook pod going away, the ledger
            # contended): fail closed, nothing stored; the client tries again.
            assert status in (403, 409, 500, 503, 504), body
            if status == 409:  # stored by an earlier try whose answer was lost? then it counts
                results[name] = 201
                return
            time.sleep(0.2)

    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(create, name) for name in names]
        time.sleep(0.5)
        disturb()
        for future in futures:
            future.result()
    return results, sorted(vm["metadata"]["name"] for vm in stored(api, namespace))


def test_a_webhook_pod_deleted_during_writes_loses_nothing_and_admits_no_more(plane, api):
    namespace = make_tenant(api, "kill", {A100: 10})
    wait_cached_tenant(plane, namespace)
    victim = webhook_pods(plane)[0]["metadata"]["name"]
    results, names = _writes_during(plane, api, namespace, lambda: plane.kubectl(
        "-n", NAMESPACE, "delete", "pod", victim, "--wait=false"))
    admitted = sorted(name for name, status in results.items() if status == 201)
    assert admitted == names, (results, names)  # every admitted write stored, nothing stored unadmitted
    assert len(names) == 10, (results, names)  # the budget filled exactly: not over, no write lost for good
    wait_for("the Deployment back at 2 ready pods", lambda: deployment_settled(plane))
    assert victim not in {p["metadata"]["name"] for p in webhook_pods(plane)}


def test_helm_upgrade_during_writes_rolls_the_pods_and_admits_no_more(plane, api):
    namespace = make_tenant(api, "roll", {A100: 10})
    wait_cached_tenant(plane, namespace)
    before = {p["metadata"]["name"] for p in webhook_pods(plane)}
    values = {**plane.node.webhook_values, "reservationTTL": 61}
    upgrade = []

    def disturb() -> None:
        upgrade.append(ThreadPoolExecutor(1))
        upgrade.append(upgrade[0].submit(plane.node.helm, "upgrade", RELEASE, str(ROOT / "charts" / "cozyrender-webhook"),
                                         "-n", NAMESPACE, "--wait", "--timeout", "5m", values=values))

    results, names = _writes_during(plane, api, namespace, disturb)
    upgrade[1].result()  # the upgrade itself succeeded (raises its error otherwise)
    upgrade[0].shutdown()
    admitted = sorted(name for name, status in results.items() if status == 201)
    assert admitted == names and len(names) == 10, (results, names)
    wait_for("the upgraded Deployment settled", lambda: deployment_settled(plane))
    pods = webhook_pods(plane)
    assert not before & {p["metadata"]["name"] for p in pods}, (before, pods)  # every pod replaced
    assert all("--reservation-ttl=61" in p["spec"]["containers"][0]["args"] for p in pods)
    plane.node.webhook_values = values


def test_a_pod_that_cannot_sync_its_cache_is_never_ready_and_gets_no_requests(plane, api):
    """A rollout whose new pod cannot reach the API server (a wrong port): it never syncs, so
    never turns Ready, is kept out of the Service's ready endpoints, and every write goes to
    the two old pods; the rollout waits for it (maxUnavailable 0). Rolled back after."""
    old = {p["metadata"]["name"]: p["status"]["podIP"] for p in webhook_pods(plane)}
    broken = {**plane.node.webhook_values,
              "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": plane.node.gateway},
                      {"name": "KUBERNETES_SERVICE_PORT", "value": "1"}]}
    plane.node.helm("upgrade", RELEASE, str(ROOT / "charts" / "cozyrender-webhook"), "-n", NAMESPACE, values=broken)
    try:
        new = wait_for("the new pod started", lambda: [p for p in webhook_pods(plane)
                                                       if p["metadata"]["name"] not in old
                                                       and p["status"].get("podIP")
                                                       and any(s.get("state", {}).get("running")
                                                               for s in p["status"].get("containerStatuses", []))])
        new_ip = new[0]["status"]["podIP"]
        namespace = make_tenant(api, "unsynced", {A100: 20})
        wait_cached_tenant(plane, namespace)
        for i in range(12):
            status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, f"vm{i}", 1))
            assert status == 201, body
        pod = kubectl_json(plane, "-n", NAMESPACE, "get", "pod", new[0]["metadata"]["name"])
        assert not ready(pod)
        slices = kubectl_json(plane, "-n", NAMESPACE, "get", "endpointslices",
                              "-l", f"kubernetes.io/service-name={RELEASE}")["items"]
        ready_addresses = {a for s in slices for e in s.get("endpoints", [])
                           if e.get("conditions", {}).get("ready") for a in e["addresses"]}
        assert ready_addresses == set(old.values())
        assert decisions(plane, new_ip) == 0  # it answers /metrics, but was sent no review
    finally:
        plane.node.helm("upgrade", RELEASE, str(ROOT / "charts" / "cozyrender-webhook"), "-n", NAMESPACE,
                        "--wait", "--timeout", "5m", values=plane.node.webhook_values)
    wait_for("the Deployment settled again", lambda: deployment_settled(plane))
