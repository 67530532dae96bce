"""Issue 19 item 1: a key written twice in one mapping is refused by every
reader, naming the file, the line and the key (one rule: cozyrender.yamlio;
post-render words it the same way). PyYAML alone keeps the last silently."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CLASS = ("apiVersion: cozystack.io/v1alpha1\nkind: GPUClass\nkind: GPUClass\nmetadata: {name: a}\n"
         "spec: {vendor: NVIDIA, model: A100, mode: passthrough, memory: 40Gi, resourceName: nvidia.com/a,"
         " sourceKind: PCIHostDevice}\n")
TENANT_THEN_CLASS = ("apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: a, namespace: tenant-root}\n"
                     "apiVersion: cozystack.io/v1alpha1\nkind: GPUClass\n")
CHART = ["tenant-a", str(ROOT / "charts" / "tenant"), "-n", "tenant-root"]


def cozy(*args: str, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cozyrender", *args], input=(stdin or "").encode(),
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, cwd=cwd)


def refused(result: subprocess.CompletedProcess, command: str, *says: str) -> None:
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b"", (result.returncode, err, result.stdout[:200])
    assert err.startswith(f"cozyrender {command}: error: ") and err.count("\n") == 1, err
    for words in says:
        assert words in err, err


def test_check_state_from_stdin_of_files_run_together(tmp_path):
    """`cat state/*.yaml | cozyrender check --state -` over files without `---`."""
    refused(cozy("check", "--state", "-", stdin=TENANT_THEN_CLASS), "check",
            "<stdin>: not valid YAML: line 4, column 1: duplicate key 'apiVersion' (first at line 1)")


def test_gpuclass_validate_and_catalog(tmp_path):
    (tmp_path / "class.yaml").write_text(CLASS)
    for command in (["gpuclass", "validate", str(tmp_path / "class.yaml")],
                    ["catalog", "--state", str(tmp_path / "class.yaml")],
                    ["check", "--state", str(ROOT / "examples" / "budgets" / "state"), "--write",
                     str(tmp_path / "class.yaml")]):
        refused(cozy(*command), " ".join(command[:2] if command[0] == "gpuclass" else command[:1]),
                f"{tmp_path / 'class.yaml'}", "line 3, column 1: duplicate key 'kind'")


def test_the_crd_golden_cases_helmreleases_and_values(tmp_path):
    crd = tmp_path / "crd.yaml"
    crd.write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                   "kind: CustomResourceDefinition\n")
    refused(cozy("gpuclass", "validate", str(ROOT / "examples" / "cluster" / "gpuclasses.yaml"), "--crd", str(crd)),
            "gpuclass validate", str(crd), "line 3, column 1: duplicate key 'kind'")
    case = tmp_path / "cases" / "one"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text("chart: charts/tenant\nrelease: tenant-a\nnamespace: tenant-root\n"
                                    "release: tenant-b\n")
    refused(cozy("golden", str(tmp_path / "cases")), "golden", str(case / "case.yaml"),
            "line 4, column 1: duplicate key 'release'")
    hr = tmp_path / "hr.yaml"
    hr.write_text("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: tenant-a\n"
                  "  namespace: tenant-root\nspec:\n  values:\n    gpu: {vgpu: true}\n    gpu: {vgpu: false}\n")
    refused(cozy("flux", "--helmrelease", str(hr), "--chart-dir", str(ROOT)), "flux", str(hr),
            "line 9, column 5: duplicate key 'gpu'")
    values = tmp_path / "values.yaml"
    values.write_text("gpu:\n  vgpu: true\ngpu:\n  vgpu: false\n")
    for command in ("template", "flux"):
        refused(cozy(command, *CHART, "-f", str(values)), command, str(values),
                "line 3, column 1: duplicate key 'gpu' (first at line 1)")
        refused(cozy(command, *CHART, "--set-json", '{"gpu": {"vgpu": true}, "gpu": {}}'), command,
                "duplicate key 'gpu'")


def test_post_render_words_it_the_same_way():
    doc = "apiVersion: v1\nkind: ConfigMap\nkind: ConfigMap\nmetadata: {name: x}\n"
    result = cozy("post-render", stdin=doc)
    assert result.returncode == 1 and "duplicate key 'kind' (line 3)" in result.stderr.decode()


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', "a: 1\na: 2\n"])
def test_json_and_yaml_state_alike(text, tmp_path):
    name = "s.json" if text.startswith("{") else "s.yaml"
    (tmp_path / name).write_text(text)
    refused(cozy("catalog", "--state", str(tmp_path / name)), "catalog", name, "duplicate key 'a'")
