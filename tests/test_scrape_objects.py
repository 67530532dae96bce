"""tools/scrape_objects.py on the chart's own scrape objects, rendered by real Helm (issue 35
item 3): the ServiceMonitor and the VMServiceScrape become the scrape configs their operators
generate, which Debian's promtool accepts (discovery aside: see through_http_sd); the two agree in what decides the labels and the
connection (honor_labels, the Service selector, the port, scheme, path, interval, the CA and the
server name); the scraper's `overrideHonorLabels` turns honor_labels off; the CA is read from the
Secret (cert-manager) or the ConfigMap the object names, under each operator's asset name; a
field the port does not cover is refused. The live scrape through them:
tests/node_controller_checks.py."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_controller_chart import render

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from scrape_objects import ScrapeObjectError, scrape_configs, through_http_sd  # noqa: E402

CA = "-----BEGIN CERTIFICATE-----\nthe chart's CA\n-----END CERTIFICATE-----\n"
CA_FROM_SECRET = "-----BEGIN CERTIFICATE-----\ncert-manager's CA\n-----END CERTIFICATE-----\n"
FROM_CONFIGMAP = ("--set", "tls.certManager=false", "--set", "tls.secretName=serving",
                  "--set", f"tls.caBundle={base64.b64encode(CA.encode()).decode()}")
BOTH = ("--set", "monitoring.serviceMonitor=true", "--set", "monitoring.vmServiceScrape=true")


def scrape_objects(helm4: Path, *args: str) -> tuple[dict[str, dict], dict]:
    objects = render(helm4, *BOTH, *args)
    store = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects
             if o["kind"] == "ConfigMap"}
    store[("Secret", "cozyrender-system", "cozyrender-webhook-tls")] = {"data": {"ca.crt": CA_FROM_SECRET}}
    return {o["kind"]: o for o in objects if o["kind"] in ("ServiceMonitor", "VMServiceScrape")}, store


def translate(scrape_object: dict, store: dict, assets: Path, **options) -> list[dict]:
    def read_key(source: str, namespace: str, name: str, key: str) -> str:
        return store[(source, namespace, name)]["data"][key]

    return scrape_configs(scrape_object, read_key=read_key, assets_dir=assets, **options)


def what_matters(config: dict) -> dict:
    """What decides a series' labels and the connection, with the CA by content, not path."""
    tls = dict(config.get("tls_config", {}))
    if "ca_file" in tls:
        tls["ca_file"] = Path(tls.pop("ca_file")).read_text()
    rules = config["relabel_configs"]
    return {"honor_labels": config["honor_labels"], "scheme": config.get("scheme"),
            "metrics_path": config["metrics_path"], "scrape_interval": config["scrape_interval"],
            "namespaces": config["kubernetes_sd_configs"][0]["namespaces"], "tls": tls,
            "port": [r["regex"] for r in rules if r.get("source_labels") == ["__meta_kubernetes_endpoint_port_name"]],
            "selected": sorted((r["source_labels"][0], r["regex"].removeprefix("(").removesuffix(");true"))
                               for r in rules if r.get("action") == "keep"
                               and r["source_labels"][0].startswith("__meta_kubernetes_service_label_")),
            "target_labels": sorted(r["target_label"] for r in rules if "target_label" in r
                                    and not r["target_label"].startswith("__"))}


def test_the_servicemonitor_and_the_vmservicescrape_translate_alike(helm4: Path, tmp_path: Path) -> None:
    objects, store = scrape_objects(helm4, *FROM_CONFIGMAP)
    prometheus = translate(objects["ServiceMonitor"], store, tmp_path / "prometheus")
    vmagent = translate(objects["VMServiceScrape"], store, tmp_path / "vmagent")
    assert [c["job_name"] for c in prometheus] == ["serviceMonitor/cozyrender-system/cozyrender-webhook/0",
                                                   "serviceMonitor/cozyrender-system/cozyrender-webhook/1"]
    assert [c["job_name"] for c in vmagent] == ["serviceScrape/cozyrender-system/cozyrender-webhook/0",
                                                "serviceScrape/cozyrender-system/cozyrender-webhook/1"]
    assert [what_matters(c) for c in prometheus] == [what_matters(c) for c in vmagent]
    webhook, controller = map(what_matters, prometheus)
    assert webhook == {
        "honor_labels": True, "scheme": "https", "metrics_path": "/metrics", "scrape_interval": "30s",
        "namespaces": {"names": ["cozyrender-system"]},
        "tls": {"ca_file": CA, "server_name": "cozyrender-webhook.cozyrender-system.svc"}, "port": ["https"],
        "selected": [("__meta_kubernetes_service_label_app_kubernetes_io_instance", "cozyrender-webhook"),
                     ("__meta_kubernetes_service_label_app_kubernetes_io_name", "cozyrender-webhook")],
        "target_labels": ["container", "endpoint", "job", "namespace", "node", "pod", "pod", "service"]}
    assert (controller["honor_labels"], controller["scheme"], controller["port"], controller["tls"]) == \
        (True, "http", ["metrics"], {})
    # Each operator's asset file name for the ConfigMap the object names.
    assert Path(prometheus[0]["tls_config"]["ca_file"]).name == "1_cozyrender-system_cozyrender-webhook-ca_ca.crt"
    assert Path(vmagent[0]["tls_config"]["ca_file"]).name == "cozyrender-system_configmap_cozyrender-webhook-ca_ca.crt"


def test_the_scrapers_override_turns_honor_labels_off(helm4: Path, tmp_path: Path) -> None:
    objects, store = scrape_objects(helm4, *FROM_CONFIGMAP)
    for kind, scrape_object in objects.items():
        assert [c["honor_labels"] for c in translate(scrape_object, store, tmp_path)] == [True, True], kind
        assert [c["honor_labels"] for c in translate(scrape_object, store, tmp_path, override_honor_labels=True)] \
            == [False, False], kind


def test_with_cert_manager_the_ca_comes_from_its_secret(helm4: Path, tmp_path: Path) -> None:
    objects, store = scrape_objects(helm4)
    for kind, scrape_object in objects.items():
        config = translate(scrape_object, store, tmp_path / kind)[0]
        assert Path(config["tls_config"]["ca_file"]).read_text() == CA_FROM_SECRET, kind
    assert Path(translate(objects["ServiceMonitor"], store, tmp_path)[0]["tls_config"]["ca_file"]).name == \
        "0_cozyrender-system_cozyrender-webhook-tls_ca.crt"


def test_promtool_accepts_the_translated_configuration(helm4: Path, tmp_path: Path) -> None:
    objects, store = scrape_objects(helm4, *FROM_CONFIGMAP)
    token = tmp_path / "token"
    token.write_text("a-token")
    api_server = {"host": "https://127.0.0.1:6443", "tlsConfig": {"caFile": str(tmp_path / "prometheus" / "api-ca.crt")},
                  "authorization": {"credentialsFile": str(token)}}
    (tmp_path / "prometheus").mkdir()
    (tmp_path / "prometheus" / "api-ca.crt").write_text(CA)
    for role in ("endpoints", "endpointslice"):
        configs = [c for kind, o in objects.items() for c in translate(o, store, tmp_path / kind, api_server=api_server,
                                                                      role=role)]
        # Debian's promtool, like its prometheus, has no Kubernetes SD: it checks the rest, with the
        # discovery served over HTTP SD by tools/k8ssd (which parses kubernetes_sd_configs itself).
        config = tmp_path / f"{role}.yml"
        config.write_text(yaml.safe_dump({"scrape_configs": through_http_sd(configs, "http://127.0.0.1:9")}))
        checked = subprocess.run(["promtool", "check", "config", "--syntax-only", str(config)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        sources = {s for c in configs for r in c["relabel_configs"] for s in r.get("source_labels", [])}
        assert f"__meta_kubernetes_{'endpoint' if role == 'endpoints' else 'endpointslice'}_port_name" in sources


def test_a_field_the_port_does_not_cover_is_refused(helm4: Path, tmp_path: Path) -> None:
    objects, store = scrape_objects(helm4, *FROM_CONFIGMAP)
    monitor = objects["ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["metricRelabelings"] = [{"action": "drop"}]
    with pytest.raises(ScrapeObjectError, match=r"spec.endpoints\[0\]: metricRelabelings not translated"):
        translate(monitor, store, tmp_path)
