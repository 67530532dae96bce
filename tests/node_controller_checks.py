"""The controller as the chart deploys it, on the real node (issue 33 item 4): the
`cozyrender-webhook-controller` Deployment from `helm install` of charts/cozyrender-webhook
(tests/test_node_cluster.py's plane and fixtures: the image built here, the chart's values
as `make cluster` gives them, `env` pointing pods at the API server's forward on the bridge).

- both controller pods carry the chart's `env` (the webhook's alike) and are Ready, one of
  them holding the Lease; every pod of the chart runs at `system-cluster-critical` with its
  `preStop` sleep, and the controller's PodDisruptionBudget allows one disruption;
- the leader writes a GPUClass's status from the node's allocatable (the device plugin's 4
  devices), and copies a vGPU class's license into an entitled namespace, not into one that
  is not entitled;
- the metrics are scraped from the pods at their pod addresses: exactly one says it leads,
  and the leader's figures equal the GPUClass status;
- Debian's Prometheus scrapes both webhook pods and both controller pods through the chart's own
  ServiceMonitor, as prometheus-operator turns it into a scrape configuration
  (tools/scrape_objects.py; service discovery through the real API server with the rights
  prometheus-operator's docs give Prometheus, Prometheus' own Kubernetes SD served by
  tools/k8ssd): every target up, labelled as the operator labels it, and a tenant's series keep
  their own `namespace` (honorLabels); with the scraper's overrideHonorLabels the same series
  have it moved to `exported_namespace` (issue 35 item 3);
- with the API server unreachable from the pods (its forward on the bridge stopped), the
  controller pods turn not Ready (`/readyz` past `--ready-contact`, 30 s in the chart), and
  Ready again once it is back. Last on the plane: it cuts every pod off for a while.

Run on tests/test_node_cluster.py's plane, which imports these tests (this module's name keeps
pytest from collecting them twice): one node plane for both saves a plane's start (about 50 s).
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from test_node_cluster import NAMESPACE, RELEASE, kubectl_json, make_tenant, ready, wait_for  # noqa: F401
from test_webhook_live import A100

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from scrape_objects import scrape_configs, through_http_sd  # noqa: E402

LABEL = "namespace.cozystack.io/vgpu"
GPUCLASSES = "/apis/cozystack.io/v1alpha1/gpuclasses"


def controller_pods(plane) -> list[dict]:
    pods = kubectl_json(plane, "-n", NAMESPACE, "get", "pods", "-l",
                        "app.kubernetes.io/name=cozyrender-controller")["items"]
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


def scrape(pod: dict) -> dict[str, float]:
    """A controller pod's /metrics at its pod address, as a scraper reads it: series -> value."""
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:8080/metrics", timeout=10) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def leader_of(plane) -> dict | None:
    leaders = [pod for pod in controller_pods(plane) if ready(pod)
               and scrape(pod).get("cozyrender_controller_leader") == 1]
    return leaders[0] if len(leaders) == 1 else None


def test_the_controller_pods_take_the_charts_env_and_are_ready(plane, api):
    webhook = kubectl_json(plane, "-n", NAMESPACE, "get", "deployment", "cozyrender-webhook")
    controller = kubectl_json(plane, "-n", NAMESPACE, "get", "deployment", "cozyrender-webhook-controller")
    webhook_env = webhook["spec"]["template"]["spec"]["containers"][0]["env"]
    controller_env = controller["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e for e in controller_env if e["name"].startswith("KUBERNETES_SERVICE")] == webhook_env
    wait_for("both controller pods Ready", lambda: len(controller_pods(plane)) == 2
             and all(map(ready, controller_pods(plane))))

    def held_by_a_pod():
        # Earlier tests on this plane move the pods (a drain, rollouts): the Lease of a leader
        # that was deleted stays with its name until it is released and a standby takes it.
        status, lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/"
                                "cozyrender-webhook-controller")
        assert status == 200, lease
        holder = lease["spec"].get("holderIdentity")
        return holder if holder in {pod["metadata"]["name"] for pod in controller_pods(plane)} else None

    wait_for("the Lease held by one of the two pods", held_by_a_pod, 60)
    # The chart's production defaults, as the API server and the kubelet took them.
    webhook_pods = kubectl_json(plane, "-n", NAMESPACE, "get", "pods", "-l",
                                "app.kubernetes.io/name=cozyrender-webhook")["items"]
    for pod in controller_pods(plane) + webhook_pods:
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        assert pod["spec"]["priority"] == 2000000000  # resolved by the API server's Priority admission
        assert pod["spec"]["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] >= 1

    def observed_budget():
        budget = kubectl_json(plane, "-n", NAMESPACE, "get", "pdb", "cozyrender-webhook-controller")
        return budget if (budget.get("status") or {}).get("currentHealthy") == 2 else None

    budget = wait_for("the controller's PodDisruptionBudget observed", observed_budget, 60)
    assert budget["status"]["disruptionsAllowed"] == 1


def test_a_gpuclass_gets_its_status_and_the_leaders_metrics_say_the_same(plane, api):
    def written():
        status, obj = api.get(f"{GPUCLASSES}/a100")
        figures = (obj.get("status") or {}) if status == 200 else {}
        return figures if figures.get("allocatable") is not None else None

    status = wait_for("the a100 class's status", written, 120)
    assert (status["nodes"], status["allocatable"]) == (1, 4), status
    leader = wait_for("one leader scraped", lambda: leader_of(plane), 60)
    standby = [pod for pod in controller_pods(plane) if pod["metadata"]["name"] != leader["metadata"]["name"]]

    def class_figures():
        # The class figures and the tree's come from two informers' caches, each exported once it
        # has synced: wait for both (a leader that just took over has one before the other).
        metrics = scrape(leader)
        return metrics if "cozyrender_tenant_tree_error" in metrics and any(
            k.startswith("cozyrender_gpuclass_free_units") for k in metrics) else None

    figures = wait_for("the leader's class figures", class_figures, 60)
    [free] = [v for k, v in figures.items() if k.startswith('cozyrender_gpuclass_free_units{gpuclass="a100"')]
    assert free == status["free"]
    assert figures["cozyrender_tenant_tree_error"] == 0
    for pod in standby:
        metrics = scrape(pod)
        assert metrics["cozyrender_controller_leader"] == 0
        assert not [k for k in metrics if k.startswith("cozyrender_gpuclass_")]  # the leader alone exports figures


def test_an_entitled_namespace_gets_its_license_copy(plane, api):
    plane.kubectl("label", "namespace", "tenant-root", f"{LABEL}=true", "--overwrite")
    for namespace, value in (("tenant-licensed", "true"), ("tenant-unlicensed", "false")):
        plane.kubectl("create", "namespace", namespace)
        plane.kubectl("label", "namespace", namespace, f"{LABEL}={value}")
    token = base64.b64encode(b"node-token").decode()
    status, body = api.create("/api/v1/namespaces/cozy-system/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nls-token"}, "data": {"token": token}})
    assert status == 201, body
    status, body = api.create(GPUCLASSES, {
        "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100-4c"},
        "spec": {"vendor": "NVIDIA", "model": "A100", "mode": "vgpu", "memory": "40Gi", "profile": "A100-4C",
                 "sourceKind": "MediatedDevice", "resourceName": "nvidia.com/GRID_A100-4C",
                 "license": {"secretRef": {"namespace": "cozy-system", "name": "nls-token"}, "featureType": 4}}})
    assert status == 201, body

    def copied():
        status, obj = api.get("/api/v1/namespaces/tenant-licensed/secrets/vgpu-license-a100-4c")
        return obj if status == 200 else None

    copy = wait_for("the license copy in tenant-licensed", copied, 120)
    assert copy["data"]["client_configuration_token.tok"] == token
    assert copy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "cozyrender-license-copier"
    status, _ = api.get("/api/v1/namespaces/tenant-unlicensed/secrets/vgpu-license-a100-4c")
    assert status == 404


# prometheus-operator's Documentation/platform/rbac.md "Prometheus RBAC" (v0.93.0): what Prometheus may read.
PROMETHEUS_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "nodes/metrics", "services", "endpoints", "pods"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def prometheus_query(url: str, promql: str) -> list[dict]:
    """A PromQL answer; none while the server is not listening yet."""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}),
                                    timeout=10) as response:
            answer = json.loads(response.read())
    except OSError:
        return []
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def read_key(plane):
    """The operator's read of a Secret's or ConfigMap's key, from the API server."""
    def read(source: str, namespace: str, name: str, key: str) -> str:
        data = kubectl_json(plane, "-n", namespace, "get", source.lower(), name)["data"]
        return base64.b64decode(data[key]).decode() if source == "Secret" else data[key]
    return read


def test_prometheus_scrapes_the_pods_through_the_charts_servicemonitor(plane, api, tmp_path):
    from common import free_port

    prometheus_binary = Path("/usr/bin/prometheus")
    k8s_sd = plane.bin / "cozyrender-k8s-sd"
    assert prometheus_binary.exists() and k8s_sd.exists(), "run `make prometheus node`"
    tenant = make_tenant(api, "scraped", {A100: 2})
    # The chart's objects with the plane's values and the scrape objects on, every 2 s.
    values = {**plane.node.webhook_values, "monitoring": {"serviceMonitor": True, "vmServiceScrape": True,
                                                          "interval": "2s"}}
    rendered = [o for o in yaml.safe_load_all(plane.node.helm(
        "template", RELEASE, str(ROOT / "charts" / "cozyrender-webhook"), "-n", NAMESPACE, values=values).stdout) if o]
    [monitor] = [o for o in rendered if o["kind"] == "ServiceMonitor"]
    [ca] = [o for o in rendered if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{RELEASE}-ca"]
    # The object's CA ConfigMap (the release would hold it with these values), and Prometheus'
    # ServiceAccount with the documented rights, its token for the API server.
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        ca, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus", "namespace": "monitoring"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "prometheus"},
         "rules": PROMETHEUS_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "prometheus"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "prometheus"},
         "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]}]}))
    token = tmp_path / "token"
    token.write_text(plane.kubectl("-n", "monitoring", "create", "token", "prometheus", "--duration=1h").stdout.strip())
    api_server = {"host": plane.server, "tlsConfig": {"caFile": str(plane.pki / "ca.crt")},
                  "authorization": {"credentialsFile": str(token)}}
    honoring = scrape_configs(monitor, read_key=read_key(plane), assets_dir=tmp_path / "certs", api_server=api_server)
    overriding = scrape_configs(monitor, read_key=read_key(plane), assets_dir=tmp_path / "certs",
                                api_server=api_server, override_honor_labels=True)
    sd = f"127.0.0.1:{free_port()}"
    (tmp_path / "sd.yml").write_text(yaml.safe_dump({"scrape_configs": honoring}))
    plane._spawn("k8s-sd", [str(k8s_sd), f"--config={tmp_path / 'sd.yml'}", f"--listen={sd}"])
    servers = {}
    try:
        for name, configs in (("honoring", honoring), ("overriding", overriding)):
            port = free_port()
            config = tmp_path / f"{name}.yml"
            config.write_text(yaml.safe_dump({"scrape_configs": through_http_sd(configs, f"http://{sd}")}))
            plane._spawn(f"prometheus-{name}", [str(prometheus_binary), f"--config.file={config}",
                                                f"--storage.tsdb.path={tmp_path / name}",
                                                f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
            servers[name] = f"http://127.0.0.1:{port}"
        webhook = {p["metadata"]["name"] for p in kubectl_json(plane, "-n", NAMESPACE, "get", "pods", "-l",
                                                             "app.kubernetes.io/name=cozyrender-webhook")["items"]}
        controller = {p["metadata"]["name"] for p in controller_pods(plane)}

        def targets(url: str):
            up = prometheus_query(url, "up")
            labels = {(s["metric"]["job"], s["metric"]["pod"]) for s in up if s["value"][1] == "1"}
            return up if labels == {*(("cozyrender-webhook", p) for p in webhook),
                                    *((f"{RELEASE}-controller", p) for p in controller)} else None

        for name, url in servers.items():
            up = wait_for(f"{name}: the 2 webhook and 2 controller pods up", lambda url=url: targets(url), 60)
            for series in up:  # the target labels prometheus-operator's relabelings give
                labels = series["metric"]
                assert labels["namespace"] == NAMESPACE and labels["service"] == labels["job"], labels
                assert labels["endpoint"] == ("https" if labels["job"] == RELEASE else "metrics"), labels
                assert labels["container"], labels

        def tenant_series(url: str) -> list[dict]:
            """The leader's budget series of the tenant, by either label that may carry it."""
            return [series for series in prometheus_query(url, 'cozyrender_tenant_budget{type="hard"}')
                    if tenant in (series["metric"].get("namespace"), series["metric"].get("exported_namespace"))]

        kept = wait_for("the tenant's budget series, honoring its labels",
                        lambda: tenant_series(servers["honoring"]), 60)
        assert {(s["metric"]["namespace"], s["metric"].get("exported_namespace")) for s in kept} == {(tenant, None)}
        assert {s["metric"]["job"] for s in kept} == {f"{RELEASE}-controller"}  # the target's: the series has none
        moved = wait_for("the same series, overriding honorLabels", lambda: tenant_series(servers["overriding"]), 60)
        assert {(s["metric"]["namespace"], s["metric"].get("exported_namespace")) for s in moved} == {(NAMESPACE, tenant)}
    finally:
        for name in ("prometheus-honoring", "prometheus-overriding", "k8s-sd"):
            plane.stop_process(name)
        plane.kubectl("delete", "clusterrolebinding,clusterrole", "prometheus", "--ignore-not-found", check=False)
        plane.kubectl("delete", "namespace", "monitoring", "--wait=false", check=False)
        plane.kubectl("-n", NAMESPACE, "delete", "configmap", f"{RELEASE}-ca", "--ignore-not-found", check=False)


def test_with_the_api_server_unreachable_the_controller_pods_are_not_ready(plane, api):
    node = plane.node
    forward = ["node-apiserver-forward", [
        sys.executable, str(ROOT / "tools" / "controlplane" / "balancer.py"),
        "--listen", f"{node.gateway}:{node.apiserver_port}", "--backend", f"127.0.0.1:{plane.ports['apiserver']}"]]
    wait_for("both controller pods Ready", lambda: all(map(ready, controller_pods(plane))))
    cut = time.monotonic()
    plane.stop_process("node-apiserver-forward")
    try:
        wait_for("every controller pod not Ready", lambda: controller_pods(plane) and not any(
            map(ready, controller_pods(plane))), 180)
        took = time.monotonic() - cut
        print(f"\ncontroller pods not Ready {took:.0f} s after the API server became unreachable "
              "(--ready-contact 30 s, readiness period 5 s)")
        assert took >= 30  # not before the stated bound
    finally:
        plane._spawn(*forward)
    wait_for("the controller pods Ready again", lambda: len(controller_pods(plane)) == 2
             and all(map(ready, controller_pods(plane))), 240)
