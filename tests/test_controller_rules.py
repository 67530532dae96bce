"""The chart's alert rules, tested with Debian's promtool (`promtool test
rules`, tests/data/promtool/alerts_test.yaml): a pool over budget, a class in
conflict, a class with no free units, a webhook whose cache is stale, a
certificate near or past its notAfter, no controller leader, tenant figures
that cannot be computed, metrics absent; and the billing recording rules
(tests/data/promtool/billing_test.yaml: GPU-hours per tenant and class per
day, across a leader change). The rule file is the chart's own
rendering (with a scrape object on, as the absence alerts need), so a broken
expression or a renamed metric fails here. The VMRule carries the same
groups (tests/test_chart_monitoring.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cozyrender-webhook"
DATA = ROOT / "tests" / "data" / "promtool"
PROMTOOL = Path(shutil.which("promtool") or "/usr/bin/promtool")
SCRAPED = ("--set", "monitoring.vmServiceScrape=true")
ALERTS = {"CozyrenderPoolOverBudget", "CozyrenderGPUClassConflict", "CozyrenderGPUClassNoFreeUnits",
          "CozyrenderWebhookCacheStale", "CozyrenderWebhookCertificateExpiresSoon",
          "CozyrenderWebhookCertificateExpired", "CozyrenderControllerNoLeader", "CozyrenderTenantTreeError",
          "CozyrenderTenantBudgetUnknown", "CozyrenderWebhookMetricsAbsent", "CozyrenderControllerMetricsAbsent"}
RECORDS = {f"cozyrender:tenant_{kind}_{what}" for kind in ("reserved", "allocated")
           for what in ("device_seconds:max", "device_hours:increase1d")}


def _rule(helm4: Path, *args: str) -> list[dict]:
    rendered = subprocess.run([str(helm4), "template", "cozyrender-webhook", str(CHART), "-n", "cozyrender-system",
                               *args], capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "PrometheusRule"]


@pytest.fixture(scope="module")
def rules_dir(helm4: Path, tmp_path_factory) -> Path:
    if not PROMTOOL.exists():
        raise RuntimeError(f"{PROMTOOL} is missing: run `make prometheus` (Debian's prometheus package)")
    [rule] = _rule(helm4, "-a", "monitoring.coreos.com/v1/PrometheusRule", *SCRAPED)
    folder = tmp_path_factory.mktemp("promtool")
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    shutil.copy(DATA / "alerts_test.yaml", folder)
    shutil.copy(DATA / "billing_test.yaml", folder)
    return folder


def test_the_rules_are_valid(rules_dir: Path) -> None:
    checked = subprocess.run([str(PROMTOOL), "check", "rules", "rules.yaml"], cwd=rules_dir,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS) + len(RECORDS)} rules found" in checked.stdout


@pytest.mark.parametrize("tests", ["alerts_test.yaml", "billing_test.yaml"])
def test_promtool_unit_tests_pass(rules_dir: Path, tests: str) -> None:
    tested = subprocess.run([str(PROMTOOL), "test", "rules", tests], cwd=rules_dir,
                            capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_tested(rules_dir: Path) -> None:
    rules = yaml.safe_load((rules_dir / "rules.yaml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    tested = {case["alertname"] for test in yaml.safe_load((DATA / "alerts_test.yaml").read_text())["tests"]
              for case in test.get("alert_rule_test", [])}
    assert alerts == tested == ALERTS
    records = {rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule}
    evaluated = {case["expr"].split("{")[0] for test in yaml.safe_load((DATA / "billing_test.yaml").read_text())["tests"]
                 for case in test.get("promql_expr_test", [])}
    assert records == evaluated == RECORDS


def test_the_rule_is_left_out_where_the_cluster_has_no_prometheus_operator(helm4: Path) -> None:
    assert _rule(helm4) == []  # an install never fails on a missing CRD
    assert _rule(helm4, "-a", "monitoring.coreos.com/v1/PrometheusRule", "--set", "prometheusRule.enabled=false") == []


def test_the_alerts_follow_what_the_chart_deploys(helm4: Path) -> None:
    """No absence alert without a scrape object (nothing says the metrics are scraped); no
    controller alert without the controller; no tree alert without its metrics controller."""
    def alerts(*args: str) -> set[str]:
        [rule] = _rule(helm4, "-a", "monitoring.coreos.com/v1/PrometheusRule", *args)
        return {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r}

    def records(*args: str) -> set[str]:
        [rule] = _rule(helm4, "-a", "monitoring.coreos.com/v1/PrometheusRule", *args)
        return {r["record"] for group in rule["spec"]["groups"] for r in group["rules"] if "record" in r}

    assert alerts() == ALERTS - {"CozyrenderWebhookMetricsAbsent", "CozyrenderControllerMetricsAbsent"}
    assert alerts(*SCRAPED, "--set", "controller.enabled=false") == ALERTS - {
        "CozyrenderControllerNoLeader", "CozyrenderTenantTreeError", "CozyrenderTenantBudgetUnknown",
        "CozyrenderControllerMetricsAbsent"}
    assert alerts(*SCRAPED, "--set", "controller.controllers=status") == ALERTS - {
        "CozyrenderTenantTreeError", "CozyrenderTenantBudgetUnknown"}
    assert records() == RECORDS  # the billing group: only with the controller's metrics
    assert records("--set", "controller.controllers=status") == set()
    assert records("--set", "controller.enabled=false") == set()
