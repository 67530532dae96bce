"""The GPUClass CRD upgraded by `helm upgrade` (issue 33 item 5), with real Helm 4 against a
real kube-apiserver v1.35.4. Helm installs a chart's `crds/` on the first install only and
never upgrades them; `gpuClassCRD.managed` in charts/cozystack-basics renders the same file
as a template with `helm.sh/resource-policy: keep`:

- a release of the chart as it ships: a changed CRD in `crds/` is NOT applied by `helm upgrade`
  (Helm's rule, shown so the test can fail the other way);
- `helm upgrade --take-ownership --force-conflicts --set gpuClassCRD.managed=true` adopts the CRD
  the cluster already had (applied by `kubectl apply --server-side`, whose field manager Helm 4's
  server-side apply conflicts with until forced once) and applies the change:
  a field the new schema adds is stored, not pruned; a later change is applied by a plain
  `helm upgrade`;
- `helm uninstall` leaves the CRD and every GPUClass in place.

The plane (tools/controlplane) applies the shipped CRD with `kubectl apply --server-side`, as a
hoster following the docs has it; the CRDs of the other kinds the chart renders (Flux's
HelmRelease, Cilium's policies, Keycloak's groups) come from the bundled schemas, as in
tests/test_cluster_helm.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from controller_plane import start_plane, wait_for
from test_cluster_helm import BUNDLED_CRDS, _crd

ROOT = Path(__file__).resolve().parent.parent
CRD_FILE = Path("crds") / "gpuclasses.cozystack.io.yaml"
GPUCLASS = {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
            "spec": {"vendor": "NVIDIA", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                     "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/GA100"}}


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    # Own plane (issue 36): it replaces the GPUClass CRD, which every other module's plane serves.
    plane = start_plane(tmp_path_factory, namespaces=("cozy-system", "cozy-monitoring"))
    try:
        crds = [_crd(*spec) for spec in BUNDLED_CRDS]
        plane.kubectl("apply", "--server-side", "-f", "-",
                      input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
        plane.wait_crds_established()
        yield plane
    finally:
        plane.stop()


def chart_version(tmp_path: Path, name: str, change=None) -> Path:
    """A copy of charts/cozystack-basics whose CRD file `change` edits (a parsed dict)."""
    folder = tmp_path / name
    shutil.copytree(ROOT / "charts" / "cozystack-basics", folder)
    if change is not None:
        crd = yaml.safe_load((folder / CRD_FILE).read_text())
        change(crd)
        (folder / CRD_FILE).write_text(yaml.safe_dump(crd, sort_keys=False))
    return folder


def add_note(crd: dict) -> None:
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["note"] = {"type": "string", "maxLength": 200, "description": "A test field."}


def add_column(crd: dict) -> None:
    add_note(crd)
    crd["spec"]["versions"][0].setdefault("additionalPrinterColumns", []).append(
        {"name": "Note", "type": "string", "jsonPath": ".spec.note"})


def test_helm_upgrade_applies_a_changed_crd_once_the_chart_manages_it(plane, helm4, tmp_path):
    home = tmp_path / "helm"
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "HELM_CACHE_HOME": str(home),
           "HELM_CONFIG_HOME": str(home), "HELM_DATA_HOME": str(home)}

    def helm(*args: str) -> None:
        result = subprocess.run([str(helm4), *args, "-n", "cozy-system"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"

    def crd() -> dict:
        return json.loads(plane.kubectl("get", "crd", "gpuclasses.cozystack.io", "-o", "json").stdout)

    def schema_fields() -> set[str]:
        return set(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])

    plane.kubectl("apply", "-f", "-", input=json.dumps(GPUCLASS))
    shipped, noted, columned = (chart_version(tmp_path, "v1"), chart_version(tmp_path, "v2", add_note),
                                chart_version(tmp_path, "v3", add_column))

    helm("install", "basics", str(shipped))
    helm("upgrade", "basics", str(noted))
    assert "note" not in schema_fields()  # Helm never upgrades crds/

    # Once: adopt the CRD (--take-ownership) and take its fields from the manager that applied it
    # (--force-conflicts: Helm 4 applies server-side, and `kubectl apply --server-side` owns them).
    helm("upgrade", "basics", str(noted), "--take-ownership", "--force-conflicts", "--set", "gpuClassCRD.managed=true")
    live = crd()
    assert "note" in schema_fields()
    assert live["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == "basics"
    wait_for(lambda: plane.kubectl("patch", "gpuclass", "a100", "--type=merge", "-p", '{"spec":{"note":"kept"}}',
                                   check=False).returncode == 0, what="the new field served")
    stored = json.loads(plane.kubectl("get", "gpuclass", "a100", "-o", "json").stdout)
    assert stored["spec"]["note"] == "kept"  # in the schema now: stored, not pruned

    helm("upgrade", "basics", str(columned), "--reuse-values")
    columns = [c["name"] for c in crd()["spec"]["versions"][0].get("additionalPrinterColumns", [])]
    assert "Note" in columns

    helm("uninstall", "basics")
    assert "note" in schema_fields()  # kept: deleting it would delete every GPUClass
    assert json.loads(plane.kubectl("get", "gpuclass", "a100", "-o", "json").stdout)["spec"]["note"] == "kept"
