"""Build cozyrender's OCI images here, without pulling anything from a registry.

    python tools/image/build.py cozyrender --wheelhouse .venv/wheelhouse --out dist
    python tools/image/build.py pause --out dist

`cozyrender`: a Debian bookworm root filesystem from Debian's packages (mmdebstrap, variant
`essential` plus python3, against the machine's configured Debian apt sources), cozyrender's
wheel and its dependencies' wheels installed into it by the image's own python3 (pip run from
its wheel, not left in the image), a non-root user (65532), entrypoint `cozyrender`, the
`org.opencontainers.image.*` labels, and its SBOM (sbom.py: CycloneDX, exactly the Debian packages
and the wheels installed) at /usr/share/doc/cozyrender/sbom.cdx.json in the image and beside the
layout as `<out>/cozyrender-image.cdx.json`. `pause`: the pod sandbox image, one static Go binary
(tools/image/pause). `cert-manager`: two images, `cert-manager-controller` and
`cert-manager-cainjector`, each one static Go binary built by `make certmanager`
(tools/certmanager, cert-manager v1.21 from its library module) and read from --bin.
`cozystack-apps-apiserver`: the same, the static binary `make aggapi` builds (tools/aggapi, the
apps.cozystack.io aggregated API server standing in for cozystack-api).

Each image is written twice under --out: `<name>-image/`, an OCI image layout (umoci, skopeo
`oci:`), and `<name>-image.tar`, the same layout in one archive with Docker's `manifest.json`
beside it, which `docker load`, `podman load`, `skopeo docker-archive:` and containerd's
`ctr images import` read.

Reproducible: every timestamp is SOURCE_DATE_EPOCH (the commit time of HEAD unless set), the
layer's entries are sorted with owners kept and names dropped, gzip carries no name or time,
Python's bytecode is compiled with hash-based invalidation and a fixed hash seed, and
mmdebstrap removes its logs and caches. The same inputs (the apt mirror's content, the wheels,
the tree) give the same digest; the last line printed is `<name> <reference> <digest>`.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REPOSITORY = "ghcr.io/cozyrender/cozyrender"
PAUSE_REPOSITORY = "cozyrender.local/pause"
PAUSE_TAG = "3.10"
CERT_MANAGER_REPOSITORY = "cozyrender.local/cert-manager"
CERT_MANAGER_VERSION = "v1.21.2"  # tools/certmanager/go.mod
AGGAPI_REPOSITORY = "cozyrender.local/cozystack-apps-apiserver"
AGGAPI_VERSION = "v0.35.4"  # k8s.io/apiserver in tools/aggapi/go.mod
SOURCE_URL = "https://github.com/cozyrender/cozyrender"
USER = "65532:65532"
# The Debian sources this machine's apt uses (deb822); the other lists on it are not Debian's.
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# Documentation the image does not need; each package's copyright file stays.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*",
                 "/usr/share/lintian/*")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class BuildError(RuntimeError):
    pass


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise BuildError(f"{argv[0]} exited with {result.returncode}:\n{result.stderr[-4000:] or result.stdout[-4000:]}")
    return result


def source_date_epoch() -> int:
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    return int(run(["git", "-C", str(REPO), "log", "-1", "--format=%ct"]).stdout.strip())


def revision() -> str:
    return run(["git", "-C", str(REPO), "rev-parse", "HEAD"]).stdout.strip()


def version() -> str:
    namespace: dict = {}
    exec((REPO / "cozyrender" / "__init__.py").read_text(), namespace)  # noqa: S102 - our own file
    return namespace["__version__"]


def image_reference() -> str:
    """The name the built cozyrender image carries (the chart's default image)."""
    return f"{REPOSITORY}:{version()}"


# -- the root filesystem ---------------------------------------------------------


def cozyrender_rootfs(rootfs: Path, wheels: Path, epoch: int) -> None:
    """Debian's essential set and python3 into `rootfs`, then the wheels installed by its python3."""
    pip_wheel = sorted(wheels.glob("pip-*.whl"))
    if not pip_wheel:
        raise BuildError(f"no pip wheel in {wheels}")
    pip = f"/tmp/wheels/{pip_wheel[-1].name}/pip"
    env_in = "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin PYTHONHASHSEED=0 SOURCE_DATE_EPOCH=%d" % epoch
    site = "/usr/local/lib/python3.11/dist-packages"
    hooks = [
        f'mkdir -p "$1/tmp/wheels" && cp {wheels}/*.whl "$1/tmp/wheels/"',
        f'chroot "$1" {env_in} python3 {pip} install --quiet --no-index --find-links /tmp/wheels '
        f'--no-compile --no-cache-dir --break-system-packages --root-user-action=ignore '
        f'--disable-pip-version-check cozyrender=={version()}',
        # Bytecode that never goes stale (the files do not change) and that a read-only root
        # filesystem never needs rewritten; hash-based, so no timestamp is recorded in it.
        f'chroot "$1" {env_in} python3 -m compileall -q -j1 --invalidation-mode unchecked-hash {site}',
        'rm -rf "$1/tmp/wheels" "$1/root/.cache" "$1/etc/resolv.conf" "$1/etc/hostname"',
        f'echo "cozyrender:x:{USER}:cozyrender:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"',
        f'echo "cozyrender:x:{USER.split(":")[1]}:" >> "$1/etc/group"',
    ]
    argv = ["mmdebstrap", "--mode=root", "--variant=essential", "--include=python3", "--format=directory",
            "--quiet", *[f"--dpkgopt=path-exclude={path}" for path in DPKG_EXCLUDES],
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            *[f"--customize-hook={hook}" for hook in hooks],
            "bookworm", str(rootfs), str(DEBIAN_SOURCES)]
    run(argv, env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "TMPDIR": str(rootfs.parent)})


def prepare_wheels(wheels: Path, wheelhouse: Path, epoch: int) -> None:
    """cozyrender's wheel (built from the tree), its dependencies' and pip's, into `wheels`."""
    wheels.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(wheels), str(REPO)],
        env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    for wheel in wheelhouse.glob("*.whl"):
        shutil.copy2(wheel, wheels / wheel.name)
    if not list(wheels.glob("pip-*.whl")):
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "-d", str(wheels), "pip"])


# -- layers and the OCI layout -----------------------------------------------------


def write_layer(rootfs: Path, destination: Path, epoch: int) -> tuple[str, str, int]:
    """`rootfs` as a gzip'd tar: sorted, every time `epoch`, owners by number, no device nodes
    (the runtime makes /dev). Returns (diff_id, digest, size)."""
    plain = destination.with_suffix(".tar")
    with tarfile.open(plain, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(rootfs):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(rootfs)))
            if info is None or info.ischr() or info.isblk() or info.isfifo():
                continue
            info.mtime = epoch
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    diff_id = _sha256(plain)
    with open(plain, "rb") as source, open(destination, "wb") as target:
        with gzip.GzipFile(filename="", mode="wb", fileobj=target, mtime=0, compresslevel=6) as packed:
            shutil.copyfileobj(source, packed, 1 << 20)
    plain.unlink()
    return diff_id, _sha256(destination), destination.stat().st_size


def _walk(root: Path):
    """Every path under `root` in sorted order, directories before their contents."""
    entries = sorted(os.listdir(root))
    for name in entries:
        path = root / name
        yield path
        if stat.S_ISDIR(os.lstat(path).st_mode):
            yield from _walk(path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _json_bytes(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def write_image(out: Path, name: str, reference: str, layer: Path, diff_id: str, layer_digest: str,
                layer_size: int, config: dict, epoch: int, history: str) -> str:
    """The OCI layout `<out>/<name>-image/` and the archive `<out>/<name>-image.tar`; the manifest digest."""
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    image_config = {
        "created": created, "architecture": "amd64", "os": "linux", "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": history}],
    }
    config_bytes = _json_bytes(image_config)
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": layer_size}],
        "annotations": {"org.opencontainers.image.created": created},
    }
    manifest_bytes = _json_bytes(manifest)
    manifest_digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    tag = reference.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": manifest_digest, "size": len(manifest_bytes),
                       "annotations": {"io.containerd.image.name": reference,
                                       "org.opencontainers.image.ref.name": tag}}],
    }
    blobs = {config_digest: config_bytes, manifest_digest: manifest_bytes}
    files = {
        "oci-layout": _json_bytes({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json_bytes(index),
        # Docker's `docker load` reads this; the blobs are the layout's.
        "manifest.json": _json_bytes([{"Config": _blob_path(config_digest), "RepoTags": [reference],
                                       "Layers": [_blob_path(layer_digest)]}]),
    }
    layout = out / f"{name}-image"
    shutil.rmtree(layout, ignore_errors=True)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    for path, data in {**files, **{_blob_path(d): b for d, b in blobs.items()}}.items():
        if path != "manifest.json":
            (layout / path).write_bytes(data)
    shutil.copyfile(layer, layout / _blob_path(layer_digest))
    archive = out / f"{name}-image.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        entries = {**files, **{_blob_path(d): b for d, b in blobs.items()}}
        for path in sorted([*entries, _blob_path(layer_digest)]):
            info = tarfile.TarInfo(path)
            info.mode, info.mtime = 0o644, epoch
            if path == _blob_path(layer_digest):
                info.size = layer_size
                with open(layer, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                info.size = len(entries[path])
                tar.addfile(info, io.BytesIO(entries[path]))
    return manifest_digest


def _blob_path(digest: str) -> str:
    return "blobs/sha256/" + digest.split(":", 1)[1]


def labels(epoch: int, title: str, description: str) -> dict:
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "org.opencontainers.image.title": title,
        "org.opencontainers.image.description": description,
        "org.opencontainers.image.version": version(),
        "org.opencontainers.image.revision": revision(),
        "org.opencontainers.image.source": SOURCE_URL,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": created,
    }


# -- the two images ----------------------------------------------------------------


def build_cozyrender(out: Path, work: Path, wheelhouse: Path, epoch: int) -> tuple[str, str]:
    wheels = work / "wheels"
    prepare_wheels(wheels, wheelhouse, epoch)
    rootfs = work / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    cozyrender_rootfs(rootfs, wheels, epoch)
    # In the image, so its digest covers it and every copy carries it (the registry here,
    # distribution 2.8, has no referrers API to attach it by).
    import sbom

    document = sbom.write(rootfs, "cozyrender", version(), epoch)
    (rootfs / sbom.SBOM_PATH).parent.mkdir(parents=True, exist_ok=True)
    (rootfs / sbom.SBOM_PATH).write_text(document)
    layer = work / "layer.tar.gz"
    diff_id, digest, size = write_layer(rootfs, layer, epoch)
    shutil.rmtree(rootfs)
    config = {
        "User": USER,
        "Entrypoint": ["cozyrender"],
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                "PYTHONDONTWRITEBYTECODE=1"],
        "WorkingDir": "/",
        "ExposedPorts": {"8443/tcp": {}},
        "Labels": labels(epoch, "cozyrender", "GPU budget rules for Cozystack tenants: the Helm post-renderer, "
                         "the checks and the admission webhook"),
    }
    history = "tools/image/build.py cozyrender: mmdebstrap --variant=essential --include=python3 bookworm; pip install cozyrender"
    reference = image_reference()
    manifest = write_image(out, "cozyrender", reference, layer, diff_id, digest, size, config, epoch, history)
    (out / "cozyrender-image.cdx.json").write_text(document)
    layer.unlink()
    return reference, manifest


def build_pause(out: Path, work: Path, epoch: int) -> tuple[str, str]:
    rootfs = work / "pause-rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.mkdir(parents=True)
    run(["go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", str(rootfs / "pause"), "."],
        cwd=HERE / "pause", env={**os.environ, "CGO_ENABLED": "0"})
    layer = work / "pause-layer.tar.gz"
    diff_id, digest, size = write_layer(rootfs, layer, epoch)
    shutil.rmtree(rootfs)
    config = {"User": "65535:65535", "Entrypoint": ["/pause"], "WorkingDir": "/",
              "Labels": labels(epoch, "pause", "The pod sandbox process of cozyrender's test node")}
    reference = f"{PAUSE_REPOSITORY}:{PAUSE_TAG}"
    manifest = write_image(out, "pause", reference, layer, diff_id, digest, size, config, epoch,
                           "tools/image/build.py pause: go build tools/image/pause")
    layer.unlink()
    return reference, manifest


def cert_manager_reference(component: str) -> str:
    return f"{CERT_MANAGER_REPOSITORY}-{component}:{CERT_MANAGER_VERSION}"


def build_static(out: Path, work: Path, epoch: int, binary: Path, name: str, reference: str, description: str,
                 version: str, source: str, missing: str) -> tuple[str, str]:
    """An image of one static Go binary at /<binary name>, run as 65532 (non-root)."""
    if not binary.is_file():
        raise BuildError(f"{binary} is missing: run `{missing}`")
    rootfs = work / f"{name}-rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.mkdir(parents=True)
    shutil.copyfile(binary, rootfs / binary.name)
    (rootfs / binary.name).chmod(0o755)
    layer = work / f"{name}-layer.tar.gz"
    diff_id, digest, size = write_layer(rootfs, layer, epoch)
    shutil.rmtree(rootfs)
    config = {"User": USER, "Entrypoint": [f"/{binary.name}"], "WorkingDir": "/",
              "Labels": {**labels(epoch, name, description), "org.opencontainers.image.version": version}}
    manifest = write_image(out, name, reference, layer, diff_id, digest, size, config, epoch,
                           f"tools/image/build.py {source}")
    layer.unlink()
    return reference, manifest


def build_cert_manager(out: Path, work: Path, bin_dir: Path, epoch: int) -> list[tuple[str, str]]:
    return [build_static(out, work, epoch, bin_dir / f"cert-manager-{component}", f"cert-manager-{component}",
                         cert_manager_reference(component),
                         f"cert-manager {CERT_MANAGER_VERSION}'s {component} for cozyrender's test node "
                         "(self-signed and CA issuers only)", CERT_MANAGER_VERSION,
                         f"cert-manager: cert-manager-{component} (tools/certmanager)", "make certmanager")
            for component in ("controller", "cainjector")]


def aggapi_reference() -> str:
    return f"{AGGAPI_REPOSITORY}:{AGGAPI_VERSION}"


def build_aggapi(out: Path, work: Path, bin_dir: Path, epoch: int) -> list[tuple[str, str]]:
    return [build_static(out, work, epoch, bin_dir / "cozystack-apps-apiserver", "cozystack-apps-apiserver",
                         aggapi_reference(),
                         "cozyrender's stand-in for cozystack-api: apps.cozystack.io served by an aggregated "
                         f"API server on k8s.io/apiserver {AGGAPI_VERSION}", AGGAPI_VERSION,
                         "cozystack-apps-apiserver: (tools/aggapi)", "make aggapi")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build", description=__doc__.split("\n\n")[0])
    parser.add_argument("image", choices=("cozyrender", "pause", "cert-manager", "cozystack-apps-apiserver"))
    parser.add_argument("--out", default=str(REPO / "dist"))
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--wheelhouse", default=str(REPO / ".venv" / "wheelhouse"))
    parser.add_argument("--bin", default=str(REPO / ".cache" / "bin"),
                        help="cert-manager, cozystack-apps-apiserver: the built binaries")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(prefix=f"image-{args.image}-", dir=args.work) as scratch:
        work = Path(scratch)
        try:
            if args.image == "cozyrender":
                built = [build_cozyrender(out, work, Path(args.wheelhouse).resolve(), epoch)]
            elif args.image == "cert-manager":
                built = build_cert_manager(out, work, Path(args.bin).resolve(), epoch)
            elif args.image == "cozystack-apps-apiserver":
                built = build_aggapi(out, work, Path(args.bin).resolve(), epoch)
            else:
                built = [build_pause(out, work, epoch)]
        except BuildError as err:
            print(f"build: error: {err}", file=sys.stderr)
            return 1
    for reference, digest in built:
        print(f"{args.image} {reference} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
