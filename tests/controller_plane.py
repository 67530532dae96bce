"""A real control plane with `cozyrender controller` replicas, for the live
controller tests: the chart's controller RBAC and ValidatingAdmissionPolicy
applied from `helm template charts/cozyrender-webhook`, the replicas
authenticating as the chart's `cozyrender-controller` service account (a
client certificate for that user), so a missing grant fails a test.

Nodes are written through the API (no kubelet here): `node()` builds one
with a Ready condition and extended allocatable resources, `set_node_status`
writes its status subresource. Pods are bound by setting spec.nodeName (no
scheduler)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from kubeapi import KubeAPI

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
NAMESPACE = "cozyrender-system"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:cozyrender-controller"
APPLIED = frozenset({"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
# Short timings so a failover test takes seconds: lease 4 s, renew deadline 3 s, retry 0.5 s.
TIMINGS = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")


def wait_for(predicate, timeout: float = 60.0, step: float = 0.1, what: str = "the condition"):
    """Poll until `predicate()` is truthy; its value. Generous timeouts: the machine is shared."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as err:  # noqa: BLE001 - not yet
            last = err
        if last and not isinstance(last, Exception):
            return last
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class ControllerPlane:
    def __init__(self, plane, namespace: str = NAMESPACE, release: str = "cozyrender-webhook") -> None:
        """`namespace` and `release`: where and as what the chart is rendered (a
        test on a shared plane takes its own, so its service account, RBAC and
        Lease are its own)."""
        self.plane = plane
        self.api = KubeAPI(plane)
        self.namespace, self.release = namespace, release
        cert, key = plane.ca.issue(f"controller-client-{namespace}",
                                   f"system:serviceaccount:{namespace}:cozyrender-controller",
                                   organizations=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
                                   client=True)
        from common import client_kubeconfig

        self.kubeconfig = plane.dir / f"controller-kubeconfig-{namespace}"
        self.kubeconfig.write_text(yaml.safe_dump(client_kubeconfig(plane.server, plane.pki / "ca.crt", cert, key,
                                                              "cozyrender-controller")))
        self.replicas: dict[str, int] = {}  # name -> metrics port

    def apply_chart(self, *sets: str) -> list[dict]:
        rendered = subprocess.run(
            [str(BIN / "helm4"), "template", self.release, str(ROOT / "charts" / "cozyrender-webhook"),
             "--namespace", self.namespace, *sets], capture_output=True, text=True, check=True,
            env={**os.environ, "HELM_CACHE_HOME": str(self.plane.dir / "helm"),
                 "HELM_CONFIG_HOME": str(self.plane.dir / "helm"), "HELM_DATA_HOME": str(self.plane.dir / "helm")})
        documents = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
        [deployment] = [doc for doc in documents if doc["kind"] == "Deployment"
                        and doc["metadata"]["name"].endswith("-controller")]
        self.chart_args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        objects = [doc for doc in documents if doc["kind"] in APPLIED]
        self.plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                  "items": objects}))
        return objects

    def start(self, name: str, controllers: str = "status,licenses,metrics", *extra: str) -> int:
        """A replica run as the chart's Deployment runs it (its args), on a
        local port, with the test's short lease timings and `controllers`."""
        from common import free_port

        port = free_port()
        self.replicas[name] = port
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.plane._spawn(name, [
            sys.executable, "-m", "cozyrender", "controller", *self.chart_args, "--kubeconfig", str(self.kubeconfig),
            "--identity", name, "--listen", f"127.0.0.1:{port}", "--controllers", controllers, *TIMINGS, *extra],
            env=env)
        return port

    def kill(self, name: str) -> None:
        """SIGKILL: no lease release, as when a node dies."""
        pid = self.plane.pids.pop(name)
        os.killpg(pid, signal.SIGKILL)
        self.plane.processes.pop(name).wait()
        self.replicas.pop(name, None)

    def terminate(self, name: str) -> None:
        """SIGTERM, as a Deployment's rollout sends it, and wait for the exit
        (waiting on the process itself: a process group's zombie would keep
        ControlPlane.stop_process polling for its whole timeout)."""
        pid = self.plane.pids.pop(name)
        os.killpg(pid, signal.SIGTERM)
        self.plane.processes.pop(name).wait(timeout=30)
        self.replicas.pop(name, None)

    def stop(self, name: str) -> None:
        self.plane.stop_process(name)
        self.replicas.pop(name, None)

    def metrics(self, name: str) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.replicas[name]}/metrics", timeout=5) as response:
            return response.read().decode()

    def holder(self) -> str:
        status, lease = self.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/"
                                     f"{self.release}-controller")
        return (lease.get("spec") or {}).get("holderIdentity") or "" if status == 200 else ""

    # ------------------------------------------------------------------ objects

    def patch(self, path: str, body: dict, subresource: str = "") -> dict:
        status, answer = self.api.request("PATCH", path + (f"/{subresource}" if subresource else ""), body,
                                          content_type="application/merge-patch+json")
        assert status == 200, answer
        return answer

    def create(self, path: str, body: dict) -> dict:
        status, answer = self.api.create(path, body)
        assert status == 201, answer
        return answer

    def delete_pod(self, path: str) -> None:
        """Delete a bound pod at once: with no kubelet to finish a graceful
        deletion, the pod would stay terminating (and, as the scheduler
        counts it, holding its devices) for ever."""
        self.delete(path + "?gracePeriodSeconds=0")

    def delete(self, path: str) -> None:
        status, answer = self.api.delete(path)
        assert status in (200, 202, 404), answer


def node(name: str, allocatable: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def node_status(allocatable: dict[str, str], ready: bool = True) -> dict:
    stamp = "2026-01-01T00:00:00Z"
    figures = {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable}
    return {"status": {"capacity": figures, "allocatable": figures, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "reason": "Test", "message": "written by the test",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}


def add_node(cp: ControllerPlane, name: str, allocatable: dict[str, str], ready: bool = True) -> None:
    cp.create("/api/v1/nodes", node(name, allocatable))
    cp.patch(f"/api/v1/nodes/{name}", node_status(allocatable, ready), "status")


def pod(name: str, node_name: str, requests: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node_name, "automountServiceAccountToken": False,
                     "containers": [{"name": "vm", "image": "registry.invalid/none",
                                     "resources": {"requests": requests, "limits": requests}}]}}


def gpuclass(name: str, resource: str, mode: str = "passthrough", **spec) -> dict:
    body = {"vendor": "NVIDIA", "model": "A100", "mode": mode, "memory": "40Gi", "resourceName": resource,
            "sourceKind": "PCIHostDevice" if mode == "passthrough" else "MediatedDevice", **spec}
    if mode != "passthrough":
        body.setdefault("profile", "A100-4C")
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": name}, "spec": body}


def start_plane(tmp_path_factory, namespaces=("cozy-system", NAMESPACE, "tenant-root")):
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("controller-cluster"), BIN, webhook_replicas=0,
                         namespaces=tuple(namespaces))
    plane.start()
    return plane
