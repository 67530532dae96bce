"""The scrape configuration the operators generate from the chart's scrape objects (issue 35
item 3). No operator runs here, so this is the operator's step, ported: a rendered
ServiceMonitor (monitoring.coreos.com/v1) becomes the Prometheus `scrape_configs` entries
prometheus-operator writes for it, and a rendered VMServiceScrape
(operator.victoriametrics.com/v1beta1) the ones VictoriaMetrics' operator writes for vmagent
(which reads Prometheus' scrape_configs). tests/node_controller_checks.py runs Debian's Prometheus
with the result against the node plane, so the labels a series keeps there are the ones a
hoster's operator-run scraper keeps.

The rule, per endpoint i of the object: one job (`serviceMonitor/<ns>/<name>/<i>`,
`serviceScrape/...` for VictoriaMetrics) that
- discovers the `endpoints` role (the operators' default; `endpointslice` on request) in the
  namespaces of `namespaceSelector` (its `matchNames`; the object's own when it names none; every
  namespace with `any`), through the scraper object's `apiserverConfig` when it has one;
- keeps only the addresses of Services whose labels match `selector`, on the port named `port`;
- labels each target `node`/`pod` (the address' target), `namespace`, `service`, `pod`,
  `container` (the discovered objects'), `job` (the Service's name, or its `jobLabel` label) and
  `endpoint` (the port's name), with the Service's `targetLabels` and the pod's `podTargetLabels`;
  prometheus-operator also drops pods that ended (Failed, Succeeded) and shards by address (one
  shard: `$(SHARD)` is 0, as its config reloader substitutes it);
- sets `honor_labels` to the endpoint's `honorLabels` unless the scraper object's
  `overrideHonorLabels` forces it off, and `scheme`, `metrics_path`, `scrape_interval`,
  `scrape_timeout`, and `tls_config` (`server_name`, `insecure_skip_verify`, and `ca_file`: the
  CA the object names in a Secret or ConfigMap of its namespace, written where the operator
  mounts it, under the operator's file name).
An object or endpoint field this port does not cover is refused (ScrapeObjectError), never
silently dropped.

Ported as data, not code, from:
- prometheus-operator v0.93.0 (commit 6adcebc5076c34f4f55f8f5f7b1e528929373ac7):
  pkg/prometheus/promcfg.go (generateServiceMonitorConfig, initRelabelings, generateK8SSDConfig,
  getNamespacesFromNamespaceSelector, addSafeTLStoYaml, addAuthorizationToYaml,
  appendShardingRelabelingWithLabel, generateRunningFilter), pkg/assets/tls.go (asset names);
- VictoriaMetrics operator v0.74.1-31 (commit d0d258c86b5aed0df47dd2b3c52c5a97e40e6b48):
  internal/controller/operator/factory/vmscrapes/servicescrape.go (generateServiceScrapeConfig),
  vmscrapes.go (addSelectorToRelabelingFor, addCommonScrapeParamsTo, addEndpointAuthTo,
  generateK8SSDConfig), factory/build/cache.go (TLSToYAML, asset names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# The relabelings that name a target, by rule; `{sd}` is `endpoint` or `endpointslice`.
TARGET_RULES: dict[str, dict] = {
    "node": {"source_labels": ["__meta_kubernetes_{sd}_address_target_kind",
                               "__meta_kubernetes_{sd}_address_target_name"],
             "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
    "pod-of-address": {"source_labels": ["__meta_kubernetes_{sd}_address_target_kind",
                                         "__meta_kubernetes_{sd}_address_target_name"],
                       "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
    "namespace": {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
    "service": {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
    "pod": {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    "container": {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
    "running": {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
}
# prometheus-operator's shard filter (one shard), after its config reloader substituted $(SHARD).
SHARDING = [
    {"source_labels": ["__address__", "__tmp_hash"], "target_label": "__tmp_hash", "regex": "(.+);",
     "replacement": "$1", "action": "replace"},
    {"source_labels": ["__tmp_hash"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
    {"source_labels": ["__tmp_hash", "__tmp_disable_sharding"], "regex": "0;|.+;.+", "action": "keep"},
]


@dataclass(frozen=True)
class Operator:
    """What differs between the two operators' generators."""

    kind: str
    api_version: str
    job_name: str                   # formatted with namespace, name, index
    head: tuple[dict, ...]          # relabelings before the selector's
    label_present: bool             # the selector's keep also requires `labelpresent` (regex `(v);true`)
    target_rules: tuple[str, ...]   # TARGET_RULES, in the generator's order
    tail: tuple[dict, ...]          # relabelings after every other
    assets: str                     # where the operator mounts the TLS assets in the scraper's pod
    asset_name: Callable[[str, str, str, str], str]  # (from: Secret|ConfigMap, namespace, name, key)


PROMETHEUS_OPERATOR = Operator(
    kind="ServiceMonitor", api_version="monitoring.coreos.com/v1", job_name="serviceMonitor/{}/{}/{}",
    head=({"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},), label_present=True,
    target_rules=("node", "pod-of-address", "namespace", "service", "pod", "container", "running"),
    tail=tuple(SHARDING), assets="/etc/prometheus/certs",
    asset_name=lambda source, ns, name, key: f"{0 if source == 'Secret' else 1}_{ns}_{name}_{key}")
VM_OPERATOR = Operator(
    kind="VMServiceScrape", api_version="operator.victoriametrics.com/v1beta1", job_name="serviceScrape/{}/{}/{}",
    head=(), label_present=False,
    target_rules=("node", "pod-of-address", "pod", "container", "namespace", "service"),
    tail=(), assets="/etc/vmagent-tls/certs",
    asset_name=lambda source, ns, name, key: f"{ns}_{name if source == 'Secret' else 'configmap_' + name}_{key}")
OPERATORS = {op.kind: op for op in (PROMETHEUS_OPERATOR, VM_OPERATOR)}

SPEC_FIELDS = {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels", "podTargetLabels"}
ENDPOINT_FIELDS = {"port", "scheme", "path", "interval", "scrapeTimeout", "honorLabels", "tlsConfig"}
TLS_FIELDS = {"ca", "serverName", "insecureSkipVerify"}
ROLES = {"endpoints": "endpoint", "endpointslice": "endpointslice"}


class ScrapeObjectError(ValueError):
    """A scrape object this port cannot translate faithfully."""


def _label(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _refuse_unknown(where: str, given: dict, known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise ScrapeObjectError(f"{where}: {', '.join(unknown)} not translated by tools/scrape_objects.py")


def _selector_rules(selector: dict, label_present: bool) -> list[dict]:
    _refuse_unknown("spec.selector", selector, {"matchLabels", "matchExpressions"})

    def sources(key: str) -> list[str]:
        present = [f"__meta_kubernetes_service_labelpresent_{_label(key)}"] if label_present else []
        return [f"__meta_kubernetes_service_label_{_label(key)}", *present]

    def regex(values: str) -> str:
        return f"({values});true" if label_present else values

    rules = [{"action": "keep", "source_labels": sources(k), "regex": regex(v)}
             for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, op = expression["key"], expression["operator"]
        present = [f"__meta_kubernetes_service_labelpresent_{_label(key)}"]
        if op in ("In", "NotIn"):
            rules.append({"action": "keep" if op == "In" else "drop", "source_labels": sources(key),
                          "regex": regex("|".join(expression["values"]))})
        elif op in ("Exists", "DoesNotExist"):
            rules.append({"action": "keep" if op == "Exists" else "drop", "source_labels": present, "regex": "true"})
        else:
            raise ScrapeObjectError(f"spec.selector: operator {op!r}")
    return rules


def _namespaces(selector: dict, own: str) -> list[str]:
    _refuse_unknown("spec.namespaceSelector", selector, {"matchNames", "any"})
    if selector.get("any"):
        return []
    return list(selector.get("matchNames") or []) or [own]


def _api_server(config: dict) -> dict:
    """The scraper object's `apiserverConfig` (host, tlsConfig.caFile, authorization.credentialsFile)."""
    _refuse_unknown("apiserverConfig", config, {"host", "tlsConfig", "authorization"})
    out: dict = {"api_server": config["host"]}
    if "authorization" in config:
        out["authorization"] = {"type": config["authorization"].get("type", "Bearer"),
                                "credentials_file": config["authorization"]["credentialsFile"]}
    if "tlsConfig" in config:
        out["tls_config"] = {"ca_file": config["tlsConfig"]["caFile"]}
    return out


def scrape_configs(scrape_object: dict, *, read_key: Callable[[str, str, str, str], str], assets_dir: Path,
                   api_server: dict | None = None, role: str = "endpoints",
                   override_honor_labels: bool = False) -> list[dict]:
    """The scrape configs the object's operator generates, one per endpoint.

    `read_key(source, namespace, name, key)` reads a Secret's or ConfigMap's key as the operator
    does (source "Secret" or "ConfigMap"); the assets it reads are written into `assets_dir`, which
    stands for the operator's mount in the scraper's pod. `api_server` and `override_honor_labels`
    are the scraper object's (Prometheus', VMAgent's) `apiserverConfig` and `overrideHonorLabels`;
    `role` its service discovery role."""
    operator = OPERATORS.get(scrape_object.get("kind"))
    if operator is None or scrape_object.get("apiVersion") != operator.api_version:
        raise ScrapeObjectError(f"not a ServiceMonitor or VMServiceScrape: {scrape_object.get('apiVersion')} "
                                f"{scrape_object.get('kind')}")
    if role not in ROLES:
        raise ScrapeObjectError(f"service discovery role {role!r}")
    sd = ROLES[role]
    meta, spec = scrape_object["metadata"], scrape_object["spec"]
    namespace = meta["namespace"]
    _refuse_unknown(f"{operator.kind} spec", spec, SPEC_FIELDS)
    discovery: dict = {"role": role}
    names = _namespaces(spec.get("namespaceSelector") or {}, namespace)
    if names:
        discovery["namespaces"] = {"names": names}
    if api_server:
        discovery.update(_api_server(api_server))
    configs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        where = f"{operator.kind} spec.endpoints[{index}]"
        _refuse_unknown(where, endpoint, ENDPOINT_FIELDS)
        if not endpoint.get("port"):
            raise ScrapeObjectError(f"{where}: no port (targetPort is not translated)")
        config: dict = {"job_name": operator.job_name.format(namespace, meta["name"], index),
                        "honor_labels": bool(endpoint.get("honorLabels")) and not override_honor_labels,
                        "kubernetes_sd_configs": [discovery]}
        for field, key in (("interval", "scrape_interval"), ("scrapeTimeout", "scrape_timeout"),
                           ("path", "metrics_path")):
            if endpoint.get(field):
                config[key] = endpoint[field]
        if endpoint.get("scheme"):
            config["scheme"] = endpoint["scheme"].lower()
        if "tlsConfig" in endpoint:
            config["tls_config"] = _tls(operator, f"{where}.tlsConfig", endpoint["tlsConfig"], namespace,
                                        read_key, Path(assets_dir))
        rules = [*operator.head, *_selector_rules(spec.get("selector") or {}, operator.label_present),
                 {"action": "keep", "source_labels": [f"__meta_kubernetes_{sd}_port_name"], "regex": endpoint["port"]}]
        for name in operator.target_rules:
            rule = dict(TARGET_RULES[name])
            rule["source_labels"] = [s.format(sd=sd) for s in rule["source_labels"]]
            rules.append(rule)
        for source, labels in (("service", spec.get("targetLabels") or []), ("pod", spec.get("podTargetLabels") or [])):
            rules += [{"source_labels": [f"__meta_kubernetes_{source}_label_{_label(label)}"],
                       "target_label": _label(label), "regex": "(.+)", "replacement": "${1}"} for label in labels]
        rules.append({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"})
        if spec.get("jobLabel"):
            rules.append({"source_labels": [f"__meta_kubernetes_service_label_{_label(spec['jobLabel'])}"],
                          "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
        rules.append({"target_label": "endpoint", "replacement": endpoint["port"]})
        config["relabel_configs"] = [*rules, *operator.tail]
        configs.append(config)
    return configs


def _tls(operator: Operator, where: str, tls: dict, namespace: str, read_key, assets_dir: Path) -> dict:
    _refuse_unknown(where, tls, TLS_FIELDS)
    out: dict = {}
    if tls.get("insecureSkipVerify"):
        out["insecure_skip_verify"] = True
    ca = tls.get("ca") or {}
    _refuse_unknown(f"{where}.ca", ca, {"secret", "configMap"})
    for field, source in (("secret", "Secret"), ("configMap", "ConfigMap")):
        if field in ca:
            ref = ca[field]
            asset = assets_dir / operator.asset_name(source, namespace, ref["name"], ref["key"])
            asset.parent.mkdir(parents=True, exist_ok=True)
            asset.write_text(read_key(source, namespace, ref["name"], ref["key"]))
            out["ca_file"] = str(asset)
    if tls.get("serverName"):
        out["server_name"] = tls["serverName"]
    return out


def through_http_sd(configs: list[dict], url: str, refresh: str = "2s") -> list[dict]:
    """The same scrape configs for Debian's prometheus, which is built without the Kubernetes
    service discovery: each job's `kubernetes_sd_configs` becomes an `http_sd_configs` entry
    reading `<url>/sd/<job_name>` from tools/k8ssd (`cozyrender-k8s-sd`), which runs those very
    kubernetes_sd_configs with Prometheus' own Kubernetes SD and serves every meta label it
    discovers. Nothing else changes: relabeling, honor_labels, TLS and scraping stay Prometheus'."""
    return [{**{k: v for k, v in config.items() if k != "kubernetes_sd_configs"},
             "http_sd_configs": [{"url": f"{url}/sd/{config['job_name']}", "refresh_interval": refresh}]}
            for config in configs]
