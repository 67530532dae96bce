"""Billing metrics, end to end: a real Prometheus (Debian's binary, on
loopback) scrapes both controller replicas against a real kube-apiserver,
and PromQL's answers equal `cozyrender tree -o json` and `cozyrender catalog
-o json` for the same cluster; a `sum` over every replica counts each
figure once (only the leader exports them); the figures follow a new
workload. The same Prometheus evaluates the chart's own rules (its
PrometheusRule's groups), so the device-seconds counters are checked to
grow by devices × seconds, and every query of docs/guides/billing.md to
return data (issue 35 item 2); it also scrapes one webhook replica (not
registered: it decides only the review the test sends it), so every
panel of the chart's Grafana dashboard returns data (item 4)."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.parse
import urllib.request
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from controller_plane import ControllerPlane, add_node, gpuclass, pod, start_plane, wait_for
from kubeapi import GPUCLASSES, apps_path

from cozyrender.kube.quantity.parsing import parse_quantity

PROMETHEUS = Path(shutil.which("prometheus") or "/usr/bin/prometheus")
ROOT = Path(__file__).resolve().parent.parent
BILLING = ROOT / "docs" / "guides" / "billing.md"
DASHBOARD = ROOT / "charts" / "cozyrender-webhook" / "dashboards" / "cozyrender.json"
A100 = "nvidia.com/GA100_A100_PCIE_40GB"


def tenant(name: str, namespace: str, quotas: dict) -> dict:
    return {"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"resourceQuotas": quotas}}


def vm(name: str, count: int) -> dict:
    return {"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "VMInstance", "metadata": {"name": name},
            "spec": {"gpus": [{"class": "a100", "count": count}]}}


# Own plane (issue 36): its controllers count every Node and GPUClass and elect on the chart's one Lease.
@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    if not PROMETHEUS.exists():
        raise RuntimeError(f"{PROMETHEUS} is missing: run `make prometheus` (Debian's prometheus package)")
    plane = start_plane(tmp_path_factory)
    controllers = ControllerPlane(plane)
    try:
        controllers.apply_chart()
        for namespace in ("tenant-acme", "tenant-acme-ml"):
            controllers.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace}})
            controllers.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                               {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        controllers.create(GPUCLASSES, gpuclass("a100", A100))
        add_node(controllers, "gpu-1", {A100: "8"})
        controllers.create(apps_path("tenants", "tenant-root"), tenant("acme", "tenant-root", {
            "gpuclass.cozystack.io/devices": 8, "cpu": 32, "memory": "128Gi"}))
        controllers.create(apps_path("tenants", "tenant-acme"), tenant("ml", "tenant-acme", {
            "gpuclass.cozystack.io/devices": 4, "a100.gpuclass.cozystack.io/devices": 4}))
        controllers.create(apps_path("vminstances", "tenant-acme-ml"), vm("train", 2))
        controllers.create(apps_path("vminstances", "tenant-acme"), vm("infer", 1))
        controllers.create("/api/v1/namespaces/tenant-acme/pods", pod("web-0", "gpu-1", {"cpu": "2",
                                                                                         "memory": "4Gi"}))
        controllers.create("/api/v1/namespaces/tenant-acme-ml/pods", pod("vm-train", "gpu-1", {A100: "2"}))
        controllers.patch("/api/v1/namespaces/tenant-acme-ml/pods/vm-train",  # as its kubelet reports it
                          {"status": {"phase": "Running"}}, "status")
        ports = [controllers.start(name) for name in ("controller-a", "controller-b")]
        from common import free_port

        controllers.webhook = free_port()  # a webhook replica for its metrics, registering nothing
        cert, key = plane.webhook_serving_cert
        plane._spawn("webhook-0", [
            sys.executable, "-m", "cozyrender", "webhook", "--listen", f"127.0.0.1:{controllers.webhook}",
            "--tls-cert", str(cert), "--tls-key", str(key), "--kubeconfig", str(plane.webhook_kubeconfig),
            "--namespace", "cozyrender-system", "--drain-seconds", "0"], env={**os.environ, "PYTHONPATH": str(ROOT)})
        wait_for(controllers.holder, what="a leader")

        web = free_port()
        config = plane.dir / "prometheus.yml"
        (plane.dir / "rules.yaml").write_text(yaml.safe_dump({"groups": chart_rule_groups()}))
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(plane.dir / "rules.yaml")],
            "scrape_configs": [{"job_name": "cozyrender-controller", "static_configs": [
                {"targets": [f"127.0.0.1:{port}" for port in ports]}]},
                {"job_name": "cozyrender-webhook", "scheme": "https", "tls_config": {"ca_file": str(plane.pki / "ca.crt")},
                 "static_configs": [{"targets": [f"127.0.0.1:{controllers.webhook}"]}]}]}))
        plane._spawn("prometheus", [str(PROMETHEUS), f"--config.file={config}",
                                    f"--storage.tsdb.path={plane.dir / 'prometheus-data'}",
                                    f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"])
        controllers.prometheus = f"http://127.0.0.1:{web}"
        wait_for(lambda: query(controllers, "up") and all(s["value"][1] == "1" for s in query(controllers, "up"))
                 and len(query(controllers, "up")) == 3, what="Prometheus scraping both replicas and the webhook")
        yield controllers
    finally:
        plane.stop()


def chart_rule_groups() -> list[dict]:
    """The chart's PrometheusRule groups as `helm template` renders them (defaults)."""
    rendered = subprocess.run([str(ROOT / ".cache" / "bin" / "helm4"), "template", "cozyrender-webhook",
                               str(ROOT / "charts" / "cozyrender-webhook"), "-n", "cozyrender-system",
                               "-a", "monitoring.coreos.com/v1/PrometheusRule"],
                              capture_output=True, text=True, check=True).stdout
    [rule] = [doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "PrometheusRule"]
    return rule["spec"]["groups"]


def query(cp, promql: str, **params) -> list[dict]:
    url = f"{cp.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": promql, **params})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def number(value) -> Fraction:
    return Fraction(value) if isinstance(value, int) else parse_quantity(value)


def tree_figures(cp) -> dict:
    tree = subprocess.run([sys.executable, "-m", "cozyrender", "tree", "--kubeconfig", str(cp.plane.kubeconfig),
                           "-o", "json"], capture_output=True, text=True, check=True)
    figures = {}
    for node in json.loads(tree.stdout)["tenants"]:
        for row in node["keys"]:
            for kind, field in (("hard", "budget"), ("used", "used"), ("carved_out", "carvedOut"), ("left", "left")):
                figures[(node["namespace"], row["key"], kind)] = number(row[field])
    return figures


def prom_figures(cp) -> dict:
    answer = query(cp, "sum by (namespace, key, type) (cozyrender_tenant_budget)")
    return {(s["metric"]["namespace"], s["metric"]["key"], s["metric"]["type"]): Fraction(s["value"][1])
            for s in answer}


def test_promql_answers_equal_the_tree(cp):
    expected = tree_figures(cp)
    assert expected[("tenant-acme", "gpuclass.cozystack.io/devices", "hard")] == 8
    assert len(expected) >= 16
    wait_for(lambda: prom_figures(cp) == expected, what="PromQL equal to cozyrender tree -o json")


def test_only_the_leader_exports_the_figures(cp):
    leader = cp.holder()
    assert query(cp, "sum(cozyrender_controller_leader)")[0]["value"][1] == "1"
    exporters = {s["metric"]["instance"] for s in query(cp, "cozyrender_tenant_budget")}
    assert exporters == {f"127.0.0.1:{cp.replicas[leader]}"}


def test_class_figures_equal_the_catalog(cp, kubectl, tmp_path):
    listed = subprocess.run([str(kubectl), f"--kubeconfig={cp.plane.kubeconfig}", "get", "nodes,pods,gpuclasses",
                             "-A", "-o", "json"], capture_output=True, text=True, check=True).stdout
    (tmp_path / "state.json").write_text(listed)
    catalog = json.loads(subprocess.run([sys.executable, "-m", "cozyrender", "catalog", "--state",
                                         str(tmp_path / "state.json"), "-o", "json"],
                                        capture_output=True, text=True, check=True).stdout)
    [row] = catalog["gpuClasses"]
    assert row["freeUnits"] == 6

    def answers():
        return {metric: query(cp, f"sum by (gpuclass) ({metric})")
                for metric in ("cozyrender_gpuclass_free_units", "cozyrender_gpuclass_allocatable_units",
                               "cozyrender_gpuclass_nodes", "cozyrender_gpuclass_conflict")}

    expected = {"cozyrender_gpuclass_free_units": row["freeUnits"],
                "cozyrender_gpuclass_allocatable_units": row["allocatableUnits"],
                "cozyrender_gpuclass_nodes": row["eligibleNodes"], "cozyrender_gpuclass_conflict": 0}
    wait_for(lambda: {m: [(s["metric"]["gpuclass"], Fraction(s["value"][1])) for s in v]
                      for m, v in answers().items()} == {m: [("a100", Fraction(n))] for m, n in expected.items()},
             what="per-class PromQL equal to the catalog")


def test_the_figures_follow_a_new_workload_and_audit_findings_count(cp):
    cp.create(apps_path("vminstances", "tenant-acme-ml"), vm("train-2", 3))  # ml's 4 a100s: 2 + 3 is over
    wait_for(lambda: prom_figures(cp) == tree_figures(cp)
             # train 2, train-2 3 and the pod vm-train holding 2 with no owner (a door of its own, issue 32)
             and prom_figures(cp)[("tenant-acme-ml", "a100.gpuclass.cozystack.io/devices", "used")] == 7,
             what="PromQL following the new VM")
    over = query(cp, 'cozyrender_tenant_budget_over_committed == 1')
    assert {(s["metric"]["namespace"], s["metric"]["key"]) for s in over} >= {
        ("tenant-acme-ml", "a100.gpuclass.cozystack.io/devices")}
    findings = subprocess.run([sys.executable, "-m", "cozyrender", "tree", "--kubeconfig", str(cp.plane.kubeconfig),
                               "-o", "json"], capture_output=True, text=True, check=True)
    data = json.loads(findings.stdout)
    every = [f for node in data["tenants"] for f in node["findings"]] + data["findings"]
    counted = {}
    for finding in every:
        counted[(finding["kind"], finding["severity"])] = counted.get((finding["kind"], finding["severity"]), 0) + 1
    wait_for(lambda: {(s["metric"]["kind"], s["metric"]["severity"]): int(s["value"][1])
                      for s in query(cp, "sum by (kind, severity) (cozyrender_audit_findings)")} == counted,
             what="audit findings by kind equal to the tree's")


# ---------------------------------------------------------------- device-time (issue 35 item 2)


def samples(cp, promql: str) -> list[tuple[float, float]]:
    """The raw samples (scrape timestamp, value) of one series over the last minute."""
    [series] = query(cp, f"{promql}[1m]")
    return [(float(at), float(value)) for at, value in series["values"]]


@pytest.mark.parametrize("counter, selector, devices", [
    ("cozyrender_tenant_reserved_device_seconds_total", 'tenant="tenant-acme",class="a100"', 1),  # VMInstance infer
    ("cozyrender_tenant_allocated_device_seconds_total", 'tenant="tenant-acme-ml",class="a100"', 2),  # vm-train
])
def test_the_device_seconds_grow_by_the_devices_held_times_the_seconds(cp, counter, selector, devices):
    """Between two scrapes of the leader the counter grows by devices × the
    time between their timestamps. Prometheus stamps a sample with the
    scrape's start; the leader advances the counter when it answers, some
    time within the scrape. So the two moments the counter was read differ
    from the stamps by at most the longer of the two scrapes' durations
    (`scrape_duration_seconds`, stamped alike), and stamps are whole
    milliseconds: that is the tolerance, times the devices."""
    leader = f"127.0.0.1:{cp.replicas[cp.holder()]}"
    series = f'{counter}{{{selector},instance="{leader}"}}'
    wait_for(lambda: len(query(cp, series)) == 1 and len(samples(cp, series)) >= 7, what="seven scrapes")
    counted = samples(cp, series)
    durations = dict(samples(cp, f'scrape_duration_seconds{{instance="{leader}"}}'))
    (first, start), (last, end) = counted[0], counted[-1]
    assert last - first >= 5  # a known interval of at least five seconds
    tolerance = devices * (max(durations[first], durations[last]) + 0.002)
    assert abs((end - start) - devices * (last - first)) <= tolerance, (start, end, first, last, tolerance)


def billing_queries() -> list[str]:
    blocks = re.findall(r"^```promql\n(.*?)^```", BILLING.read_text(encoding="utf-8"), re.S | re.M)
    return [" ".join(block.split()) for block in blocks]


def test_every_billing_query_returns_data(cp):
    """Each query the billing page shows, against the chart's rules and the live leader."""
    queries = billing_queries()
    assert len(queries) >= 5
    for promql in queries:
        wait_for(lambda: query(cp, promql), what=f"data for {promql}")
    assert {(s["metric"]["tenant"], s["metric"]["class"]) for s in
            query(cp, "cozyrender:tenant_reserved_device_hours:increase1d")} >= {
        ("tenant-acme", "a100"), ("tenant-acme-ml", "a100")}


# ---------------------------------------------------------------- the dashboard (issue 35 item 4)


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"]
            for target in panel.get("targets", [])]


def test_every_dashboard_panel_returns_data(cp):
    """One real AdmissionReview to the webhook (a dry run: nothing recorded)
    so its decision series exist, then every panel's query, against the
    chart's rules, the leader and the webhook."""
    wait_for(lambda: query(cp, "cozyrender_webhook_ready == 1"), what="the webhook ready")
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "dashboard-1", "kind": {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "VMInstance"},
        "resource": {"group": "apps.cozystack.io", "version": "v1alpha1", "resource": "vminstances"},
        "namespace": "tenant-acme", "name": "probe", "operation": "CREATE", "userInfo": {"username": "tenant-user"},
        "object": {**vm("probe", 1), "metadata": {"name": "probe", "namespace": "tenant-acme"}}, "oldObject": None,
        "dryRun": True}}
    context = ssl.create_default_context(cafile=str(cp.plane.pki / "ca.crt"))
    request = urllib.request.Request(f"https://127.0.0.1:{cp.webhook}/validate", data=json.dumps(review).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        answer = json.loads(response.read())["response"]
    # allowed, or refused once ml's train-2 put acme's pool over budget: a decision either way
    assert answer["uid"] == "dashboard-1" and isinstance(answer["allowed"], bool), answer
    queries = panel_queries()
    assert len(queries) >= 15
    for title, promql in queries:
        wait_for(lambda: query(cp, promql), what=f"data for the panel {title!r}: {promql}")
