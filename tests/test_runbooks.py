"""docs/runbooks.md on the test control plane (issue 29 item 3): the webhook down
(see it, bypass it with the runbook's commands, restore it) and a cache that
cannot be trusted (refusing with the reason, recovering once the role is back).

The plane is this module's own: two replicas behind the balancer, registering
the chart's configuration themselves, as `make cluster` runs them.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import ROOT

BIN = ROOT / ".cache" / "bin"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
APPS = "apps.cozystack.io/v1alpha1"


def section_blocks(title: str) -> list[str]:
    """The ```sh blocks of one runbook (a `## ` section)."""
    text = RUNBOOKS.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^```sh\n(.*?)^```$", section, re.S | re.M)]


# Own plane (issue 36): the runbook takes the webhook down and bypasses it for the whole cluster.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("runbooks"), BIN, webhook_replicas=2)
    plane.start()
    try:
        import yaml

        docs = yaml.safe_load_all((ROOT / "examples" / "injection" / "tenant-a.yaml").read_text())
        kept = [d for d in docs if d and d["kind"] in ("GPUClass", "Tenant")]  # no Flux here: not the HelmRelease
        plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}))
        plane.kubectl("create", "namespace", "tenant-a")
        yield plane
    finally:  # a failed setup stops what it started too
        plane.stop()


def kubectl(plane, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return plane.kubectl(*args, input=input, check=False)


def over_budget(plane, name: str) -> subprocess.CompletedProcess:
    vm = {"apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": name, "namespace": "tenant-a"},
          "spec": {"gpus": [{"class": "a100", "count": 3}]}}
    return kubectl(plane, "create", "-f", "-", input=json.dumps(vm))


def eventually(what: str, predicate, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(0.3)


def run_block(plane, block: str) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, f"{block}\n{done.stdout}{done.stderr}"
    return done


def readyz(plane, index: int) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{plane.ports[f'webhook-{index}']}/readyz", context=context,
                                    timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_webhook_down_bypass_and_restore(plane):
    refused = eventually("the budget refusal", lambda: "exceeded GPU budget" in over_budget(plane, "vm1").stderr)
    assert refused
    for index in range(plane.webhook_replicas):  # every replica down
        plane.stop_process(f"webhook-{index}")
    # see it: the configuration is registered and writes fail calling it
    see = section_blocks("The webhook is down")[0].splitlines()[0]
    assert "cozyrender-webhook" in run_block(plane, see).stdout
    down = over_budget(plane, "vm2")
    assert down.returncode != 0 and 'failed calling webhook "budgets.cozyrender.io"' in down.stderr, down.stderr
    # a label-only edit is not sent to the webhook: it goes through while it is down
    labelled = kubectl(plane, "label", "tenants.apps.cozystack.io", "a", "-n", "tenant-root", "runbook=down")
    assert labelled.returncode == 0, labelled.stderr
    # bypass: the runbook's commands, as written
    run_block(plane, section_blocks("The webhook is down")[1])
    admitted = eventually("the write admitted unchecked", lambda: over_budget(plane, "vm3").returncode == 0, 30)
    assert admitted
    # restore: the replicas come back, one registers the configuration once ready
    for index in range(plane.webhook_replicas):
        plane.start_webhook(index)
    for index in range(plane.webhook_replicas):
        plane.wait_webhook(index)
    eventually("the configuration registered again", lambda: kubectl(
        plane, "get", "validatingwebhookconfiguration", "cozyrender-webhook").returncode == 0, 60)
    again = eventually("the budget enforced again", lambda: "exceeded GPU budget" in over_budget(plane, "vm4").stderr)
    assert again


def test_stale_cache_refuses_then_recovers(plane):
    """The chart's role for tenant-root's values Secret lost (as when tenant-root is deleted and
    made again): a replica that starts without it never becomes ready, and refuses saying
    why; with the role back it syncs, and writes are decided again."""
    role = json.loads(kubectl(plane, "get", "role", "cozyrender-webhook-values", "-n", "tenant-root",
                              "-o", "json").stdout)
    kubectl(plane, "delete", "role", "cozyrender-webhook-values", "-n", "tenant-root")
    for index in range(plane.webhook_replicas):
        plane.stop_process(f"webhook-{index}")
        plane.start_webhook(index)
    status, reason = eventually("the replica not ready, saying why", lambda: (
        (s := readyz(plane, 0))[0] == 503 and "Secret" in s[1] and s), 90)
    print(f"\n/readyz: {status} {reason.strip()}")
    refused = over_budget(plane, "vm5")
    assert refused.returncode != 0 and "not ready" in refused.stderr and "Secret" in refused.stderr, refused.stderr
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        role["metadata"].pop(key, None)
    kubectl(plane, "create", "-f", "-", input=json.dumps(role))
    for index in range(plane.webhook_replicas):
        plane.wait_webhook(index, timeout=120)
    decided = eventually("writes decided again", lambda: "exceeded GPU budget" in over_budget(plane, "vm6").stderr)
    assert decided
