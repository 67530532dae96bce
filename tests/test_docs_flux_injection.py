"""docs/guides/flux-injection.md, followed on `make cluster FLUX=1` (issue 29 item 2).

Every ```bash block of the page runs, in order, under `bash -eu` (as a reader types them: a pipe's status is its last command's)
from the repository root, on this module's own control plane started as
`cluster.py up --flux` starts it (helm-controller, the Flux CRDs, the tenant
chart as its ExternalArtifact, two webhook replicas with injection available
but off, tenant-root made by the cluster, as an existing namespace). `helm`
is Helm 3, `kubectl` and `cozyrender` are the pinned ones, `make` targets act
on this cluster (CLUSTER_DIR). Each block must exit 0; what the page says each
step shows is then asserted on the cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = ROOT / ".cache" / "bin"
GUIDE = ROOT / "docs" / "guides" / "flux-injection.md"
BLOCK = re.compile(r"^```bash[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)


def bash_blocks(path: Path = GUIDE) -> list[str]:
    return [match.group("body") for match in BLOCK.finditer(path.read_text(encoding="utf-8"))]


# Own plane (issue 36): the guide turns Flux injection on and off for the whole cluster.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    for binary in ("kube-apiserver", "etcd", "helm-controller", "helm3", "kubectl"):
        assert (BIN / binary).exists(), f"{BIN / binary}: run `make controlplane binaries flux-controllers`"
    plane = ControlPlane(tmp_path_factory.mktemp("flux-guide"), BIN, webhook_replicas=2, flux=True,
                         webhook_args=("--flux-injection",), flux_injection=False)  # as `up --flux`
    plane.start()
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def shell_env(plane, tmp_path_factory) -> dict:
    tools = tmp_path_factory.mktemp("tools")
    (tools / "helm").symlink_to(BIN / "helm3")
    (tools / "kubectl").symlink_to(BIN / "kubectl")
    home = tmp_path_factory.mktemp("helm-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    env.update(PATH=os.pathsep.join([str(tools), str(Path(sys.executable).parent), env.get("PATH", "")]),
               KUBECONFIG=str(plane.kubeconfig), CLUSTER_DIR=str(plane.dir), PY=sys.executable,
               HELM_CONFIG_HOME=str(home / "config"), HELM_DATA_HOME=str(home / "data"),
               HELM_CACHE_HOME=str(home / "cache"))
    return env


def get(plane, *args) -> dict:
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)


def test_the_guide_has_a_command_for_every_step():
    text = GUIDE.read_text(encoding="utf-8")
    steps = re.findall(r"^### (\d)\. ", text, re.M)
    assert steps == ["1", "2", "3", "4", "5", "6"]
    for number in steps:  # each step section holds at least one block the test runs
        section = text.split(f"### {number}. ", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        assert "```bash" in section, f"step {number} has no command"
    assert "fluxInjection=true" in text and "fluxInjection=false" in text and "--flux-injection" in text


def test_following_the_guide_on_make_cluster(plane, shell_env):
    outputs = []
    for index, body in enumerate(bash_blocks()):
        done = subprocess.run(["bash", "-eu", "-c", body], cwd=ROOT, env=shell_env,
                              capture_output=True, text=True, timeout=900)
        outputs.append(done.stdout)
        assert done.returncode == 0, f"block {index}:\n{body}\nexited {done.returncode}:\n{done.stdout}{done.stderr}"
    joined = "\n".join(outputs)

    # step 2: tenant-root adopted, labelled from the post-renderer, the host label empty not null
    labels = get(plane, "namespace", "tenant-root")["metadata"]["labels"]
    assert labels["namespace.cozystack.io/vgpu"] == "true" and labels["namespace.cozystack.io/host"] == ""
    # step 5: the preview, before injection was on, listed what the first reconcile did
    first = joined.split("HelmRelease tenant-root/tenant-a: ", 1)[1].split("tenant release(s)", 1)[0]
    assert first.startswith("gets cozyrender's entry"), first
    for line in ("label              Namespace tenant-a: namespace.cozystack.io/vgpu=true",
                 "delete             LimitRange tenant-a/tenant-range-limits",
                 "delete             ResourceQuota tenant-a/tenant-quota",
                 "remove-annotation  Namespace tenant-a: render.cozystack.io/vgpu-requested"):
        assert line in first, first
    # and it was so: step 6's upgrade deleted them; the second preview says current
    assert plane.kubectl("get", "limitrange", "tenant-range-limits", "-n", "tenant-a", check=False).returncode
    assert plane.kubectl("get", "resourcequota", "tenant-quota", "-n", "tenant-a", check=False).returncode
    assert "HelmRelease tenant-root/tenant-a: current" in joined
    # turned off: no postrenderers webhook (the license webhook stays), the validating one stays, enforcement on
    mutating = get(plane, "mutatingwebhookconfiguration", "cozyrender-webhook")
    assert [hook["name"] for hook in mutating["webhooks"]] == ["licenses.cozyrender.io"]
    assert "exceeded GPU budget" in outputs[-1]
    release = get(plane, "helmrelease", "tenant-a", "-n", "tenant-root")
    assert release["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["patch"].startswith("# cozyrender flux")


def test_flux_injection_has_its_own_metrics(plane, shell_env):
    """After the guide: the replicas' /metrics count /mutate answers, the loop's writes and
    its lag; a HelmRelease admission is counted as kind HelmRelease."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    totals: dict[str, float] = {}
    for index in range(plane.webhook_replicas):
        url = f"https://127.0.0.1:{plane.ports[f'webhook-{index}']}/metrics"
        for line in urllib.request.urlopen(url, context=context, timeout=10).read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                totals[name] = totals.get(name, 0.0) + float(value)
    assert totals['cozyrender_flux_loop_writes_total'] >= 1
    assert totals['cozyrender_flux_loop_lag_seconds_count'] >= 1
    assert totals['cozyrender_flux_mutations_total{outcome="patched"}'] \
        + totals['cozyrender_flux_mutations_total{outcome="unchanged"}'] >= 1
    assert any(k.startswith("cozyrender_webhook_decisions_total") and 'kind="HelmRelease"' in k for k in totals)
    assert totals['cozyrender_webhook_registrations_total{outcome="ok"}'] >= 1
