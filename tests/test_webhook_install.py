"""Installing charts/cozyrender-webhook can never block the cluster (issue 29 item 1),
with real Helm 4 against the real control plane (tools/controlplane).

- The chart checks its prerequisites against the cluster (cert-manager in its
  cert-manager mode, Flux's HelmRelease with fluxInjection, Cozystack's API,
  tenant-root) and says what to install first.
- An install whose replicas never start (this control plane has no kubelet: the
  Deployment's pods are never even created, the node-less stand-in for an image
  that cannot pull or start) registers no webhook configuration: a tenant write
  the budgets refuse is admitted, exactly as before the install, and
  `helm install --wait` reports the failed release.
- Replicas that become ready register the configurations themselves; the same
  write is then refused. Uninstalling leaves nothing registered (the garbage
  collector deletes the configurations with the ClusterRole that owns them).
- A Service-mode configuration on this machine is reached through the
  Service's endpoints (kube-apiserver `--enable-aggregator-routing=true`), never
  through a DNS name: with no endpoint the call is refused saying so (item 7).

On the real node, tests/test_node_cluster.py::test_an_install_whose_image_cannot_start_blocks_nothing_and_reports_the_failure
runs the same install with an image that cannot start: the Deployment's pods
created and failing (ErrImageNeverPull), the same three assertions (nothing
registered, the over-budget write admitted, the release failed), and with the
image that starts, the pods' readiness registering the configuration over the
Service's endpoints.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

BIN = ROOT / ".cache" / "bin"
CHART = ROOT / "charts" / "cozyrender-webhook"
NAMESPACE = "cozyrender-system"
RELEASE = "cozyrender-webhook"  # the release name cluster.py's replicas register for
APPS = "apps.cozystack.io/v1alpha1"
TLS_SECRET = ("--set", "tls.certManager=false", "--set", "tls.secretName=cozyrender-webhook-tls")
SECRET_MODE = (*TLS_SECRET, "--set", "networkPolicy.type=none")  # this test cluster runs no Cilium


# Own plane (issue 36): installs and uninstalls the chart's cluster-wide webhook configurations.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    for binary in ("kube-apiserver", "etcd", "kube-controller-manager", "helm4"):
        assert (BIN / binary).exists(), f"{BIN / binary}: run `make controlplane binaries`"
    plane = ControlPlane(tmp_path_factory.mktemp("install"), BIN, webhook_replicas=0,
                         namespaces=("cozy-system", NAMESPACE))
    plane.start()
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def helm_env(plane, tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ, KUBECONFIG=str(plane.kubeconfig))
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    return env


def helm(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "helm4"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def ca_values(plane) -> tuple[str, ...]:
    return ("--set", f"tls.caBundle={base64.b64encode(plane.ca_pem).decode()}")


def registered(plane) -> list[str]:
    names = []
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        items = json.loads(plane.kubectl("get", kind, "-o", "json").stdout)["items"]
        names += [f"{kind}/{item['metadata']['name']}" for item in items]
    return names


def write_vm(plane, namespace: str, name: str, count: int) -> subprocess.CompletedProcess:
    vm = {"apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": name, "namespace": namespace},
          "spec": {"gpus": [{"class": "a100", "count": count}]}}
    return plane.kubectl("create", "-f", "-", input=json.dumps(vm), check=False)


def replica_gave_up(plane, index: int) -> bool:
    """The replica's registration was refused (its RBAC is gone), or it is no longer ready."""
    import ssl
    import urllib.error
    import urllib.request

    if "registering the webhook configurations failed" in (plane.logs / f"webhook-{index}.log").read_text():
        return True
    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    try:
        urllib.request.urlopen(f"https://127.0.0.1:{plane.ports[f'webhook-{index}']}/readyz", context=context,
                               timeout=5)
    except urllib.error.HTTPError as err:
        return err.code == 503
    return False


def wait_for(what: str, predicate, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(0.2)


def test_prerequisites_are_checked_with_a_clear_message(plane, helm_env):
    """`helm install --dry-run=server` (lookups on) names the missing prerequisite; this
    cluster has no cert-manager, no Flux and, at first, no tenant-root."""
    cases = [
        ((), "install cert-manager first"),
        ((*SECRET_MODE, *ca_values(plane), "--set", "fluxInjection=true"), "install Flux's helm-controller"),
        ((*TLS_SECRET, *ca_values(plane)), "serves no cilium.io/v2 CiliumNetworkPolicy: on a cluster without Cilium"),
        ((*SECRET_MODE, *ca_values(plane)), "the namespace tenant-root does not exist: install cozystack-basics"),
    ]
    for values, message in cases:
        done = helm(helm_env, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=server", *values)
        assert done.returncode != 0 and message in done.stderr, (values, done.stderr)
    plane.kubectl("create", "namespace", "tenant-root")
    done = helm(helm_env, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=server", *SECRET_MODE,
                *ca_values(plane))
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def tenant(plane) -> str:
    """tenant-a with a budget of 2 A100s (written before anything is installed)."""
    if plane.kubectl("get", "namespace", "tenant-root", check=False).returncode != 0:
        plane.kubectl("create", "namespace", "tenant-root")
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
        "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                 "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/a100"}}))
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": "a", "namespace": "tenant-root"},
        "spec": {"resourceQuotas": {"a100.gpuclass.cozystack.io/devices": 2}}}))
    plane.kubectl("create", "namespace", "tenant-a")
    before = write_vm(plane, "tenant-a", "before-install", 3)  # over budget: no webhook yet
    assert before.returncode == 0, before.stderr
    return "tenant-a"


def test_a_webhook_that_cannot_start_blocks_nothing_and_the_release_fails(plane, helm_env, tenant):
    done = helm(helm_env, "install", RELEASE, str(CHART), "-n", NAMESPACE, *SECRET_MODE, *ca_values(plane),
                "--wait=watcher", "--timeout", "15s")
    assert done.returncode != 0, done.stdout
    status = json.loads(helm(helm_env, "status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert status["info"]["status"] == "failed", status["info"]
    print(f"\nhelm install --wait: {done.stderr.strip().splitlines()[-1]}")
    assert registered(plane) == []
    # exactly as before the install: the over-budget write is admitted, unchecked
    after = write_vm(plane, tenant, "after-failed-install", 3)
    assert after.returncode == 0, after.stderr


def test_a_service_mode_webhook_is_reached_through_endpoints_never_dns(plane, helm_env, tenant):
    """The failed release's configuration (Service mode) registered by hand: kube-apiserver
    looks for the Service's endpoints (none: no pod ever ran) and refuses the write
    saying so, without resolving `<service>.<namespace>.svc` or dialing anything."""
    source = json.loads(plane.kubectl("get", "configmap", f"{RELEASE}-webhooks", "-n", NAMESPACE, "-o",
                                      "json").stdout)
    configuration = yaml.safe_load(source["data"]["validating.yaml"])
    assert "service" in configuration["webhooks"][0]["clientConfig"]
    plane.kubectl("apply", "-f", "-", input=json.dumps(configuration))
    try:
        def refused() -> bool:
            done = write_vm(plane, tenant, f"svc-{time.monotonic_ns()}", 1)
            refused.message = done.stderr
            return done.returncode != 0

        wait_for("the Service-mode webhook called", refused, 30)
        message = refused.message
        print(f"\nService mode, no endpoint: {message.strip()}")
        assert "failed calling webhook" in message and "no endpoints available for service" in message, message
        for dialed in ("lookup", "no such host", "dial tcp", "i/o timeout"):
            assert dialed not in message, message
    finally:
        plane.kubectl("delete", "validatingwebhookconfiguration", RELEASE)


def test_ready_replicas_register_and_uninstalling_leaves_nothing(plane, helm_env, tenant):
    """Two replicas on this machine (as `make cluster` runs them) register the
    configuration once ready; uninstalling the release deletes it and the replicas,
    whose RBAC went with it, cannot register it again."""
    plane.webhook_replicas = 2
    plane.start_webhooks()  # registers from the ConfigMap (URL mode), waits for the configuration
    assert registered(plane) == [f"validatingwebhookconfigurations/{RELEASE}", f"mutatingwebhookconfigurations/{RELEASE}"]
    configuration = json.loads(plane.kubectl("get", "validatingwebhookconfiguration", RELEASE, "-o", "json").stdout)
    assert configuration["metadata"]["ownerReferences"][0]["name"] == f"{RELEASE}-read"
    answers = []

    def budget_refused() -> bool:  # the API server's view of the configurations follows within moments
        answers.append(write_vm(plane, tenant, "over-budget", 3).stderr)
        return "exceeded GPU budget" in answers[-1]

    wait_for(f"the over-budget write refused by the registered webhook ({answers[-1:]})", budget_refused, 30)
    done = helm(helm_env, "uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert done.returncode == 0, done.stderr
    wait_for("the configuration deleted with its owner", lambda: registered(plane) == [], 60)
    # the replicas still run: each next pass fails (no RBAC), or the replica stops being ready
    for index in range(plane.webhook_replicas):
        wait_for("the replica's next registration pass refused", lambda index=index: replica_gave_up(plane, index), 90)
    assert registered(plane) == []
    admitted = write_vm(plane, tenant, "after-uninstall", 3)
    assert admitted.returncode == 0, admitted.stderr
