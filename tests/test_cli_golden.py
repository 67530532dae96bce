"""`cozyrender golden` in CI (issue 12 items 4, 5): JUnit XML, machine-readable
output, dot-files ignored, plurals, "did you mean", clear messages for an empty
folder or a missing chart, Helm capabilities per case, Kubernetes name rules."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

COMMAND = [sys.executable, "-m", "cozyrender", "golden"]

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: cap\nversion: 0.1.0\n",
    "templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}\n"
        "data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        "  port: {{ .Values.port | default 80 | quote }}\n"
        "{{- if .Capabilities.APIVersions.Has \"cozystack.io/v1alpha1/GPUClass\" }}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-gpu, "
        "namespace: {{ .Release.Namespace }}}\ndata: {gated: \"yes\"}\n"
        "{{- end }}\n"),
}


def suite(tmp_path: Path, cases: dict[str, str]) -> Path:
    for name, text in CHART.items():
        (tmp_path / "charts" / "cap" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "charts" / "cap" / name).write_text(text)
    root = tmp_path / "cases"
    for name, text in cases.items():
        (root / name).mkdir(parents=True)
        (root / name / "case.yaml").write_text(text)
    return root


def golden(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


CASE = "chart: charts/cap\nrelease: r\nnamespace: ns\n"


def test_capabilities_per_case(tmp_path):
    root = suite(tmp_path, {
        "plain": CASE,
        "gated": CASE + "api_versions: [cozystack.io/v1alpha1/GPUClass]\nkube_version: '1.31.2'\n",
    })
    assert golden(root, "--update").returncode == 0
    plain = yaml.safe_load_all((root / "plain" / "raw.yaml").read_text())
    gated = list(yaml.safe_load_all((root / "gated" / "raw.yaml").read_text()))
    assert [d["metadata"]["name"] for d in plain if d] == ["r"]
    assert {d["metadata"]["name"]: d["data"] for d in gated if d} == {
        "r": {"kube": "v1.31.2", "port": "80"}, "r-gpu": {"gated": "yes"}}
    numeric = suite(tmp_path / "n", {"c": CASE + "kube_version: 1.30\n"})
    result = golden(numeric)
    assert result.returncode == 2 and "'kube_version' is a string; quote it" in result.stderr


def test_junit_and_json_for_ci(tmp_path):
    root = suite(tmp_path, {"good": CASE, "changed": CASE})
    assert golden(root, "--update").returncode == 0
    (root / "changed" / "values.yaml").write_text("port: 81\n")
    (root / "changed" / "case.yaml").write_text(CASE + "values: [values.yaml]\n")
    (root / "stale.yaml").write_text("x: 1\n")
    (root / "raw.yaml").write_text("x: 1\n")  # an expected file outside any case: stale
    junit = tmp_path / "report.xml"
    result = golden(root, "--junit", junit)
    assert result.returncode == 1
    assert "2 cases, 1 failed, 1 stale file" in result.stdout, result.stdout
    tree = ET.parse(junit).getroot()
    assert tree.tag == "testsuites" and tree.get("tests") == "3"
    assert (tree.get("failures"), tree.get("errors")) == ("2", "0")
    cases = {c.get("name"): c for c in tree.iter("testcase")}
    assert set(cases) == {"good", "changed", "stale file raw.yaml"}
    assert cases["good"].find("failure") is None and float(cases["good"].get("time")) > 0
    failure = cases["changed"].find("failure")
    assert failure is not None and "+  port: '81'" in failure.text and "object differs" in failure.get("message")
    as_json = json.loads(golden(root, "-o", "json").stdout)
    assert as_json["ok"] is False and as_json["summary"] == {"cases": 2, "failed": 1, "stale": 1}
    assert {c["name"]: c["ok"] for c in as_json["cases"]} == {"good": True, "changed": False}
    assert as_json["stale"] == ["raw.yaml"] and as_json["errors"] == []
    as_yaml = yaml.safe_load(golden(root, "-o", "yaml").stdout)
    assert {k: v for k, v in as_yaml.items() if k != "cases"} == {k: v for k, v in as_json.items() if k != "cases"}


def test_unreadable_cases_are_bad_input_and_nothing_runs(tmp_path):
    """Issue 19 item 8: five unloadable cases were summarised as "0 cases, 5 failed"."""
    root = suite(tmp_path, {"good": CASE, **{f"broken{i}": CASE.replace("namespace", "namespaces")
                                             for i in range(5)}})
    for args in ((), ("-o", "json"), ("--junit", str(tmp_path / "j.xml")), ("--update",)):
        result = golden(root, *args)
        assert result.returncode == 2 and result.stdout == "", (args, result.stdout)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("cozyrender golden: error: ")
        assert "broken0/case.yaml: unknown key 'namespaces' (did you mean 'namespace'?)" in result.stderr
        assert "(and 4 other cases that cannot be read)" in result.stderr
    assert not (root / "good" / "raw.yaml").exists() and not (tmp_path / "j.xml").exists()


def test_dot_files_are_ignored_and_plurals_are_right(tmp_path):
    root = suite(tmp_path, {"one": CASE, ".hidden/skipped": "not: [a case"})
    (root / "one" / ".gitkeep").write_text("")
    (root / ".DS_Store").write_text("")
    assert golden(root, "--update").returncode == 0
    result = golden(root)
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "1 case, 0 failed, 0 stale files"
    assert "skipped" not in result.stdout + result.stderr


def test_empty_folder_and_missing_chart_say_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = golden(empty)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "cozyrender golden: error: no cases under" in result.stderr
    assert "a case is a folder holding a case.yaml" in result.stderr
    missing = suite(tmp_path / "m", {"c": "chart: charts/nope\nrelease: r\nnamespace: ns\n"})
    result = golden(missing)
    assert result.returncode == 2 and "chart 'charts/nope' not found: no folder with a Chart.yaml" in result.stderr
    not_a_folder = golden(tmp_path / "nothing-here")
    assert not_a_folder.returncode == 2
    assert not_a_folder.stderr == f"cozyrender golden: error: {tmp_path / 'nothing-here'}: no such folder\n"


def test_names_follow_kubernetes_rules_in_cases(tmp_path):
    root = suite(tmp_path, {
        "upper": "chart: charts/cap\nrelease: r\nnamespace: tenant-Root\n",
        "expected": "chart: charts/cap\nrelease: r\nnamespace: tenant-Root\n"
                    "expect_error: \"namespace name 'tenant-Root' is not a DNS-1123 label\"\n",
        "release": "chart: charts/cap\nrelease: R_1\nnamespace: ns\n",
    })
    result = golden(root, "-o", "json")
    cases = {c["name"]: c for c in json.loads(result.stdout)["cases"]}
    assert cases["expected"]["ok"]
    assert "namespace name 'tenant-Root' is not a DNS-1123 label" in cases["upper"]["problems"][0]
    assert "release name 'R_1' is not a DNS-1123 subdomain" in cases["release"]["problems"][0]


def test_set_string_and_set_json_in_cases(tmp_path):
    root = suite(tmp_path, {
        "string": CASE + "set_string: ['port=0443']\n",
        "json": CASE + "set_json: ['port=8080']\nset: ['port=9090']\n",  # Helm's order: --set after --set-json
    })
    assert golden(root, "--update").returncode == 0
    ports = {name: next(d for d in yaml.safe_load_all((root / name / "raw.yaml").read_text()) if d)["data"]["port"]
             for name in ("string", "json")}
    assert ports == {"string": "0443", "json": "9090"}
