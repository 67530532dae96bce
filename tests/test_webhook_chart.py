"""charts/cozyrender-webhook rendered by real Helm (helm4 template) for each
TLS mode, validated offline against the Kubernetes 1.35 schemas, and read
for what the webhook's safety depends on: fail closed, the right kinds and
namespaces only, read-only RBAC except the ledger, the certificate for the
Service's DNS name. Its values schema and README table are generated
(`cozyrender chart docs --check`)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cozyrender.validate import validate_objects

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cozyrender-webhook"
NAMESPACE = "cozyrender-system"


def render(helm4: Path, *args: str) -> list[dict]:
    proc = subprocess.run([str(helm4), "template", "cozyrender-webhook", str(CHART), "-n", NAMESPACE, *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def webhook_deployment(objects: list[dict]) -> dict:
    """The webhook's Deployment (the controller has one of its own)."""
    [deployment] = [o for o in by_kind(objects, "Deployment") if o["metadata"]["name"] == "cozyrender-webhook"]
    return deployment


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    """The chart's objects of `kind`; the webhook configurations are those the
    replicas register from the `<release>-webhooks` ConfigMap."""
    if kind.endswith("WebhookConfiguration"):
        from cozyrender.webhook.registration import read_configurations

        sources = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-webhooks")]
        return [c for o in sources for c in read_configurations(o["data"]) if c["kind"] == kind]
    return [o for o in objects if o["kind"] == kind]


# The webhook's own objects: the controller's (its Deployment, RBAC, admission
# policy) are tested in tests/test_controller_chart.py.
WEBHOOK_ONLY = ("--set", "controller.enabled=false")
MODES = {
    "cert-manager": (),
    "secret": ("--set", "tls.certManager=false", "--set", "tls.secretName=my-tls",
               "--set", f"tls.caBundle={base64.b64encode(b'PEM').decode()}"),
    "url": ("--set", "clientConfig.url=https://127.0.0.1:9443/validate",
            "--set", f"clientConfig.caBundle={base64.b64encode(b'PEM').decode()}"),
}


@pytest.mark.parametrize("mode", MODES)
def test_every_object_is_valid_kubernetes(helm4: Path, mode: str) -> None:
    objects = render(helm4, *MODES[mode])
    errors = [f for f in validate_objects(objects + by_kind(objects, "ValidatingWebhookConfiguration")
                                          + by_kind(objects, "MutatingWebhookConfiguration")) if f.error]
    assert errors == []
    unvalidated = {o["kind"] for o in objects} - {"Deployment", "Service", "PodDisruptionBudget", "ServiceAccount",
                                                  "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                                  "ConfigMap", "ValidatingWebhookConfiguration",
                                                  "CiliumNetworkPolicy",
                                                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}  # (the bundled Cilium 1.18 schema)
    assert unvalidated <= {"Certificate", "Issuer"}  # cert-manager's kinds: no bundled schema


@pytest.mark.parametrize("mode", MODES)
def test_the_webhook_fails_closed_for_the_apps_kinds_in_tenant_namespaces(helm4: Path, mode: str) -> None:
    [configuration] = by_kind(render(helm4, *MODES[mode]), "ValidatingWebhookConfiguration")
    hooks = {hook["name"]: hook for hook in configuration["webhooks"]}
    assert sorted(hooks) == ["budgets.cozyrender.io", "pods.budgets.cozyrender.io",
                             "resourceclaims.budgets.cozyrender.io", "resourceclaimtemplates.budgets.cozyrender.io",
                             "vms.budgets.cozyrender.io"]
    for hook in hooks.values():  # the other doors (live: tests/test_webhook_doors_live.py) fail closed alike
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "NoneOnDryRun"
        assert hook["timeoutSeconds"] <= 10 and hook["admissionReviewVersions"] == ["v1"]
        assert hook["clientConfig"] == hooks["budgets.cozyrender.io"]["clientConfig"]
    hook = hooks["budgets.cozyrender.io"]
    [rule] = hook["rules"]
    assert rule["apiGroups"] == ["apps.cozystack.io"] and rule["operations"] == ["CREATE", "UPDATE"]
    assert sorted(rule["resources"]) == ["kuberneteses", "kubernetesnodeses", "tenants", "vminstances"]
    assert [c["expression"] for c in hook["matchConditions"]] == [
        "request.namespace == 'tenant-root' || request.namespace.startsWith('tenant-')",
        "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"]
    client = hook["clientConfig"]
    annotations = configuration["metadata"].get("annotations") or {}
    if mode == "cert-manager":
        assert client["service"] == {"name": "cozyrender-webhook", "namespace": NAMESPACE, "path": "/validate",
                                     "port": 443}
        # The replicas fill the caBundle from the issued Secret's ca.crt and are its one writer:
        # nothing asks cainjector to inject into it (tests/test_node_certmanager.py, live).
        assert "cert-manager.io/inject-ca-from" not in annotations
        assert "caBundle" not in client
    else:
        assert "cert-manager.io/inject-ca-from" not in annotations and client["caBundle"]
        assert ("url" in client) is (mode == "url")


def test_the_certificate_names_the_service(helm4: Path) -> None:
    objects = render(helm4, *WEBHOOK_ONLY)
    [service] = by_kind(objects, "Service")
    deployment = webhook_deployment(objects)
    serving = [c for c in by_kind(objects, "Certificate") if not c["spec"].get("isCA")]
    assert [c["spec"]["dnsNames"][0] for c in serving] == [f"{service['metadata']['name']}.{NAMESPACE}.svc"]
    [volume] = deployment["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == serving[0]["spec"]["secretName"]
    assert render(helm4, *MODES["secret"])[0] is not None
    secret_mode = by_kind(render(helm4, *MODES["secret"], *WEBHOOK_ONLY), "Deployment")[0]
    assert secret_mode["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == "my-tls"
    assert by_kind(render(helm4, *MODES["secret"]), "Certificate") == []


def test_a_missing_secret_name_is_refused(helm4: Path) -> None:
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), "--set", "tls.certManager=false"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "tls.secretName is required" in proc.stderr


def test_two_replicas_spread_and_a_disruption_budget(helm4: Path) -> None:
    objects = render(helm4, *WEBHOOK_ONLY)
    deployment = webhook_deployment(objects)
    spec = deployment["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == "cozyrender-webhook" and pod["securityContext"]["runAsNonRoot"] is True
    [budget] = by_kind(objects, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1 and budget["spec"]["selector"] == spec["selector"]


def test_rbac_reads_only_and_writes_the_ledger_alone(helm4: Path) -> None:
    objects = render(helm4, *WEBHOOK_ONLY)
    rules = [(role["metadata"]["name"], rule) for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
             for rule in role["rules"]]
    writing = [(name, rule) for name, rule in rules if set(rule["verbs"]) - {"get", "list", "watch"}]
    # The ledger's shards are named by pool root (created on demand): get, create, update of
    # ConfigMaps in the webhook's own namespace, nothing cluster-wide, no list, watch or delete.
    assert writing == [
        ("cozyrender-webhook-read", {"apiGroups": ["admissionregistration.k8s.io"],
                                     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
                                     "resourceNames": ["cozyrender-webhook"],
                                     "verbs": ["get", "create", "patch", "delete"]}),
        ("cozyrender-webhook-ledger", {"apiGroups": [""], "resources": ["configmaps"],
                                       "verbs": ["get", "create", "update"]})]
    [ledger_role] = [role for role in by_kind(objects, "Role") if role["metadata"]["name"] == "cozyrender-webhook-ledger"]
    assert ledger_role["metadata"]["namespace"] == NAMESPACE
    secrets = [rule for _, rule in rules if "secrets" in rule["resources"]]
    assert secrets == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["cozystack-values"],
                        "verbs": ["get", "list", "watch"]}]
    # No static ledger object: shards are created on first use (the ConfigMaps hold the webhook
    # configurations the replicas register, and the Grafana dashboard).
    assert [c["metadata"]["name"] for c in by_kind(objects, "ConfigMap")] == ["cozyrender-webhook-dashboard",
                                                                              "cozyrender-webhook-webhooks"]
    deployment = webhook_deployment(objects)
    assert "--ledger=cozyrender-ledger" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_schema_refuses_a_timeout_above_ten(helm4: Path) -> None:
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), "--set", "timeoutSeconds=30"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "timeoutSeconds" in proc.stderr


def test_chart_docs_are_current() -> None:
    from click.testing import CliRunner

    from cozyrender.commands.chartdocs import command

    result = CliRunner().invoke(command, ["docs", "--check", str(CHART)])
    assert result.exit_code == 0, result.output


# -- only the API server may ask (issue 28 item 4) ------------------------------

def policies(objects: list[dict], kind: str) -> dict[str, dict]:
    """The chart's policies of `kind` by the pods they select (the webhook's, the controller's)."""
    found = by_kind(objects, kind)
    selector = "endpointSelector" if kind == "CiliumNetworkPolicy" else "podSelector"
    return {p["spec"][selector]["matchLabels"]["app.kubernetes.io/name"]: p for p in found}


def test_the_default_policy_admits_only_the_api_servers(helm4: Path) -> None:
    """kube-apiserver (Cilium's entity) and Cozystack's aggregated server cozystack-api (by its
    namespace and pod label, as Cozystack's chart labels it), which calls the webhook for every apps
    write (issue 33 item 1); no one else."""
    objects = render(helm4)
    found = policies(objects, "CiliumNetworkPolicy")
    assert sorted(found) == ["cozyrender-controller", "cozyrender-webhook"]
    assert [f for f in validate_objects(list(found.values())) if f.error] == []
    rule, caller = found["cozyrender-webhook"]["spec"]["ingress"]
    assert rule["fromEntities"] == ["kube-apiserver"]
    assert rule["toPorts"] == [{"ports": [{"port": "8443", "protocol": "TCP"}]}]
    assert caller == {"fromEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "cozy-system",
                                                         "app": "cozystack-api"}}],
                      "toPorts": [{"ports": [{"port": "8443", "protocol": "TCP"}]}]}
    only_api_server = policies(render(helm4, "--set-json", "networkPolicy.callers=[]"), "CiliumNetworkPolicy")
    assert [r.get("fromEntities") for r in only_api_server["cozyrender-webhook"]["spec"]["ingress"]] == [["kube-apiserver"]]
    # Nothing calls the controller: Cilium's one empty rule denies every ingress.
    assert found["cozyrender-controller"]["spec"]["ingress"] == [{}]
    assert not by_kind(objects, "NetworkPolicy")
    assert "cozyrender-controller" not in policies(render(helm4, "--set", "controller.enabled=false"),
                                                   "CiliumNetworkPolicy")


def test_a_plain_network_policy_needs_the_api_servers_addresses(helm4: Path) -> None:
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), "--set", "networkPolicy.type=kubernetes"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "networkPolicy.apiServerCIDRs is required" in proc.stderr
    objects = render(helm4, "--set", "networkPolicy.type=kubernetes", "--set", "networkPolicy.apiServerCIDRs={10.0.0.10/32}")
    found = policies(objects, "NetworkPolicy")
    assert [f for f in validate_objects(list(found.values())) if f.error] == []
    assert found["cozyrender-webhook"]["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}]
    assert found["cozyrender-webhook"]["spec"]["ingress"][1] == {  # the default caller, cozystack-api
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "cozy-system"}},
                  "podSelector": {"matchLabels": {"app": "cozystack-api"}}}],
        "ports": [{"port": 8443, "protocol": "TCP"}]}
    # The controller's pods: every ingress denied (the API server's addresses are not let in).
    assert found["cozyrender-controller"]["spec"]["policyTypes"] == ["Ingress"]
    assert found["cozyrender-controller"]["spec"]["ingress"] == []
    assert not by_kind(render(helm4, "--set", "networkPolicy.type=none"), "CiliumNetworkPolicy")


@pytest.mark.parametrize("kind", ["kubernetes", "cilium"])
def test_extra_ingress_reaches_both_policies(helm4: Path, kind: str) -> None:
    rule = {"from": [{"podSelector": {"matchLabels": {"app": "prometheus"}}}], "ports": [{"port": 8080}]}
    if kind == "cilium":
        rule = {"fromEndpoints": [{"matchLabels": {"app": "prometheus"}}], "toPorts": [{"ports": [{"port": "8080"}]}]}
    objects = render(helm4, "--set", f"networkPolicy.type={kind}", "--set", "networkPolicy.apiServerCIDRs={10.0.0.10/32}",
                     "--set-json", f"networkPolicy.extraIngress=[{json.dumps(rule)}]")
    found = policies(objects, "NetworkPolicy" if kind == "kubernetes" else "CiliumNetworkPolicy")
    assert [f for f in validate_objects(list(found.values())) if f.error] == []
    assert found["cozyrender-webhook"]["spec"]["ingress"][-1] == rule
    assert found["cozyrender-controller"]["spec"]["ingress"] == [rule]


def test_the_client_ca_is_mounted_and_required_when_given(helm4: Path) -> None:
    deployment = webhook_deployment(render(helm4))
    assert not any(arg.startswith("--client-ca") for arg in deployment["spec"]["template"]["spec"]["containers"][0]["args"])
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    objects = render(helm4, "--set", f"clientAuth.caBundle={base64.b64encode(pem.encode()).decode()}")
    deployment = webhook_deployment(objects)
    pod = deployment["spec"]["template"]["spec"]
    assert "--client-ca=/client-ca/ca.crt" in pod["containers"][0]["args"]
    assert {"name": "client-ca", "mountPath": "/client-ca", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    [configmap] = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-client-ca")]
    assert configmap["data"] == {"ca.crt": pem}
    assert {"name": "client-ca", "configMap": {"name": configmap["metadata"]["name"]}} in pod["volumes"]


@pytest.mark.parametrize("mode", MODES)
def test_the_chart_creates_no_webhook_configuration_itself(helm4: Path, mode: str) -> None:
    """Issue 29 item 1: Helm never creates a configuration that fails closed; the
    replicas register what the ConfigMap holds, once ready, from the args the
    Deployment passes (the ConfigMap and the ClusterRole that owns what they register)."""
    for injection in ("false", "true"):
        objects = render(helm4, *MODES[mode], "--set", f"fluxInjection={injection}")
        assert not [o for o in objects if o["kind"].endswith("WebhookConfiguration")]
        registered = by_kind(objects, "ValidatingWebhookConfiguration") + by_kind(objects, "MutatingWebhookConfiguration")
        assert [c["kind"] for c in registered] == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
        assert [hook["name"] for hook in registered[1]["webhooks"]] == ["licenses.cozyrender.io"] + (
            ["postrenderers.cozyrender.io"] if injection == "true" else [])
        deployment = webhook_deployment(objects)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--register=cozyrender-webhook-webhooks" in args and "--register-owner=cozyrender-webhook-read" in args
        assert {r["metadata"]["name"] for r in by_kind(objects, "ClusterRole")} >= {"cozyrender-webhook-read"}
        assert ("--flux-injection" in args) is (injection == "true")


def test_offline_rendering_checks_no_prerequisite(helm4: Path) -> None:
    """`helm template` has no cluster: cert-manager, Flux, Cozystack's API and tenant-root
    are checked only on a live install (tests/test_webhook_install.py)."""
    assert render(helm4, "--set", "fluxInjection=true")


SCRAPES = ("--set", "monitoring.vmServiceScrape=true", "--set", "monitoring.serviceMonitor=true")


@pytest.mark.parametrize("mode", ["cert-manager", "secret"])
def test_the_scrape_objects_validate_against_their_crds_and_scrape_over_the_charts_tls(helm4: Path, mode: str) -> None:
    """Issue 29 item 4: a VMServiceScrape and a ServiceMonitor (each optional), valid
    against the operators' CRD schemas bundled in cozyrender/schemas (strict: an unknown
    field is refused), selecting the chart's Service and its https port, verifying the
    certificate the chart issues or is given, for the name that certificate carries."""
    objects = render(helm4, *MODES[mode], *SCRAPES)
    scrapes = by_kind(objects, "VMServiceScrape") + by_kind(objects, "ServiceMonitor")
    assert [o["apiVersion"] for o in scrapes] == ["operator.victoriametrics.com/v1beta1", "monitoring.coreos.com/v1"]
    assert validate_objects(scrapes) == []  # no finding at all: validated (a kind without a schema says so) and clean
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    service, controller = services["cozyrender-webhook"], services["cozyrender-webhook-controller"]
    deployment = webhook_deployment(objects)
    secret = deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
    for scrape in scrapes:
        spec = scrape["spec"]
        # Both Services are selected; each endpoint scrapes the port of its name: the
        # webhook's https, the controller's plain-HTTP metrics (the billing metrics).
        for selected in (service, controller):
            assert spec["selector"]["matchLabels"].items() <= selected["metadata"]["labels"].items()
        assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        endpoint, billing = spec["endpoints"]
        assert billing == {"port": "metrics", "scheme": "http", "path": "/metrics", "honorLabels": True,
                           "interval": "30s"}
        assert [p["name"] for p in controller["spec"]["ports"]] == ["metrics"]
        assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]] and endpoint["scheme"] == "https"
        assert endpoint["path"] == "/metrics"
        tls = endpoint["tlsConfig"]
        assert tls["serverName"] == f"{service['metadata']['name']}.{NAMESPACE}.svc"
        assert "insecureSkipVerify" not in tls
        if mode == "cert-manager":
            [serving] = [c for c in by_kind(objects, "Certificate") if not c["spec"].get("isCA")]
            assert serving["spec"]["dnsNames"][0] == tls["serverName"] and serving["spec"]["secretName"] == secret
            assert tls["ca"] == {"secret": {"name": secret, "key": "ca.crt"}}
        else:
            [ca] = [c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"] == tls["ca"]["configMap"]["name"]]
            assert ca["data"]["ca.crt"] == "PEM"  # tls.caBundle, decoded
    broken = [dict(scrapes[0], spec={**scrapes[0]["spec"], "endpoints": [{"port": "https", "tlsConfg": {}}]}),
              dict(scrapes[1], spec={**scrapes[1]["spec"], "selector": "app"})]
    assert all(r.error for r in validate_objects(broken))


def test_no_scrape_object_by_default_and_none_for_a_url(helm4: Path) -> None:
    assert not [o for o in render(helm4) if o["kind"] in ("VMServiceScrape", "ServiceMonitor")]
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), *MODES["url"], *SCRAPES],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "cannot be used with clientConfig.url" in proc.stderr
