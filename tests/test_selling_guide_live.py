"""The bundled example cluster (examples/cluster: GPUClasses, Nodes, Pods)
loaded into a real kube-apiserver with the status controller running:
every class's status equals `cozyrender catalog --state examples/cluster`
for the same objects, and `kubectl get gpuclasses` prints what the guide
docs/guides/selling-gpus.md shows (AGE left out). With
COZYRENDER_UPDATE_DOCS=1 the guide's block is rewritten from the cluster
(review the diff like code)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from controller_plane import ControllerPlane, start_plane, wait_for
from kubeapi import GPUCLASSES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cluster"
GUIDE = ROOT / "docs" / "guides" / "selling-gpus.md"
BLOCK = re.compile(r"(<!-- live: tests/test_selling_guide_live\.py[^\n]*-->\n```text\n)(.*?)(```\n)", re.S)
KEPT = ("name", "namespace", "labels", "annotations")


def _objects(kind: str) -> list[dict]:
    items = []
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for obj in (doc or {}).get("items", [doc] if doc else []):
                if obj.get("kind") == kind:
                    items.append(obj)
    return items


def _fresh(obj: dict) -> dict:
    """The object as a client would create it: no server-set metadata, no status."""
    meta = {key: value for key, value in obj["metadata"].items() if key in KEPT}
    return {key: value for key, value in obj.items() if key not in ("status", "metadata")} | {"metadata": meta}


# Own plane (issue 36): every GPUClass's status must be the example's alone, as the guide shows.
@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    plane = start_plane(tmp_path_factory)
    controllers = ControllerPlane(plane)
    try:
        controllers.apply_chart()
        controllers.start("controller-a", "status")
        pods = _objects("Pod")
        for namespace in sorted({p["metadata"]["namespace"] for p in pods}):
            for path, body in (("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": namespace}}),
                               (f"/api/v1/namespaces/{namespace}/serviceaccounts",
                                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})):
                status, answer = controllers.api.create(path, body)
                assert status in (201, 409), answer  # kube-system and tenant-root exist already
        # Created oldest first, a second apart: who holds a shared resource name is the example's.
        classes = sorted(_objects("GPUClass"), key=lambda c: c["metadata"]["creationTimestamp"])
        for index, gpuclass in enumerate(classes):
            if index:
                time.sleep(1.1)
            controllers.create(GPUCLASSES, _fresh(gpuclass))
        for node in _objects("Node"):
            controllers.create("/api/v1/nodes", _fresh(node))
            controllers.patch(f"/api/v1/nodes/{node['metadata']['name']}", {"status": node["status"]}, "status")
        for pod in pods:
            path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"
            controllers.create(path, _fresh(pod))
            controllers.patch(f"{path}/{pod['metadata']['name']}", {"status": pod["status"]}, "status")
        yield controllers
    finally:
        plane.stop()


def _catalog() -> dict:
    answer = subprocess.run([sys.executable, "-m", "cozyrender", "catalog", "--state", str(EXAMPLE), "-o", "json"],
                            capture_output=True, text=True, check=True)
    return {row["name"]: row for row in json.loads(answer.stdout)["gpuClasses"]}


def _statuses(cp) -> dict:
    return {item["metadata"]["name"]: item.get("status") or {} for item in cp.api.get(GPUCLASSES)[1]["items"]}


def _same(status: dict, row: dict) -> bool:
    return (status.get("free"), status.get("allocatable"), status.get("nodes"), status.get("conflictWith")) == \
        (row["freeUnits"], row["allocatableUnits"], row["eligibleNodes"], (row["conflict"] or {}).get("heldBy"))


def test_the_status_of_every_class_equals_the_offline_catalog(cp):
    catalog = _catalog()
    assert len(catalog) == 5 and any(row["conflict"] for row in catalog.values())
    wait_for(lambda: set(_statuses(cp)) == set(catalog)
             and all(_same(_statuses(cp)[name], row) for name, row in catalog.items()),
             what="every class's status equal to cozyrender catalog --state examples/cluster")


def _without_age(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    cut = lines[0].rindex("AGE")
    return "\n".join(line[:cut].rstrip() for line in lines)


def test_kubectl_get_gpuclasses_prints_what_the_guide_shows(cp, kubectl):
    catalog = _catalog()
    wait_for(lambda: all(_same(_statuses(cp).get(name, {}), row) for name, row in catalog.items()),
             what="the statuses written")
    shown = subprocess.run([str(kubectl), f"--kubeconfig={cp.plane.kubeconfig}", "get", "gpuclasses"],
                           capture_output=True, text=True, check=True).stdout
    guide = GUIDE.read_text()
    match = BLOCK.search(guide)
    assert match, "the guide's live block is missing"
    if os.environ.get("COZYRENDER_UPDATE_DOCS") == "1":
        block = "$ kubectl get gpuclasses\n" + shown
        GUIDE.write_text(guide[:match.start(2)] + block + guide[match.end(2):])
        return
    documented = match.group(2).split("\n", 1)[1]
    assert _without_age(shown) == _without_age(documented)
