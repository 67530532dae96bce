"""Real Flux: helm-controller (v1.4.3, the newest the Go module proxy serves;
Cozystack ships v1.5.0) against the real control plane, tenant HelmReleases
shaped as cozystack-api writes them, postRenderers injected.

The control plane is this module's own (tools/controlplane, no other test's
CRDs): the real Flux CRDs (HelmRelease; ExternalArtifact, HelmChart,
OCIRepository from source-controller v1.8.0), the Cilium and Keycloak CRDs the
tenant chart renders. cozystack-basics is installed with real Helm and the
post-renderer (it creates tenant-root and its cozystack-values Secret, as in
Cozystack). The test plays the external producer of the ExternalArtifact
`cozystack-tenant-application-default-tenant` in cozy-system: it serves the
tenant chart archive (packaged as `make dist` packages it) over loopback HTTP
and sets the artifact's status as source-controller would. helm-controller
runs with the ExternalArtifact feature gate, as Cozystack runs it.

The mutating admission is the real `cozyrender webhook --flux-injection`
process, registered by the webhook chart's MutatingWebhookConfiguration
(failurePolicy Fail); the loop that keeps postRenderers current
(`cozyrender.flux.controller`) runs in that process.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from cozyrender import flux
from cozyrender.flux import controller as flux_controller
from cozyrender.postrender import post_render
from cozyrender.webhook.mutate import mutate

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
FLUX_CRDS = ROOT / ".cache" / "flux-crds"
TENANT = ROOT / "charts" / "tenant"
UPSTREAM = ROOT / "tests" / "data" / "cozystack-3c780acd"
ARTIFACT = "cozystack-tenant-application-default-tenant"
FLUX_LABELS = ("helm.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/namespace")

sys.path.insert(0, str(ROOT / "tests"))
from test_cluster_helm import BUNDLED_CRDS, _crd  # noqa: E402  (the same CRDs, built the same way)
from test_flux_inject import api_release as cozystack_release  # noqa: E402  (one shape of cozystack-api's release)

sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
from common import free_port  # noqa: E402


class _Serve(threading.Thread):
    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server

    def run(self):
        self.server.serve_forever(poll_interval=0.1)


# Own plane (issue 36): the real Flux CRDs in place of the bundled HelmRelease CRD the others install.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    for binary in ("kube-apiserver", "etcd", "helm-controller"):
        assert (BIN / binary).exists(), f"{BIN / binary}: run `make controlplane flux-controllers`"
    assert (FLUX_CRDS / ".built").exists(), "run `make flux-controllers`"
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("flux-cluster"), BIN, webhook_replicas=0,
                         namespaces=("cozy-system", "cozy-monitoring", "cozyrender-system"))
    plane.start()
    try:
        crds = [yaml.safe_load(p.read_text()) for p in sorted(FLUX_CRDS.glob("*.yaml"))]
        crds += [_crd(*spec) for spec in BUNDLED_CRDS if spec[3] != "HelmRelease"]
        plane.kubectl("apply", "--server-side", "-f", "-",
                      input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
        plane.wait_crds_established()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def client(plane):
    from lightkube import Client, KubeConfig

    return Client(config=KubeConfig.from_file(str(plane.kubeconfig)))


@pytest.fixture(scope="module")
def helm_env(plane, tmp_path_factory):
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ)
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["KUBECONFIG"] = str(plane.kubeconfig)
    return env


def helm(env, *args) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / "helm3"), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"helm {' '.join(map(str, args))}: {done.stderr}"
    return done


def install_basics(env, tmp_path: Path, gpu_vgpu: bool, action: str = "install") -> None:
    values = yaml.safe_load((UPSTREAM / "basics-full-platform" / "values.yaml").read_text())
    values["_cluster"]["gpu-vgpu"] = gpu_vgpu
    path = tmp_path / f"basics-{gpu_vgpu}.yaml"
    path.write_text(yaml.safe_dump(values))
    helm(env, action, "cozystack-basics", ROOT / "charts" / "cozystack-basics", "-n", "cozy-system",
         "--post-renderer", "cozyrender", "--post-renderer-args", "post-render", "-f", path)


@pytest.fixture(scope="module")
def artifact(plane, helm_env, tmp_path_factory):
    """The tenant chart archive served on loopback; the ExternalArtifact's status points at it."""
    folder = tmp_path_factory.mktemp("artifacts")
    helm(helm_env, "package", TENANT, "-d", folder)  # as `make dist` packages it
    archive = next(folder.glob("tenant-*.tgz"))
    handler = type("H", (http.server.SimpleHTTPRequestHandler,), {
        "log_message": lambda *a: None,
        "__init__": lambda self, *a, **k: http.server.SimpleHTTPRequestHandler.__init__(
            self, *a, directory=str(folder), **k)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    _Serve(server).start()
    digest = "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    url = f"http://127.0.0.1:{server.server_address[1]}/{archive.name}"
    version = yaml.safe_load((TENANT / "Chart.yaml").read_text())["version"]
    obj = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
           "metadata": {"name": ARTIFACT, "namespace": "cozy-system"},
           "spec": {"sourceRef": {"apiVersion": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
                                  "name": "tenant"}}}
    plane.kubectl("apply", "-f", "-", input=json.dumps(obj))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"artifact": {"url": url, "digest": digest, "revision": f"{version}@{digest}",
                                      "path": archive.name, "lastUpdateTime": now,
                                      "size": archive.stat().st_size},
                         "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                                         "message": "served by the test", "lastTransitionTime": now,
                                         "observedGeneration": 1}]}}
    plane.kubectl("patch", "externalartifact", ARTIFACT, "-n", "cozy-system", "--subresource=status",
                  "--type=merge", "-p", json.dumps(status))
    yield archive
    server.shutdown()


@pytest.fixture(scope="module")
def webhook(plane, client, artifact):
    """`cozyrender webhook --flux-injection`, the real server (one replica behind
    the balancer), registered from charts/cozyrender-webhook with
    `fluxInjection: true`: its /mutate sets the postRenderers, and the loop in
    the same process keeps them current."""
    plane.webhook_replicas, plane.webhook_args = 1, ("--flux-injection",)
    plane.start_webhooks()
    configuration = next(obj for obj in plane.webhook_configurations
                         if obj["kind"] == "MutatingWebhookConfiguration")
    yield configuration
    plane.kubectl("delete", "mutatingwebhookconfiguration", configuration["metadata"]["name"], "--ignore-not-found")


@pytest.fixture(scope="module")
def helm_controller(plane, artifact, tmp_path_factory):
    log = tmp_path_factory.mktemp("helm-controller") / "log"
    env = dict(os.environ, KUBECONFIG=str(plane.kubeconfig))
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(BIN / "helm-controller"), "--feature-gates=ExternalArtifact=true",
             f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}",
             "--concurrent=4", "--requeue-dependency=2s"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    yield log
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class _Loop:
    """The controller loop runs in the webhook's process; `stop()` stops that
    process, which is what uninstalling the webhook does to it."""

    def __init__(self, plane, client):
        self.plane, self.client = plane, client

    def stop(self):
        self.plane.stop_process("webhook-0")


@pytest.fixture(scope="module")
def controller(plane, client, webhook):
    return _Loop(plane, client)


@pytest.fixture(scope="module")
def basics(plane, helm_env, tmp_path_factory):
    install_basics(helm_env, tmp_path_factory.mktemp("basics"), True)


def api_release(name: str, namespace: str, spec_values: dict) -> dict:
    """A tenant HelmRelease as cozystack-api writes it, Flux's intervals shortened for the tests."""
    retry = {"name": "RetryOnFailure", "retryInterval": "2s"}
    release = cozystack_release(
        name, namespace, spec_values, interval="20s",
        install={"timeout": "2m", "disableWait": True, "strategy": retry},
        upgrade={"timeout": "2m", "disableWait": True, "strategy": retry})
    assert release["spec"]["chartRef"]["name"] == ARTIFACT
    return release


def get(plane, *args) -> dict | None:
    done = plane.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def condition(plane, name: str, namespace: str, kind: str = "Ready") -> dict:
    hr = get(plane, "helmrelease", name, "-n", namespace) or {}
    return next((c for c in (hr.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def wait_ready(plane, name: str, namespace: str, timeout: float = 120) -> dict:
    hr = {}

    def ready() -> bool:
        nonlocal hr
        hr = get(plane, "helmrelease", name, "-n", namespace) or {}
        status = hr.get("status") or {}
        return status.get("observedGeneration") == hr["metadata"].get("generation") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])

    assert flux_controller.wait_until(ready, timeout), (name, namespace, hr.get("status"))
    return hr


def values_of(plane, namespace: str) -> dict:
    secret = get(plane, "secret", "cozystack-values", "-n", namespace)
    return yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))


def expected_objects(plane, helm_env, release: str, namespace: str, spec_values: dict) -> dict:
    """What `helm install --post-renderer cozyrender` gives for the same values
    (the parent's cozystack-values, then the Tenant's spec) against this
    cluster (the chart looks the parent namespace up): Helm 3's render with
    lookups (`--dry-run=server`) and the post-renderer."""
    from cozyrender.render.values import merge_values

    values = merge_values(values_of(plane, namespace), spec_values)
    path = Path(helm_env["HELM_CONFIG_HOME"]) / f"values-{release}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(values))
    out = helm(helm_env, "template", release, TENANT, "-n", namespace, "-f", path, "--dry-run=server",
               "--post-renderer", "cozyrender", "--post-renderer-args", "post-render").stdout
    return flux.parse_objects(out)


def stored_manifest(helm_env, release: str, namespace: str) -> dict:
    """The release helm-controller stored: its manifest and its hooks (post-rendered too since
    helm-controller 1.5), without helm-controller's own labels."""
    out = "".join(subprocess.run([str(BIN / "helm4"), "get", what, release, "-n", namespace], env=helm_env,
                                 capture_output=True, text=True, timeout=60, check=True).stdout
                  for what in ("manifest", "hooks"))
    objects = flux.parse_objects(out)
    for obj in objects.values():
        labels = obj["metadata"].get("labels") or {}
        for label in FLUX_LABELS:  # helm-controller's own labels on every object
            labels.pop(label, None)
        if not labels:
            obj["metadata"].pop("labels", None)
    return objects


TREE = [  # (release name, parent namespace, spec) : depth 1, 2, 3
    ("a", "tenant-root", {"gpu": {"vgpu": True},
                          "resourceQuotas": {"cpu": "8", "memory": "16Gi", "a100.gpuclass.cozystack.io/devices": 4}}),
    ("b", "tenant-a", {"gpu": {"vgpu": True}, "resourceQuotas": {"gpuclass.cozystack.io/devices": 2}}),
    ("c", "tenant-a-b", {"gpu": {"vgpu": True}, "resourceQuotas": {"cpu": "2", "gpuclass.cozystack.io/devices": 1}}),
]


def _child(name: str, parent: str) -> str:
    return f"tenant-{name}" if parent == "tenant-root" else f"{parent}-{name}"


@pytest.fixture(scope="module")
def tree(plane, basics, webhook, helm_controller, controller):
    for name, parent, spec in TREE:
        plane.kubectl("apply", "-f", "-", input=json.dumps(api_release(name, parent, spec)))
        wait_ready(plane, f"tenant-{name}", parent, timeout=180)
    return TREE


def test_depth3_tree_equals_helm_with_the_post_renderer(plane, helm_env, tree):
    for name, parent, spec in tree:
        hr = get(plane, "helmrelease", f"tenant-{name}", "-n", parent)
        assert flux.is_owned(hr["spec"]["postRenderers"][0])  # injected: cozystack-api wrote none
        expected = expected_objects(plane, helm_env, f"tenant-{name}", parent, spec)
        actual = stored_manifest(helm_env, f"tenant-{name}", parent)
        assert set(actual) ^ set(expected) == set(), (set(actual) - set(expected), set(expected) - set(actual))
        for key in expected:
            assert flux.same(actual[key], expected[key]), (flux.describe(key), actual[key], expected[key])
        namespace = get(plane, "namespace", _child(name, parent))
        assert namespace["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"
        assert not any(a.startswith("render.cozystack.io/") for a in namespace["metadata"].get("annotations") or {})
        assert values_of(plane, _child(name, parent))["_namespace"]["vgpu"] is True
    quota = get(plane, "resourcequota", "tenant-quota", "-n", "tenant-a-b")
    assert quota is None  # GPU-only tenant-a-b: no quota, no LimitRange
    assert get(plane, "limitrange", "tenant-range-limits", "-n", "tenant-a-b") is None
    quota = get(plane, "resourcequota", "tenant-quota", "-n", "tenant-a")
    assert not any("gpuclass" in key for key in quota["spec"]["hard"])


def test_flip_at_the_root_reaches_depth3(plane, helm_env, tree, tmp_path, record_property):
    """_cluster.gpu-vgpu off at the root (cozystack-basics upgraded with the
    post-renderer): the label and _namespace.vgpu flip all the way down with
    no write to any tenant release by anyone but the controller loop."""
    deepest = _child("c", "tenant-a-b")
    started = time.monotonic()
    install_basics(helm_env, tmp_path, False, action="upgrade")
    flipped = flux_controller.wait_until(
        lambda: (get(plane, "namespace", deepest) or {}).get("metadata", {}).get("labels", {}).get(
            "namespace.cozystack.io/vgpu") == "false", 240, step=0.1)
    elapsed = time.monotonic() - started
    assert flipped, condition(plane, "tenant-c", "tenant-a-b")
    record_property("flip_to_depth3_seconds", round(elapsed, 2))
    print(f"\nflip at the root -> depth-3 label: {elapsed:.1f} s")
    for name, parent, _ in tree:
        wait_ready(plane, f"tenant-{name}", parent)
        ns = _child(name, parent)
        assert get(plane, "namespace", ns)["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "false"
        assert "vgpu" not in (values_of(plane, ns).get("_namespace") or {})
    for name, parent, spec in tree:  # and still exactly the post-renderer's output
        expected = expected_objects(plane, helm_env, f"tenant-{name}", parent, spec)
        actual = stored_manifest(helm_env, f"tenant-{name}", parent)
        assert all(flux.same(actual[k], expected[k]) for k in expected) and sorted(actual) == sorted(expected)


def test_stale_patches_fail_the_release_loudly(plane, tree, controller, webhook):
    """Issue 17's scenario on real Flux: a GPU-only tenant's static patches
    (they drop its ResourceQuota and LimitRange), then cpu: "4" added to its
    resourceQuotas without regenerating. The mutating webhook is taken away
    and the loop stopped (nothing recomputes): helm-controller must fail the
    upgrade, saying why, and apply nothing of it."""
    controller.stop()  # no recomputation either: the patches are static, as in Git (and the
    # replica, which registers its configurations while it runs, is gone before they are deleted)
    plane.kubectl("delete", "mutatingwebhookconfiguration", webhook["metadata"]["name"])
    spec = {"gpu": {"vgpu": False}, "resourceQuotas": {"gpuclass.cozystack.io/devices": 2}}
    release = api_release("stale", "tenant-root", spec)
    parent = flux_controller.Reader(controller.client).parent_state("tenant-root")
    release["spec"]["postRenderers"] = flux.inject.postrenderers_for(release, parent, TENANT)
    plane.kubectl("apply", "-f", "-", input=json.dumps(release))
    wait_ready(plane, "tenant-stale", "tenant-root")
    assert get(plane, "resourcequota", "tenant-quota", "-n", "tenant-stale") is None
    plane.kubectl("patch", "helmrelease", "tenant-stale", "-n", "tenant-root", "--type=merge", "-p",
                  json.dumps({"spec": {"values": {"resourceQuotas": {"cpu": "4"}}}}))

    def failed() -> bool:
        ready = condition(plane, "tenant-stale", "tenant-root")
        return ready.get("status") == "False" and "test" in ready.get("message", "")

    assert flux_controller.wait_until(failed, 120), condition(plane, "tenant-stale", "tenant-root")
    message = condition(plane, "tenant-stale", "tenant-root")["message"]
    print(f"\nhelm-controller: {message}")
    assert "/spec/hard" in message or "test failed" in message, message
    # nothing applied: no new revision (the quota holding limits.cpu was never
    # created and then deleted by stale patches; Helm never got the render)
    released = subprocess.run([str(BIN / "helm4"), "history", "tenant-stale", "-n", "tenant-root", "-o",
                               "json"], env=dict(os.environ, KUBECONFIG=str(plane.kubeconfig)),
                              capture_output=True, text=True, check=True)
    assert [r["status"] for r in json.loads(released.stdout)] == ["deployed"]


def test_without_the_webhook_every_release_stays_installable(plane, tree, controller, webhook):
    """Uninstalling the webhook (its MutatingWebhookConfiguration and the loop)
    blocks nothing: a new release without postRenderers installs, and the
    existing ones reconcile."""
    controller.stop()
    plane.kubectl("delete", "mutatingwebhookconfiguration", webhook["metadata"]["name"], "--ignore-not-found")
    plane.kubectl("apply", "-f", "-", input=json.dumps(api_release("plain", "tenant-root", {})))
    hr = wait_ready(plane, "tenant-plain", "tenant-root")
    assert not hr["spec"].get("postRenderers")
    for name, parent, _ in tree:
        plane.kubectl("annotate", "helmrelease", f"tenant-{name}", "-n", parent, "--overwrite",
                      f"reconcile.fluxcd.io/requestedAt={time.time()}")
        wait_ready(plane, f"tenant-{name}", parent)
