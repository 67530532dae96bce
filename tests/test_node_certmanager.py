"""The webhook chart in its default mode, `tls.certManager: true`, on the real node
(tools/controlplane/node.py) with cert-manager v1.21 running there as pods from the images
built here (`make certmanager`, tools/controlplane/certmanager.py):

- cert-manager's controller and cainjector run from those images, as pods of the node;
- `helm install --wait` in the chart's default mode: the chart's prerequisites check finds
  cert-manager's API, the self-signed Issuer, the CA and the serving Certificate become Ready,
  the Secret is issued, and the webhook pods turn Ready serving it;
- the ValidatingWebhookConfiguration the replicas register carries a caBundle that verifies the
  certificate the pods serve, for the Service's name, and only the replicas write that field
  (cainjector does not fight them over it);
- through the deployed webhook an over-budget VMInstance is refused and an in-budget one admitted;
- a new CA and serving certificate issued by cert-manager are served and registered by the same
  pods, without a restart, and writes go on being checked.

Traffic goes only to loopback and to the pod addresses of the bridge the run created.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubeapi import apps_path
from test_webhook_live import A100, make_tenant, stored, vm_body

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402
from test_node_cluster import api, kubectl_json, wait_for  # noqa: E402,F401 - the node tests' fixture and helpers

GPU = "nvidia.com/GA100"
NAMESPACE = "cozyrender-system"
RELEASE = "cozyrender-webhook"
SERVICE = f"{RELEASE}.{NAMESPACE}.svc"


# Own plane (issue 36): the machine has one node; test_node_cluster installs the same release.
@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    import certmanager
    from cluster import ControlPlane

    # No webhook yet: the test installs the chart itself, after cert-manager.
    plane = ControlPlane(tmp_path_factory.mktemp("node-certmanager"), BIN, webhook_replicas=0, node=True)
    plane.start()
    try:
        certmanager.install(plane)
        plane.node.install_webhook_chart(2, cert_manager=True)
        yield plane
    finally:
        try:
            plane.node.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "2m")
        except Exception as err:  # noqa: BLE001 - the plane goes anyway
            print(f"helm uninstall: {err}", file=sys.stderr)
        try:
            certmanager.uninstall(plane)
        except Exception as err:  # noqa: BLE001
            print(f"cert-manager uninstall: {err}", file=sys.stderr)
        plane.stop()


def ready(obj: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def pods(plane, namespace: str, name: str) -> list[dict]:
    items = kubectl_json(plane, "-n", namespace, "get", "pods", "-l", f"app.kubernetes.io/name={name}")["items"]
    return [pod for pod in items if not pod["metadata"].get("deletionTimestamp")]


def serving_secret(plane) -> dict[str, bytes]:
    secret = kubectl_json(plane, "-n", NAMESPACE, "get", "secret", f"{RELEASE}-tls")
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def served_certificate(address: str, ca_pem: bytes) -> bytes:
    """The certificate a pod serves, fetched with a TLS handshake that verifies it against
    `ca_pem` for the Service's name, as kube-apiserver does (SNI and check; nothing resolved)."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with socket.create_connection((address, 8443), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=SERVICE) as tls:
            return tls.getpeercert(binary_form=True)


def cache_objects(address: str, ca_pem: bytes, kind: str) -> float:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = False  # addressed by pod IP; the chain is still checked
    import urllib.request

    text = urllib.request.urlopen(f"https://{address}:8443/metrics", context=context, timeout=10).read().decode()
    needle = f'cozyrender_webhook_cache_objects{{kind="{kind}"'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(needle))


# -- cert-manager from the images built here --------------------------------------------


def test_cert_manager_runs_as_pods_from_the_images_built_here(plane):
    for component in ("controller", "cainjector"):
        (pod,) = pods(plane, "cert-manager", f"cert-manager-{component}")
        assert ready(pod), pod["status"]
        assert pod["spec"]["nodeName"] == "cozyrender-node"
        (container,) = pod["spec"]["containers"]
        assert container["image"] == build.cert_manager_reference(component) == \
            f"cozyrender.local/cert-manager-{component}:v1.21.2"
        assert container["imagePullPolicy"] == "Never"
        # Its in-cluster client goes to the API server's forward on the bridge, nowhere else.
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["KUBERNETES_SERVICE_HOST"] == plane.node.gateway
        status = pod["status"]["containerStatuses"][0]
        assert status["restartCount"] == 0, status


# -- the chart's cert-manager mode -----------------------------------------------------


def test_the_certificates_are_ready_and_the_serving_secret_issued_by_the_charts_ca(plane):
    for name in (f"{RELEASE}-ca", f"{RELEASE}-tls"):
        certificate = kubectl_json(plane, "-n", NAMESPACE, "get", "certificate", name)
        assert ready(certificate), certificate.get("status")
    for name in (f"{RELEASE}-selfsigned", f"{RELEASE}-ca"):
        assert ready(kubectl_json(plane, "-n", NAMESPACE, "get", "issuer", name))
    secret = serving_secret(plane)
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(secret)
    leaf = x509.load_pem_x509_certificate(secret["tls.crt"])
    ca = x509.load_pem_x509_certificate(secret["ca.crt"])
    ca_secret = {k: base64.b64decode(v) for k, v in
                 kubectl_json(plane, "-n", NAMESPACE, "get", "secret", f"{RELEASE}-ca")["data"].items()}
    assert x509.load_pem_x509_certificate(ca_secret["tls.crt"]) == ca  # the chart's CA, not the cluster's
    assert ca.subject.rfc4514_string() == f"CN={RELEASE}-ca"
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert SERVICE in names


def test_the_webhook_pods_are_ready_serving_the_issued_certificate(plane):
    release = json.loads(plane.node.helm("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert release["info"]["status"] == "deployed"
    assert release["config"]["tls"] == {"certManager": True}  # the default mode, no Secret of ours
    webhook = pods(plane, NAMESPACE, "cozyrender-webhook")
    assert len(webhook) == 2 and all(map(ready, webhook))
    secret = serving_secret(plane)
    leaf_der = x509.load_pem_x509_certificate(secret["tls.crt"]).public_bytes(Encoding.DER)
    for pod in webhook:
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["secretName"] == f"{RELEASE}-tls"
        assert served_certificate(pod["status"]["podIP"], secret["ca.crt"]) == leaf_der


def test_the_registered_configuration_carries_a_ca_that_verifies_the_served_certificate(plane):
    def registered():
        result = plane.kubectl("get", "validatingwebhookconfiguration", RELEASE, "-o", "json",
                               "--show-managed-fields", check=False)
        if result.returncode:
            return None
        obj = json.loads(result.stdout)
        return obj if obj["webhooks"][0]["clientConfig"].get("caBundle") else None

    configuration = wait_for("the replicas registered the configuration with a caBundle", registered)
    hook = configuration["webhooks"][0]
    ca_bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
    for each in configuration["webhooks"]:  # the budgets and the other doors to a GPU: one server, one CA
        assert each["clientConfig"]["caBundle"] == hook["clientConfig"]["caBundle"]
        assert each["clientConfig"]["service"] == {"name": RELEASE, "namespace": NAMESPACE, "path": "/validate",
                                                   "port": 443}
    assert ca_bundle == serving_secret(plane)["ca.crt"]
    for pod in pods(plane, NAMESPACE, "cozyrender-webhook"):
        served_certificate(pod["status"]["podIP"], ca_bundle)  # raises ssl.SSLCertVerificationError otherwise
    # One writer of the caBundle: the replicas (field manager cozyrender-webhook). Nothing asks
    # cainjector to inject into it, so the two never overwrite each other.
    assert "cert-manager.io/inject-ca-from" not in configuration["metadata"].get("annotations", {})
    writers = sorted({entry["manager"] for entry in configuration["metadata"]["managedFields"]
                      if "f:caBundle" in json.dumps(entry.get("fieldsV1", {}))})
    assert writers == ["cozyrender-webhook"], writers
    # ... though cainjector runs and watches webhook configurations (its ClusterRole lets it).
    (cainjector,) = pods(plane, "cert-manager", "cert-manager-cainjector")
    assert ready(cainjector)
    logs = plane.kubectl("-n", "cert-manager", "logs", cainjector["metadata"]["name"]).stdout
    assert "validatingwebhookconfiguration" in logs


def test_budgets_are_enforced_through_the_webhook_cert_manager_secured(plane, api):
    namespace = make_tenant(api, "cm", {A100: 2})
    ca_pem = serving_secret(plane)["ca.crt"]
    tenants = len(kubectl_json(plane, "get", "tenants.apps.cozystack.io", "-A")["items"])
    wait_for("both webhook pods' caches hold the tenant", lambda: all(
        cache_objects(pod["status"]["podIP"], ca_pem, "Tenant") >= tenants
        for pod in pods(plane, NAMESPACE, "cozyrender-webhook")), 60)
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "big", 3))
    assert status == 403, body
    assert "exceeded GPU budget 'a100.gpuclass.cozystack.io/devices'" in body["message"]
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "fits", 2))
    assert status == 201, body
    assert [vm["metadata"]["name"] for vm in stored(api, namespace)] == ["fits"]


def test_a_renewed_ca_is_followed_without_restarting_the_pods(plane, api):
    """cert-manager issues a new CA and, from it, a new serving certificate (both Secrets
    deleted, as a renewal past the CA's lifetime or a compromised key would have it): the
    replicas serve the new certificate and register the new CA, with no restart and no second
    writer of the caBundle; writes keep being checked through the webhook."""
    webhook = {p["metadata"]["name"]: p for p in pods(plane, NAMESPACE, "cozyrender-webhook")}
    old_ca = serving_secret(plane)["ca.crt"]

    def issued(name: str) -> dict[str, bytes] | None:
        result = plane.kubectl("-n", NAMESPACE, "get", "secret", name, "-o", "json", check=False)
        if result.returncode:
            return None
        return {k: base64.b64decode(v) for k, v in json.loads(result.stdout).get("data", {}).items()}

    plane.kubectl("-n", NAMESPACE, "delete", "secret", f"{RELEASE}-ca")
    new_ca = wait_for("cert-manager issued a new CA", lambda: (
        (s := issued(f"{RELEASE}-ca")) and s.get("tls.crt") and s["tls.crt"] != old_ca and s["tls.crt"]))
    plane.kubectl("-n", NAMESPACE, "delete", "secret", f"{RELEASE}-tls")
    secret = wait_for("cert-manager issued the serving certificate from the new CA", lambda: (
        (s := issued(f"{RELEASE}-tls")) and s.get("ca.crt") == new_ca and s))
    x509.load_pem_x509_certificate(secret["tls.crt"]).verify_directly_issued_by(
        x509.load_pem_x509_certificate(new_ca))

    def registered_ca() -> bytes:
        configuration = kubectl_json(plane, "get", "validatingwebhookconfiguration", RELEASE)
        return base64.b64decode(configuration["webhooks"][0]["clientConfig"]["caBundle"])

    wait_for("the replicas registered the new CA", lambda: registered_ca() == new_ca, 180)
    leaf_der = x509.load_pem_x509_certificate(secret["tls.crt"]).public_bytes(Encoding.DER)

    def serving_new() -> bool:
        try:
            return all(served_certificate(p["status"]["podIP"], new_ca) == leaf_der for p in webhook.values())
        except ssl.SSLError:
            return False

    wait_for("both pods serve the renewed certificate", serving_new, 180)
    now = {p["metadata"]["name"]: p for p in pods(plane, NAMESPACE, "cozyrender-webhook")}
    assert now.keys() == webhook.keys()  # the same pods
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0 for p in now.values())
    configuration = kubectl_json(plane, "get", "validatingwebhookconfiguration", RELEASE, "--show-managed-fields")
    writers = sorted({entry["manager"] for entry in configuration["metadata"]["managedFields"]
                      if "f:caBundle" in json.dumps(entry.get("fieldsV1", {}))})
    assert writers == ["cozyrender-webhook"], writers
    # The API server verifies the renewed certificate with the registered CA: the webhook answers.
    namespace = make_tenant(api, "cmrenew", {A100: 1})
    tenants = len(kubectl_json(plane, "get", "tenants.apps.cozystack.io", "-A")["items"])
    wait_for("both webhook pods' caches hold the tenant", lambda: all(
        cache_objects(p["status"]["podIP"], new_ca, "Tenant") >= tenants for p in now.values()), 60)
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "big", 2))
    assert status == 403 and "exceeded GPU budget" in body["message"], body
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "fits", 1))
    assert status == 201, body
