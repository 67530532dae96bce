"""charts/cozyrender-webhook rendered by real Helm (helm4 template) for each
TLS mode, validated offline against the Kubernetes 1.35 schemas, and read
for what the webhook's safety depends on: fail closed, the right kinds and
namespaces only, read-only RBAC except the ledger, the certificate for the
Service's DNS name. Its values schema and README table are generated
(`cozyrender chart docs --check`)."""

from __future__ import annotations

import base64
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


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


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
    errors = [f for f in validate_objects(objects) if f.error]
    assert errors == []
    unvalidated = {o["kind"] for o in objects} - {"Deployment", "Service", "PodDisruptionBudget", "ServiceAccount",
                                                  "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                                  "ConfigMap", "ValidatingWebhookConfiguration"}
    assert unvalidated <= {"Certificate", "Issuer"}  # cert-manager's kinds: no bundled schema


@pytest.mark.parametrize("mode", MODES)
def test_the_webhook_fails_closed_for_the_apps_kinds_in_tenant_namespaces(helm4: Path, mode: str) -> None:
    [configuration] = by_kind(render(helm4, *MODES[mode]), "ValidatingWebhookConfiguration")
    [hook] = configuration["webhooks"]
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "NoneOnDryRun"
    assert hook["timeoutSeconds"] <= 10 and hook["admissionReviewVersions"] == ["v1"]
    [rule] = hook["rules"]
    assert rule["apiGroups"] == ["apps.cozystack.io"] and rule["operations"] == ["CREATE", "UPDATE"]
    assert sorted(rule["resources"]) == ["kuberneteses", "kubernetesnodeses", "tenants", "vminstances"]
    assert [c["expression"] for c in hook["matchConditions"]] == [
        "request.namespace == 'tenant-root' || request.namespace.startsWith('tenant-')"]
    client = hook["clientConfig"]
    annotations = configuration["metadata"].get("annotations") or {}
    if mode == "cert-manager":
        assert client["service"] == {"name": "cozyrender-webhook", "namespace": NAMESPACE, "path": "/validate",
                                     "port": 443}
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/cozyrender-webhook-tls"
        assert "caBundle" not in client
    else:
        assert "cert-manager.io/inject-ca-from" not in annotations and client["caBundle"]
        assert ("url" in client) is (mode == "url")


def test_the_certificate_names_the_service(helm4: Path) -> None:
    objects = render(helm4)
    [service] = by_kind(objects, "Service")
    [deployment] = by_kind(objects, "Deployment")
    serving = [c for c in by_kind(objects, "Certificate") if not c["spec"].get("isCA")]
    assert [c["spec"]["dnsNames"][0] for c in serving] == [f"{service['metadata']['name']}.{NAMESPACE}.svc"]
    [volume] = deployment["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == serving[0]["spec"]["secretName"]
    assert render(helm4, *MODES["secret"])[0] is not None
    secret_mode = by_kind(render(helm4, *MODES["secret"]), "Deployment")[0]
    assert secret_mode["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == "my-tls"
    assert by_kind(render(helm4, *MODES["secret"]), "Certificate") == []


def test_a_missing_secret_name_is_refused(helm4: Path) -> None:
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), "--set", "tls.certManager=false"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "tls.secretName is required" in proc.stderr


def test_two_replicas_spread_and_a_disruption_budget(helm4: Path) -> None:
    objects = render(helm4)
    [deployment] = by_kind(objects, "Deployment")
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
    objects = render(helm4)
    rules = [(role["metadata"]["name"], rule) for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
             for rule in role["rules"]]
    writing = [(name, rule) for name, rule in rules if set(rule["verbs"]) - {"get", "list", "watch"}]
    assert writing == [("cozyrender-webhook-ledger", {"apiGroups": [""], "resources": ["configmaps"],
                                                      "resourceNames": ["cozyrender-reservations"],
                                                      "verbs": ["get", "update"]})]
    secrets = [rule for _, rule in rules if "secrets" in rule["resources"]]
    assert secrets == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["cozystack-values"],
                        "verbs": ["get", "list", "watch"]}]
    [ledger] = by_kind(objects, "ConfigMap")
    # The replicas own the ledger's data: the chart creates it empty, so `helm upgrade` never
    # conflicts with (or resets) their reservations.
    assert ledger["metadata"]["name"] == "cozyrender-reservations" and "data" not in ledger


def test_the_schema_refuses_a_timeout_above_ten(helm4: Path) -> None:
    proc = subprocess.run([str(helm4), "template", "x", str(CHART), "--set", "timeoutSeconds=30"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "timeoutSeconds" in proc.stderr


def test_chart_docs_are_current() -> None:
    from click.testing import CliRunner

    from cozyrender.commands.chartdocs import command

    result = CliRunner().invoke(command, ["docs", "--check", str(CHART)])
    assert result.exit_code == 0, result.output
