"""charts/cozyrender-webhook's monitoring objects as a hoster's scraper and
rule loader read them (issue 35 item 3), rendered by real Helm:

- every endpoint of the VMServiceScrape and the ServiceMonitor sets
  `honorLabels: true`, so a series' own `namespace` (the tenant's) is kept,
  not renamed `exported_namespace` by the Service's;
- the NetworkPolicy of either type admits the scraper named in
  `monitoring.scraper` (namespace and pod labels) to the HTTPS port while a
  scrape object is on, and not while none is; the controller's policy admits
  it to the metrics port alike;
- the alert rules are a VMRule where operator.victoriametrics.com/v1beta1 is
  served, a PrometheusRule where only monitoring.coreos.com/v1 is (both with
  kinds=both), the same groups in each, and the install notes say so when
  neither is served (`helm install --dry-run=client`);
- the Grafana dashboard (issue 35 item 4) is a ConfigMap labelled for
  Grafana's sidecar holding the chart's JSON, and a GrafanaDashboard reading
  that ConfigMap only where grafana.integreatly.org/v1beta1 is served; each
  can be turned off. (Its panels' queries: tests/test_controller_metrics_live.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_controller_chart import CHART, render

VMRULE = ("-a", "operator.victoriametrics.com/v1beta1/VMRule")
PROMRULE = ("-a", "monitoring.coreos.com/v1/PrometheusRule")
KUBERNETES_POLICY = ("--set", "networkPolicy.type=kubernetes", "--set", "networkPolicy.apiServerCIDRs[0]=10.0.0.1/32")


@pytest.mark.parametrize("kind", ["VMServiceScrape", "ServiceMonitor"])
def test_every_scrape_endpoint_honors_the_series_labels(helm4: Path, kind: str) -> None:
    switch = "vmServiceScrape" if kind == "VMServiceScrape" else "serviceMonitor"
    [scrape] = [o for o in render(helm4, "--set", f"monitoring.{switch}=true") if o["kind"] == kind]
    endpoints = scrape["spec"]["endpoints"]
    assert {e["port"] for e in endpoints} == {"https", "metrics"}  # the webhook's and the controller's
    assert all(e["honorLabels"] is True for e in endpoints)


def scraper_rules(objects: list[dict], pods: str = "cozyrender-webhook") -> list[dict]:
    """The scraper's rules in the policy of `pods` (the webhook's; the controller's)."""
    [policy] = [o for o in objects if o["kind"] in ("CiliumNetworkPolicy", "NetworkPolicy") and (
        o["spec"].get("endpointSelector") or o["spec"].get("podSelector"))["matchLabels"]["app.kubernetes.io/name"] == pods]
    def caller(rule: dict) -> bool:  # the default networkPolicy.callers' rule: cozystack-api, not a scraper
        peers = rule.get("fromEndpoints", []) + [peer.get("podSelector", {}) for peer in rule.get("from", [])]
        return any(peer.get("matchLabels", {}).get("app") == "cozystack-api" for peer in peers)

    return [rule for rule in policy["spec"]["ingress"] if ("fromEndpoints" in rule or any(
        "namespaceSelector" in peer for peer in rule.get("from", []))) and not caller(rule)]


def test_the_cilium_policy_admits_the_named_scraper_while_scraping(helm4: Path) -> None:
    assert scraper_rules(render(helm4)) == []
    [rule] = scraper_rules(render(helm4, "--set", "monitoring.vmServiceScrape=true"))
    assert rule == {"fromEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "cozy-monitoring",
                                                       "app.kubernetes.io/name": "vmagent"}}],
                    "toPorts": [{"ports": [{"port": "8443", "protocol": "TCP"}]}]}
    # The controller's metrics port, to the same scraper.
    [rule] = scraper_rules(render(helm4, "--set", "monitoring.vmServiceScrape=true"), "cozyrender-controller")
    assert rule["toPorts"] == [{"ports": [{"port": "8080", "protocol": "TCP"}]}]
    [rule] = scraper_rules(render(helm4, "--set", "monitoring.serviceMonitor=true",
                                  "--set", "monitoring.scraper.namespace=monitoring",
                                  "--set", "monitoring.scraper.podLabels.app\\.kubernetes\\.io/name=prometheus"))
    assert rule["fromEndpoints"] == [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "monitoring",
                                                      "app.kubernetes.io/name": "prometheus"}}]


def test_the_kubernetes_policy_admits_the_named_scraper_while_scraping(helm4: Path) -> None:
    from cozyrender.validate import validate_objects

    assert scraper_rules(render(helm4, *KUBERNETES_POLICY)) == []
    objects = render(helm4, *KUBERNETES_POLICY, "--set", "monitoring.vmServiceScrape=true")
    assert not [f for f in validate_objects([o for o in objects if o["kind"] == "NetworkPolicy"]) if f.error]
    [rule] = scraper_rules(objects)
    assert rule == {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "cozy-monitoring"}},
                              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "vmagent"}}}],
                    "ports": [{"port": 8443, "protocol": "TCP"}]}
    [rule] = scraper_rules(objects, "cozyrender-controller")
    assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}]


def rule_kinds(helm4: Path, *args: str) -> dict[str, dict]:
    return {o["kind"]: o for o in render(helm4, *args) if o["kind"] in ("VMRule", "PrometheusRule")}


def test_the_rules_are_a_vmrule_where_victoriametrics_serves_it(helm4: Path) -> None:
    assert rule_kinds(helm4) == {}
    vm = rule_kinds(helm4, *VMRULE)
    assert set(vm) == {"VMRule"} and vm["VMRule"]["apiVersion"] == "operator.victoriametrics.com/v1beta1"
    assert set(rule_kinds(helm4, *PROMRULE)) == {"PrometheusRule"}
    # Both served: VictoriaMetrics' operator would convert the PrometheusRule into a VMRule of the same name.
    assert set(rule_kinds(helm4, *VMRULE, *PROMRULE)) == {"VMRule"}
    both = rule_kinds(helm4, *VMRULE, *PROMRULE, "--set", "prometheusRule.kinds=both")
    assert set(both) == {"VMRule", "PrometheusRule"}
    assert both["VMRule"]["spec"] == both["PrometheusRule"]["spec"] == vm["VMRule"]["spec"]
    assert rule_kinds(helm4, *VMRULE, *PROMRULE, "--set", "prometheusRule.enabled=false") == {}


def notes(helm4: Path, tmp_path: Path, *args: str) -> str:
    home = str(tmp_path / "helm")
    proc = subprocess.run([str(helm4), "install", "cozyrender-webhook", str(CHART), "-n", "cozyrender-system",
                           "--dry-run=client", *args], capture_output=True, text=True,
                          env={**os.environ, "HELM_CACHE_HOME": home, "HELM_CONFIG_HOME": home, "HELM_DATA_HOME": home})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("NOTES:\n", 1)[1]


def test_the_install_notes_say_when_no_rule_api_is_served(helm4: Path, tmp_path: Path) -> None:
    text = notes(helm4, tmp_path)
    assert ("Alert rules: NOT installed: this cluster serves neither VMRule (operator.victoriametrics.com/v1beta1) "
            "nor PrometheusRule (monitoring.coreos.com/v1).") in text
    assert "Alert rules" not in notes(helm4, tmp_path, "--set", "prometheusRule.enabled=false")


GRAFANA = ("-a", "grafana.integreatly.org/v1beta1/GrafanaDashboard")


def dashboards(helm4: Path, *args: str) -> dict[str, dict]:
    return {o["kind"]: o for o in render(helm4, *args)
            if o["kind"] == "GrafanaDashboard" or o["metadata"]["name"].endswith("-dashboard")}


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar_and_a_grafanadashboard_where_served(helm4: Path) -> None:
    plain = dashboards(helm4)
    assert set(plain) == {"ConfigMap"}  # no GrafanaDashboard where its API is not served
    config = plain["ConfigMap"]
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (CHART / "dashboards" / "cozyrender.json").read_text(encoding="utf-8")
    assert json.loads(config["data"]["cozyrender.json"]) == json.loads(shipped)
    served = dashboards(helm4, *GRAFANA)
    assert set(served) == {"ConfigMap", "GrafanaDashboard"}
    spec = served["GrafanaDashboard"]["spec"]
    assert spec["configMapRef"] == {"name": config["metadata"]["name"], "key": "cozyrender.json"}
    assert spec["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}  # Cozystack's Grafana
    assert spec["allowCrossNamespaceImport"] is True  # Grafana runs in another namespace than the release


def test_the_dashboard_objects_can_be_turned_off(helm4: Path) -> None:
    assert dashboards(helm4, *GRAFANA, "--set", "dashboard.configMap=false",
                      "--set", "dashboard.grafanaDashboard.enabled=false") == {}
    assert dashboards(helm4, "--set", "dashboard.configMap=false") == {}
    operator_only = dashboards(helm4, *GRAFANA, "--set", "dashboard.configMap=false")
    assert set(operator_only) == {"ConfigMap", "GrafanaDashboard"}  # the ConfigMap it reads, unlabelled
    assert "grafana_dashboard" not in operator_only["ConfigMap"]["metadata"]["labels"]
