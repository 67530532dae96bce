"""`cozyrender golden`: the project's own cases, and the feature's behaviour
(missing, stale, differing and invalid files) on throw-away cases."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cozyrender import golden
from cozyrender.entitlement import chain_entitlement
from cozyrender.keys import in_budget_domain

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "golden"
VGPU = "namespace.cozystack.io/vgpu"


@pytest.fixture(scope="module")
def report() -> golden.GoldenReport:
    return golden.run_golden(CASES)


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def by_kind(text: str, kind: str) -> list[dict]:
    return [d for d in docs(text) if d.get("kind") == kind]


def test_project_cases_pass(report: golden.GoldenReport) -> None:
    assert report.errors == [] and report.stale == []
    failures = {r.case.name: r.problems for r in report.results if not r.ok}
    assert failures == {}
    assert len(report.results) >= 28


def test_raw_output_is_byte_identical_to_helm4(report: golden.GoldenReport, helm4: Path,
                                               tmp_path: Path) -> None:
    for result in report.results:
        values = tmp_path / f"{result.case.path.parent.name}-{result.case.name}.yaml"
        values.write_text(json.dumps(result.values))
        capabilities = result.case.capabilities
        proc = subprocess.run(
            [str(helm4), "template", result.case.release, str(result.case.chart),
             "-n", result.case.namespace, "-f", str(values),
             *(f"--api-versions={version}" for version in capabilities.api_versions),
             *([f"--kube-version={capabilities.kube_version}"] if capabilities.kube_version else [])],
            capture_output=True)
        if result.case.expect_error is not None:  # Helm itself refuses it, with that message
            assert proc.returncode != 0 and result.raw == "", result.case.path
            assert result.case.expect_error in proc.stderr.decode(), result.case.path
            continue
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode() == result.raw, result.case.path


def test_no_budget_key_survives_and_gpu_only_tenants_lose_quota(report: golden.GoldenReport
                                                                ) -> None:
    for result in report.results:
        quotas = by_kind(result.rendered, "ResourceQuota")
        for quota in quotas:
            assert not [k for k in quota["spec"]["hard"] if in_budget_domain(k)], result.case.path
        raw_quotas = by_kind(result.raw, "ResourceQuota")
        gpu_only = bool(raw_quotas) and all(
            in_budget_domain(k) for q in raw_quotas for k in q["spec"]["hard"])
        if gpu_only:
            assert quotas == [] and by_kind(result.rendered, "LimitRange") == [], result.case.path
        else:
            assert len(quotas) == len(raw_quotas), result.case.path
            assert len(by_kind(result.rendered, "LimitRange")) == len(
                by_kind(result.raw, "LimitRange")), result.case.path
    names = {r.case.name for r in report.results
             if r.case.path.parent.name == "tenant" and not by_kind(r.rendered, "ResourceQuota")}
    assert {"gpu-classless", "gpu-class-scoped", "gpu-both", "no-quotas"} <= names


def test_raw_charts_hold_no_gpu_rule_and_no_vgpu_outputs(report: golden.GoldenReport) -> None:
    for result in report.results:
        for ns in by_kind(result.raw, "Namespace"):
            assert VGPU not in (ns["metadata"].get("labels") or {})
        for secret in by_kind(result.raw, "Secret"):
            values = yaml.safe_load(secret["stringData"]["values.yaml"])
            assert "vgpu" not in values["_namespace"]
    gpu_both = next(r for r in report.results if r.case.name == "gpu-both")
    hard = by_kind(gpu_both.raw, "ResourceQuota")[0]["spec"]["hard"]
    assert hard["requests.a100.gpuclass.cozystack.io/devices"] == 6  # flows through raw


@pytest.mark.parametrize("platform", [True, False])
@pytest.mark.parametrize("asked", [True, False])
@pytest.mark.parametrize("child_asked", [True, False])
def test_entitlement_chain(report: golden.GoldenReport, platform: bool, asked: bool,
                           child_asked: bool) -> None:
    name = f"p{int(platform)}-r{int(asked)}-c{int(child_asked)}"
    result = next(r for r in report.results if r.case.name == name)
    entitled = chain_entitlement(platform, [True, asked, child_asked])
    ns = by_kind(result.rendered, "Namespace")[0]
    assert ns["metadata"]["name"] == "tenant-a-b"
    assert ns["metadata"]["labels"][VGPU] == ("true" if entitled else "false")
    values = yaml.safe_load(by_kind(result.rendered, "Secret")[0]["stringData"]["values.yaml"])
    assert values["_namespace"].get("vgpu") is (True if entitled else None)
    assert ("gpu-vgpu" in values["_cluster"]) is platform


@pytest.mark.parametrize("case, label", [
    ("vgpu-bool-true", "true"), ("vgpu-string-true", "true"), ("vgpu-bool-false", "false"),
    ("vgpu-string-false", "false"), ("vgpu-absent", "false")])
def test_basics_platform_switch(report: golden.GoldenReport, case: str, label: str) -> None:
    result = next(r for r in report.results if r.case.name == case)
    [ns] = [n for n in by_kind(result.rendered, "Namespace")
            if n["metadata"]["name"] == "tenant-root"]  # cozystack-basics also renders cozy-public
    assert ns["metadata"]["labels"][VGPU] == label


# ---------------------------------------------------------------- the feature

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
    "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n"
                         "  namespace: {{ .Release.Namespace }}\ndata:\n  k: {{ .Values.k | quote }}\n"
                         "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n"
                         "spec:\n  ports: [{port: {{ .Values.port }}}]\n",
}


def make_cases(base: Path) -> Path:
    for rel, text in CHART.items():
        (base / "charts" / "demo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / "charts" / "demo" / rel).write_text(text)
    case = base / "cases" / "one"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text("chart: charts/demo\nrelease: r\nnamespace: ns\n"
                                    "values: [values.yaml]\ninline: {k: v}\n")
    (case / "values.yaml").write_text("name: cm\nport: 80\n")
    return base / "cases"


def identity(data: bytes) -> tuple[bytes, list[str]]:
    return data, []


def test_missing_expected_fails_unless_update(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    first = golden.run_golden(cases, post_render=identity)
    assert not first.ok
    assert any("is missing" in p for p in first.results[0].problems)
    assert not (cases / "one" / "raw.yaml").exists()
    updated = golden.run_golden(cases, update=True, post_render=identity)
    assert updated.ok and len(updated.results[0].written) == 2
    assert golden.run_golden(cases, post_render=identity).ok
    text = (cases / "one" / "raw.yaml").read_text()
    assert text.index("# ConfigMap/ns/cm") < text.index("# Service/svc")


def test_a_difference_is_a_unified_diff_naming_the_object(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    golden.run_golden(cases, update=True, post_render=identity)
    (cases / "one" / "values.yaml").write_text("name: cm\nport: 81\n")
    result = golden.run_golden(cases, post_render=identity).results[0]
    problems = "\n".join(result.problems)
    assert "object differs: Service/svc" in problems
    assert "-  - port: 80\n+  - port: 81" in problems
    assert "ConfigMap" not in problems


def test_stale_files_are_reported(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    golden.run_golden(cases, update=True, post_render=identity)
    gone = cases / "gone"
    gone.mkdir()
    (gone / "rendered.yaml").write_text("---\n")
    (cases / "one" / "old-values.yaml").write_text("x: 1\n")
    report = golden.run_golden(cases, post_render=identity)
    assert not report.ok and all(r.ok for r in report.results)
    assert report.stale == [(gone / "rendered.yaml").resolve(),
                            (cases / "one" / "old-values.yaml").resolve()]


def test_invalid_manifests_fail_validation(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    (cases / "one" / "values.yaml").write_text("name: cm\nport: eighty\n")
    result = golden.run_golden(cases, update=True, post_render=identity).results[0]
    assert any("Service/svc" in p and "ports" in p for p in result.problems)


def test_bad_case_file_is_reported(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    (cases / "one" / "case.yaml").write_text("chart: charts/demo\nrelease: r\nnamespaces: x\n")
    report = golden.run_golden(cases, post_render=identity)
    assert not report.ok and "unknown key 'namespaces' (did you mean 'namespace'?)" in report.bad_input[0]


def test_cli_exit_codes(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    (cases / "one" / "values.yaml").write_text("name: cm\nport: 80\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "cozyrender", "golden", str(cases), *a],
                                    capture_output=True, text=True)
    # the demo chart has no tenant Namespace: the real post-renderer passes it through
    missing = run()
    assert missing.returncode == 1 and "is missing" in missing.stdout
    assert run("--update").returncode == 0
    ok = run()
    assert ok.returncode == 0 and "1 case, 0 failed, 0 stale files" in ok.stdout
    shutil.copy(cases / "one" / "raw.yaml", cases / "raw.yaml")
    stale = run()
    assert stale.returncode == 1 and "STALE raw.yaml" in stale.stdout


def test_a_folder_without_cases_fails(tmp_path):
    from cozyrender.golden import run_golden

    report = run_golden(tmp_path)
    assert not report.ok
    assert len(report.bad_input) == 1 and report.bad_input[0].startswith(f"no cases under {tmp_path}: ")
    assert "a case is a folder holding a case.yaml" in report.bad_input[0]


# ---------------------------------------------------------------- expect_error

def test_project_error_cases(report: golden.GoldenReport) -> None:
    cases = {r.case.name: r for r in report.results if r.case.expect_error is not None}
    assert {"bad-release-two-dashes", "bad-release-no-prefix", "bad-namespace"} <= set(cases)
    for result in cases.values():
        assert result.ok and result.raw == result.rendered == ""
        assert not (result.case.path / "raw.yaml").exists()
        assert not (result.case.path / "rendered.yaml").exists()


def error_case(cases: Path, expect: str, values: str = "name: cm\nport: 80\n") -> Path:
    case = cases / "bad"
    case.mkdir()
    (case / "case.yaml").write_text("chart: charts/demo\nrelease: r\nnamespace: ns\n"
                                    f"values: [values.yaml]\nexpect_error: {json.dumps(expect)}\n")
    (case / "values.yaml").write_text(values)
    return case


def test_expect_error_passes_on_a_matching_render_error(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    (cases.parent / "charts" / "demo" / "templates" / "fail.yaml").write_text(
        '{{- if .Values.boom }}{{ fail "boom requested" }}{{ end }}\n')
    case = error_case(cases, "boom requested", "name: cm\nport: 80\nboom: true\n")
    report = golden.run_golden(cases, update=True, post_render=identity)
    bad = next(r for r in report.results if r.case.path == case.resolve())
    assert bad.ok and bad.written == [] and not (case / "raw.yaml").exists()
    assert golden.run_golden(cases, post_render=identity).ok
    (case / "case.yaml").write_text((case / "case.yaml").read_text().replace(
        "boom requested", "another message"))
    bad = next(r for r in golden.run_golden(cases, post_render=identity).results
               if r.case.path == case.resolve())
    assert not bad.ok and "expected an error containing 'another message', got: " \
        "render failed" in bad.problems[0] and "boom requested" in bad.problems[0]


def test_expect_error_fails_when_the_render_succeeds(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    case = error_case(cases, "anything")
    report = golden.run_golden(cases, update=True, post_render=identity)
    bad = next(r for r in report.results if r.case.path == case.resolve())
    assert bad.problems == ["rendered without error, expected an error containing 'anything'"]
    assert bad.written == [] and not (case / "rendered.yaml").exists()


def test_expect_error_matches_post_render_errors(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    case = error_case(cases, "post-render failed: no ConfigMaps")

    def refuse(data: bytes) -> tuple[bytes, list[str]]:
        raise golden.CaseError("post-render failed: no ConfigMaps")

    bad = next(r for r in golden.run_golden(cases, post_render=refuse).results
               if r.case.path == case.resolve())
    assert bad.ok


def test_expected_files_in_an_error_case_are_stale(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    case = error_case(cases, "a problem", "name: cm\nport: [\n")
    (case / "raw.yaml").write_text("---\n")
    report = golden.run_golden(cases, post_render=identity)
    assert report.stale == [(case / "raw.yaml").resolve()]
    assert not report.ok


@pytest.mark.parametrize("value", ["''", "1", "[a]"])
def test_expect_error_must_be_a_string(tmp_path: Path, value: str) -> None:
    cases = make_cases(tmp_path)
    case = error_case(cases, "x")
    (case / "case.yaml").write_text((case / "case.yaml").read_text().replace('"x"', value))
    report = golden.run_golden(cases, post_render=identity)
    assert any("'expect_error' is a non-empty string" in e for e in report.bad_input)


def test_cli_reports_error_cases(tmp_path: Path) -> None:
    cases = make_cases(tmp_path)
    error_case(cases, "nope, not this", "name: cm\nport: 80\nunknown: {\n")
    proc = subprocess.run([sys.executable, "-m", "cozyrender", "golden", str(cases), "--update"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "FAIL  bad" in proc.stdout and "Traceback" not in proc.stderr
    assert "expected an error containing 'nope, not this', got: render failed" in proc.stdout
