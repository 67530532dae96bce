"""The cozyrender image built here (tools/image/build.py, `make image`): reproducible, valid OCI,
non-root, labelled, and it runs with runc: `cozyrender --version`, and the webhook serving
/readyz against a real control plane. Its SBOM (tools/image/sbom.py) lists exactly the Debian
packages dpkg records in the image's root and the wheels pip installed there, read back here
by other readers (`dpkg-query` against the image's dpkg database, `importlib.metadata`)."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402
from runc import Container, unpack  # noqa: E402

DIST = Path(os.environ.get("COZYRENDER_IMAGE_DIST", ROOT / "dist"))
TAG = build.image_reference().rsplit(":", 1)[1]


def _build(out: Path) -> str:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "image" / "build.py"), "cozyrender",
                             "--out", str(out)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr
    name, reference, digest = result.stdout.strip().splitlines()[-1].split()
    assert (name, reference) == ("cozyrender", build.image_reference())
    return digest


@pytest.fixture(scope="module")
def image() -> tuple[Path, str]:
    """`make image`'s output (dist/cozyrender-image), built here when it is missing."""
    if not (DIST / "cozyrender-image" / "index.json").exists():
        _build(DIST)
    index = json.loads((DIST / "cozyrender-image" / "index.json").read_text())
    return DIST / "cozyrender-image", index["manifests"][0]["digest"]


@pytest.fixture(scope="module")
def bundle(image, tmp_path_factory) -> tuple[dict, Path]:
    folder = tmp_path_factory.mktemp("bundle")
    spec = unpack(image[0], TAG, folder / "unpacked")
    return spec, folder / "unpacked" / "rootfs"


def _inspect(reference: str) -> dict:
    result = subprocess.run(["skopeo", "inspect", "--config", reference], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_same_inputs_give_the_same_digest(image, tmp_path):
    assert _build(tmp_path) == image[1]
    for name in ("index.json", "oci-layout"):
        assert (tmp_path / "cozyrender-image" / name).read_bytes() == (image[0] / name).read_bytes()
    assert (tmp_path / "cozyrender-image.tar").read_bytes() == (DIST / "cozyrender-image.tar").read_bytes()
    assert (tmp_path / "cozyrender-image.cdx.json").read_bytes() == (DIST / "cozyrender-image.cdx.json").read_bytes()


def test_image_config_is_non_root_with_entrypoint_and_labels(image):
    config = _inspect(f"oci:{image[0]}:{TAG}")["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["cozyrender"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == build.version()
    revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert labels["org.opencontainers.image.revision"] == revision
    assert labels["org.opencontainers.image.source"].startswith("https://")


def test_docker_archive_holds_the_same_image(image):
    archive = DIST / "cozyrender-image.tar"
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        index = json.load(tar.extractfile("index.json"))
    assert manifest[0]["RepoTags"] == [build.image_reference()]
    assert index["manifests"][0]["digest"] == image[1]
    oci = _inspect(f"oci:{image[0]}:{TAG}")
    docker = _inspect(f"docker-archive:{archive}")
    assert docker["config"] == oci["config"] and docker["rootfs"] == oci["rootfs"]


def test_layout_is_valid_for_umoci_and_the_files_are_owned_right(bundle):
    spec, rootfs = bundle
    assert spec["process"]["user"] == {"uid": 65532, "gid": 65532}
    assert "cozyrender:x:65532:65532:" in (rootfs / "etc" / "passwd").read_text()
    assert (rootfs / "usr" / "local" / "bin" / "cozyrender").stat().st_uid == 0
    # The bytecode is there (a read-only root never writes it) and records no timestamp.
    pycs = list((rootfs / "usr" / "local" / "lib" / "python3.11" / "dist-packages" / "cozyrender").glob("__pycache__/cli.*.pyc"))
    assert pycs and int.from_bytes(pycs[0].read_bytes()[4:8], "little") & 0b1  # hash-based flag


def test_the_sbom_lists_exactly_the_images_debian_packages_and_wheels(bundle):
    """The SBOM in the image (and the same one beside the layout), valid CycloneDX 1.6, against
    what the image's own dpkg database and site folder say was installed: nothing missing,
    nothing extra, nothing twice."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from importlib.metadata import distributions
    import sbom

    _, rootfs = bundle
    text = (rootfs / sbom.SBOM_PATH).read_text()
    assert text == (DIST / "cozyrender-image.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    document = json.loads(text)
    assert document["metadata"]["component"]["name"] == "cozyrender"
    purls = [c["purl"] for c in document["components"]]
    assert len(purls) == len(set(purls))
    listed_debs = sorted(p for p in purls if p.startswith("pkg:deb/"))
    listed_wheels = sorted(p for p in purls if p.startswith("pkg:pypi/"))
    assert len(listed_debs) + len(listed_wheels) == len(purls)

    query = subprocess.run(["dpkg-query", f"--admindir={rootfs / 'var' / 'lib' / 'dpkg'}", "-W", "-f",
                            "${db:Status-Abbrev}|${Package}|${Version}|${Architecture}\\n"],
                           capture_output=True, text=True, check=True)
    installed = [line.split("|") for line in query.stdout.splitlines()]
    from packageurl import PackageURL

    debs = sorted(PackageURL("deb", "debian", name, version, {"arch": arch, "distro": "debian-12"}).to_string()
                  for status, name, version, arch in installed if status.strip() == "ii")
    assert "python3" in {name for _, name, _, _ in installed}
    assert listed_debs == debs
    site = rootfs / "usr" / "local" / "lib" / "python3.11" / "dist-packages"
    wheels = sorted(PackageURL("pypi", None, re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(), d.version).to_string()
                    for d in distributions(path=[str(site)]))
    assert f"pkg:pypi/cozyrender@{build.version()}" in wheels
    assert listed_wheels == wheels


def test_runs_cozyrender_version_with_runc(bundle, tmp_path):
    spec, rootfs = bundle
    result = Container("cozyrender-version", spec, rootfs, tmp_path, ["--version"]).run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cozyrender, version {build.version()}"


def test_the_image_evaluates_dra_selectors_with_its_cel_runtime(bundle, tmp_path):
    """cel-expr-python's C++ runtime loads in the image (it needs libstdc++6): `catalog` checks the
    class by the CRD's CEL rules and counts the devices the DeviceClass's CEL selector selects."""
    spec, rootfs = bundle
    state = tmp_path / "state"
    state.mkdir()
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": m}}} for i, m in enumerate(("A100", "A100", "L4"))]
    (state / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
         "spec": {"vendor": "NVIDIA", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                  "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/A100", "deviceClassName": "a100"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a100"},
         "spec": {"selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "A100"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.example.com", "allNodes": True, "devices": devices,
                  "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}}]}))
    result = Container("cozyrender-cel", spec, rootfs, tmp_path, ["catalog", "--state", "/state", "-o", "json"],
                       mounts=((str(state), "/state"),)).run()
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["gpuClasses"]
    assert (row["freeUnits"], row["allocatableUnits"], row["invalid"]) == (2, 2, None)


# Own plane (issue 36): no webhook registered; its group (checkout-build) would start the session plane again.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    """A control plane with the default namespaces and no webhook replicas."""
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("cluster"), ROOT / ".cache" / "bin", webhook_replicas=0).start()
    yield plane
    plane.stop()


def test_webhook_from_the_image_serves_readyz(bundle, plane, tmp_path):
    """The webhook in the image, run by runc on the host network (read-only root, non-root),
    syncs its cache from the control plane and answers /readyz 200 on the port it was given."""
    spec, rootfs = bundle
    objects = [obj for obj in plane.webhook_objects("https://127.0.0.1:1/validate")
               if not obj["kind"].endswith("WebhookConfiguration")]
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    # The certificates the kubeconfig names are under the plane's folder, owned by root and 0600:
    # readable by the image's user only through copies it may read.
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    cert, key = plane.webhook_serving_cert
    client_cert, client_key = plane.webhook_client_cert
    for source, name in ((cert, "tls.crt"), (key, "tls.key"), (client_cert, "client.crt"),
                         (client_key, "client.key"), (plane.pki / "ca.crt", "ca.crt")):
        (secrets / name).write_bytes(Path(source).read_bytes())
        os.chown(secrets / name, 65532, 65532)
    kubeconfig = yaml.safe_load(plane.webhook_kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["certificate-authority"] = "/secrets/ca.crt"
    kubeconfig["users"][0]["user"] = {"client-certificate": "/secrets/client.crt", "client-key": "/secrets/client.key"}
    (secrets / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    from common import free_port

    port = free_port()
    container = Container("cozyrender-webhook", spec, rootfs, tmp_path, [
        "webhook", f"--listen=127.0.0.1:{port}", "--tls-cert=/secrets/tls.crt", "--tls-key=/secrets/tls.key",
        "--kubeconfig=/secrets/kubeconfig", "--namespace=cozyrender-system"],
        mounts=((str(secrets), "/secrets"),), host_network=True)
    process = container.start(tmp_path / "webhook.log")
    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    try:
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(0.3)
        assert status == 200, (tmp_path / "webhook.log").read_text()[-3000:]
        user = subprocess.run(["runc", "--root", str(container.state), "exec", container.name, "id", "-u"],
                              capture_output=True, text=True, timeout=60)
        assert user.stdout.strip() == "65532", user.stderr
    finally:
        container.delete()
        process.wait(timeout=60)
