"""Installing from a registry on the real node, as `make cluster` does (issue 33 item 3):
Debian's docker-registry (distribution 2.8) on loopback with TLS and basic authentication
(tools/controlplane/registry.py), the image built by `make image` pushed to it by skopeo and the
webhook chart by `helm push`.

- the chart is installed with `helm install oci://...` (Helm 4, the registry's CA, `helm
  registry login`); without the CA Helm refuses the registry's certificate, and without the login
  the registry refuses Helm (401);
- the webhook pod runs the image pulled by digest from the registry (`image@sha256:...` in its
  spec, the same digest in its status and as the layout's manifest), with the Secret of the
  chart's `imagePullSecrets`, and the node's containerd holds no image of the name `make image`
  gives (nothing was imported by hand);
- containerd reaches the registry through its registry host configuration (`config_path`, a
  hosts.toml with the CA) and gets credentials only from the kubelet: a pod without the pull
  secret gets ErrImagePull with the registry's 401; the same pod with it pulls and runs
  `cozyrender --version`.
- the pushed image signed by digest (skopeo, a GPG key made for the test: cosign's cold build
  costs 11 minutes, docs/guides/install.md "Signing") and verified by containers/image's
  `signedBy` policy on a pull by digest, refused with another key; the SBOM in the verified copy
  is the build's.

Own plane (one webhook replica, no GPUs): the other node modules' tests tag and import images by
hand with `imagePullPolicy: Never`, which a digest-pinned install would change under them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402
from registry import USER as REGISTRY_USER  # noqa: E402
from test_node_cluster import kubectl_json, ready, wait_for, webhook_pods  # noqa: E402

NAMESPACE = "cozyrender-system"
RELEASE = "cozyrender-webhook"
PULLS = "registry-pulls"


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("node-registry"), BIN, webhook_replicas=1, node=True,
                         registry=True, namespaces=("cozy-system", NAMESPACE, "tenant-root", PULLS))
    plane.start()
    yield plane
    plane.stop()


def layout_digest() -> str:
    index = json.loads((ROOT / "dist" / "cozyrender-image" / "index.json").read_text())
    return index["manifests"][0]["digest"]


def test_the_chart_is_installed_from_the_registry_by_helm_with_its_ca_and_login(plane, tmp_path):
    registry = plane.registry
    url, version = registry.chart
    assert url == f"oci://{registry.host}/charts/cozyrender-webhook"
    release = json.loads(plane.node.helm("get", "metadata", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert (release["status"], release["chart"], release["version"]) == ("deployed", "cozyrender-webhook", version)
    shown = plane.node.helm("show", "chart", url, "--version", version, "--ca-file", str(registry.ca))
    assert f"version: {version}" in shown.stdout
    # A Helm with no login (a home of its own), and one without the registry's CA.
    stranger = {**plane.node.helm_env(), **{name: str(tmp_path / "helm") for name in
                                            ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
    helm = [str(BIN / "helm4"), "show", "chart", url, "--version", version]
    anonymous = subprocess.run([*helm, "--ca-file", str(registry.ca)], capture_output=True, text=True, env=stranger,
                               timeout=60)
    # The registry answers 401 asking for basic credentials, which this Helm has none of.
    assert anonymous.returncode != 0 and "basic credential not found" in anonymous.stderr, anonymous.stderr
    untrusted = subprocess.run(helm, capture_output=True, text=True, env=plane.node.helm_env(), timeout=60)
    assert untrusted.returncode != 0 and "certificate signed by unknown authority" in untrusted.stderr, \
        untrusted.stderr


def test_the_webhook_runs_the_image_pulled_by_digest_with_the_pull_secret(plane):
    registry = plane.registry
    reference, digest = registry.image
    assert reference == f"{registry.host}/cozyrender:{build.version()}"
    assert digest == layout_digest() == registry.manifest_digest("cozyrender", build.version())
    (pod,) = webhook_pods(plane)
    assert ready(pod)
    assert [c["image"] for c in pod["spec"]["containers"]] == [f"{reference}@{digest}"]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "cozyrender-registry"}]
    assert [s["imageID"].rsplit("@", 1)[1] for s in pod["status"]["containerStatuses"]] == [digest]
    images = plane.node.ctr("images", "ls", "-q").stdout.split()
    assert build.image_reference() not in images  # never imported by hand
    assert f"{registry.host}/cozyrender@{digest}" in images


def version_pod(plane, name: str, secret: str | None) -> dict:
    reference, digest = plane.registry.image
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": PULLS},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     **({"imagePullSecrets": [{"name": secret}]} if secret else {}),
                     # Always: the node holds the image already (the webhook's); a pull is what is tested.
                     "containers": [{"name": "c", "image": f"{reference}@{digest}", "imagePullPolicy": "Always",
                                     "args": ["--version"]}]}}


def test_without_the_pull_secret_the_pull_is_refused_and_with_it_the_pod_runs(plane):
    plane.registry.pull_secret(PULLS, "pull")
    plane.kubectl("apply", "-f", "-", input=json.dumps(version_pod(plane, "no-secret", None)))

    def refused() -> str:
        pod = kubectl_json(plane, "-n", PULLS, "get", "pod", "no-secret")
        waiting = [s.get("state", {}).get("waiting", {}) for s in pod["status"].get("containerStatuses", [])]
        return next((w.get("message", "") for w in waiting if w.get("reason") in ("ErrImagePull", "ImagePullBackOff")
                     and w.get("message")), "")

    message = wait_for("the pod without the pull secret refused its image", refused, 120)
    events = plane.kubectl("-n", PULLS, "get", "events", "--field-selector", "involvedObject.name=no-secret",
                           "-o", "json").stdout
    assert "401 Unauthorized" in message + events, (message, events)
    plane.kubectl("apply", "-f", "-", input=json.dumps(version_pod(plane, "with-secret", "pull")))

    def finished() -> dict | None:
        pod = kubectl_json(plane, "-n", PULLS, "get", "pod", "with-secret")
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    pod = wait_for("the pod with the pull secret run to its end", finished, 120)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    logs = plane.kubectl("-n", PULLS, "logs", "with-secret").stdout
    assert logs.strip() == f"cozyrender, version {build.version()}"
    assert [s["imageID"].rsplit("@", 1)[1] for s in pod["status"]["containerStatuses"]] == [plane.registry.image[1]]


@pytest.fixture
def gpg_homes(tmp_path):
    """GnuPG homes for the test's keys; the agents gpg starts in them stopped afterwards."""
    homes: list[Path] = []
    yield homes
    for home in homes:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(home)},
                       capture_output=True, timeout=30)


def gpg_key(home: Path, name: str) -> tuple[str, Path]:
    """A signing key made for the test (ed25519, no passphrase) in GnuPG home `home`: its
    fingerprint and its public key file."""
    home.mkdir(mode=0o700, parents=True)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                    f"{name} <{name}@cozyrender.invalid>", "ed25519", "sign", "never"],
                   check=True, capture_output=True, env=env, timeout=60)
    listed = subprocess.run(["gpg", "--list-secret-keys", "--with-colons"], check=True, capture_output=True,
                            text=True, env=env).stdout
    fingerprint = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))
    public = home.parent / f"{name}.asc"
    public.write_bytes(subprocess.run(["gpg", "--export", "--armor", fingerprint], check=True, capture_output=True,
                                      env=env).stdout)
    return fingerprint, public


def test_the_image_signed_by_digest_verifies_with_its_key_only_and_carries_its_sbom(plane, tmp_path, gpg_homes):
    """skopeo signs the pushed image (a GPG key made here; the signature is over the manifest's
    digest and the image's name), then containers/image's policy engine, the one podman and
    CRI-O enforce, admits a pull by digest with `signedBy` that key and refuses it with another
    key. The SBOM in the verified copy is the build's, byte for byte."""
    registry = plane.registry
    reference, digest = registry.image
    gpg_homes += [tmp_path / "signer", tmp_path / "stranger"]
    signer, public = gpg_key(tmp_path / "signer", "signer")
    _, stranger = gpg_key(tmp_path / "stranger", "stranger")
    signatures = tmp_path / "signatures"
    registries_d = tmp_path / "registries.d"
    registries_d.mkdir()
    (registries_d / "registry.yaml").write_text(json.dumps({"docker": {registry.host: {
        "lookaside": signatures.as_uri(), "lookaside-staging": signatures.as_uri()}}}))
    certs, creds = str(registry.dir / "certs.d"), f"{REGISTRY_USER}:{registry.password}"
    skopeo = ["skopeo", "--registries.d", str(registries_d)]
    tag = reference.rsplit(":", 1)[1]
    subprocess.run([*skopeo, "--insecure-policy", "copy", "--quiet", "--preserve-digests", "--sign-by", signer,
                    "--dest-cert-dir", certs, "--dest-creds", creds,
                    f"oci:{ROOT / 'dist' / 'cozyrender-image'}:{tag}", f"docker://{reference}"],
                   check=True, capture_output=True, text=True, timeout=300,
                   env={**os.environ, "GNUPGHOME": str(tmp_path / "signer")})
    assert registry.manifest_digest("cozyrender", tag) == digest  # signing changed nothing pushed
    assert (signatures / f"cozyrender@sha256={digest.split(':', 1)[1]}" / "signature-1").is_file()

    def pull(key: Path, out: Path) -> subprocess.CompletedProcess:
        policy = tmp_path / f"policy-{key.stem}.json"
        policy.write_text(json.dumps({
            "default": [{"type": "reject"}],
            "transports": {"docker": {f"{registry.host}/cozyrender": [
                {"type": "signedBy", "keyType": "GPGKeys", "keyPath": str(key)}]}}}))
        return subprocess.run([*skopeo, "--policy", str(policy), "copy", "--quiet", "--src-cert-dir", certs,
                               "--src-creds", creds, f"docker://{registry.host}/cozyrender@{digest}", f"dir:{out}"],
                              capture_output=True, text=True, timeout=300)

    refused = pull(stranger, tmp_path / "refused")
    assert refused.returncode != 0 and "rejected" in refused.stderr, refused.stderr
    verified = pull(public, tmp_path / "verified")
    assert verified.returncode == 0, verified.stderr
    manifest = json.loads((tmp_path / "verified" / "manifest.json").read_text())
    (layer,) = manifest["layers"]
    with tarfile.open(tmp_path / "verified" / layer["digest"].split(":", 1)[1]) as tar:
        carried = tar.extractfile("usr/share/doc/cozyrender/sbom.cdx.json").read()
    assert carried == (ROOT / "dist" / "cozyrender-image.cdx.json").read_bytes()
