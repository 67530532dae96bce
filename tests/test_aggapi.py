"""cozystack-apps-apiserver (tools/aggapi), the stand-in for cozystack-api, run as a process on
loopback against the test control plane (no node: it cannot be registered by an APIService here,
whose endpoints may not be loopback addresses, so it is asked directly, with the admin's client
certificate, which it authenticates with the cluster's client CA read from kube-apiserver's
`extension-apiserver-authentication` ConfigMap and authorizes by SubjectAccessReview).
tests/node_aggapi_checks.py (run on tests/test_node_netpol.py's plane) runs it as a pod behind the APIService, with the webhook.

- it serves the four kinds, namespaced, with Cozystack's plurals;
- a spec is stored as written (unknown fields kept, nothing defaulted) in etcd under its own
  prefix, read back and listed, by field selector too;
- a spec against the kind's schema (cozyrender.appspec's) is refused, 422, naming the field;
  an object in a namespace that does not exist is refused by NamespaceLifecycle;
- its OpenAPI v3 document names the kinds with their served group, version and kind only;
- a bad flag is one line and exit 2;
- the admission configuration the node gives it presents the caller certificate, or none.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / ".cache" / "bin" / "cozystack-apps-apiserver"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))

import aggapi  # noqa: E402

APPS = "apps.cozystack.io/v1alpha1"
NAMESPACE = "cozy-system"


class Server:
    def __init__(self, plane, url: str) -> None:
        self.url = url
        self.context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
        self.context.load_cert_chain(*(str(p) for p in plane.admin_cert))

    def ready(self) -> bool:
        """/readyz, and the caller's certificate recognised: /readyz is open to anyone (always
        allowed), while the client CA of delegated authentication is loaded from kube-apiserver's
        `extension-apiserver-authentication` ConfigMap a moment later (before it, the admin is
        anonymous and gets 403: the test run at 18:40 saw it)."""
        with urllib.request.urlopen(self.url + "/readyz", context=self.context, timeout=5) as response:
            if response.status != 200:
                return False
        return self.request("GET", "/apis")[0] == 200

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        request = urllib.request.Request(self.url + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")


@pytest.fixture(scope="module")
def server(apiserver, tmp_path_factory):
    from common import free_port

    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: run `make aggapi`")
    work = tmp_path_factory.mktemp("aggapi")
    schemas = work / "schemas"
    schemas.mkdir()
    for name, text in aggapi.spec_schemas().items():
        (schemas / name).write_text(text)
    cert, key = apiserver.ca.issue("aggapi-local", "localhost", server_names=("127.0.0.1", "localhost"))
    config = work / "admission.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                                      "plugins": []}))
    port = free_port()
    log = open(work / "aggapi.log", "wb")
    process = subprocess.Popen([
        str(BINARY), "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
        f"--etcd-servers=http://127.0.0.1:{apiserver.ports['etcd']}", f"--etcd-prefix={aggapi.ETCD_PREFIX}-local",
        f"--kubeconfig={apiserver.kubeconfig}", f"--authentication-kubeconfig={apiserver.kubeconfig}",
        f"--authorization-kubeconfig={apiserver.kubeconfig}", f"--admission-control-config-file={config}",
        f"--app-schemas={schemas}", "--enable-priority-and-fairness=false",
    ], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    server = Server(apiserver, f"https://127.0.0.1:{port}")
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, (work / "aggapi.log").read_text()[-3000:]
        try:
            if server.ready():
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "not ready after 90 s: " + (work / "aggapi.log").read_text()[-3000:]
        time.sleep(0.5)
    yield server
    process.terminate()
    process.wait(timeout=30)


def path(plural: str, name: str | None = None, namespace: str = NAMESPACE) -> str:
    base = f"/apis/{APPS}/namespaces/{namespace}/{plural}"
    return base if name is None else f"{base}/{name}"


def test_it_serves_the_four_kinds_namespaced_with_cozystacks_plurals(server):
    status, body = server.request("GET", f"/apis/{APPS}")
    assert status == 200, body
    assert sorted((r["name"], r["kind"], r["namespaced"]) for r in body["resources"]) == [
        ("kuberneteses", "Kubernetes", True), ("kubernetesnodeses", "KubernetesNodes", True),
        ("tenants", "Tenant", True), ("vminstances", "VMInstance", True)]


def test_a_spec_is_stored_as_written_under_its_own_etcd_prefix(server, apiserver):
    from node_aggapi_checks import etcd_keys

    spec = {"gpus": [{"class": "a100", "count": 2}], "notInTheSchema": {"kept": [1, "two"]}}
    status, body = server.request("POST", path("vminstances"), {
        "apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": "kept"}, "spec": spec})
    assert status == 201, body
    assert body["kind"] == "VMInstance" and body["spec"] == spec
    status, body = server.request("GET", path("vminstances", "kept"))
    assert status == 200 and body["spec"] == spec and body["apiVersion"] == APPS
    status, body = server.request("GET", f"/apis/{APPS}/vminstances?fieldSelector=metadata.name%3Dkept")
    assert status == 200 and [item["metadata"]["name"] for item in body["items"]] == ["kept"]
    assert f"{aggapi.ETCD_PREFIX}-local/apps.cozystack.io/vminstances/{NAMESPACE}/kept" in \
        etcd_keys(apiserver, f"{aggapi.ETCD_PREFIX}-local/")


@pytest.mark.parametrize(("plural", "kind", "spec", "field", "words"), [
    ("vminstances", "VMInstance", {"gpus": "a100"}, "spec.gpus", "must be of type array"),
    ("tenants", "Tenant", {"resourceQuotas": []}, "spec.resourceQuotas", "must be of type object"),
    ("kuberneteses", "Kubernetes", {"nodeGroups": {"md0": {"minReplicas": 1}}}, "spec.nodeGroups.md0.diskSize",
     "Required value"),
])
def test_a_spec_against_its_kinds_schema_is_refused_naming_the_field(server, plural, kind, spec, field, words):
    status, body = server.request("POST", path(plural), {"apiVersion": APPS, "kind": kind,
                                                         "metadata": {"name": "bad"}, "spec": spec})
    assert status == 422, body
    assert field in [cause["field"] for cause in body["details"]["causes"]], body
    assert words in body["message"]
    assert server.request("GET", path(plural, "bad"))[0] == 404


def test_a_write_into_a_namespace_that_does_not_exist_is_refused_by_namespace_lifecycle(server):
    status, body = server.request("POST", path("tenants", namespace="no-such-namespace"), {
        "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": "t"}, "spec": {}})
    assert status == 404 and body["reason"] == "NotFound" and "no-such-namespace" in body["message"], body


def test_its_openapi_names_the_kinds_with_their_served_version_only(server):
    status, body = server.request("GET", f"/openapi/v3/apis/{APPS.replace('/v1alpha1', '')}/v1alpha1")
    assert status == 200, body
    schema = body["components"]["schemas"]["io.cozystack.apps.v1alpha1.VMInstance"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "VMInstance"}]
    assert schema["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True


def test_a_bad_flag_is_one_line_and_exit_2():
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: run `make aggapi`")
    proc = subprocess.run([str(BINARY), "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "cozystack-apps-apiserver: error: unknown flag: --no-such-flag"


def test_its_admission_configuration_presents_the_callers_certificate_or_none(tmp_path):
    from pki import CA

    class Plane:
        aggapi_caller_cert = CA(tmp_path).issue("caller", "cozystack-api", client=True)

    with_cert = aggapi.admission_files(Plane, client_certificate=True)
    kubeconfig = yaml.safe_load(with_cert["kubeconfig"])
    assert kubeconfig["users"] == [{"name": "*", "user": {
        "client-certificate": f"{aggapi.MOUNT}/admission/tls.crt", "client-key": f"{aggapi.MOUNT}/admission/tls.key"}}]
    assert with_cert["tls.crt"] == Plane.aggapi_caller_cert[0].read_text()
    config = yaml.safe_load(with_cert["admission-config.yaml"])
    assert {p["name"]: p["configuration"]["kubeConfigFile"] for p in config["plugins"]} == {
        "ValidatingAdmissionWebhook": f"{aggapi.MOUNT}/admission/kubeconfig",
        "MutatingAdmissionWebhook": f"{aggapi.MOUNT}/admission/kubeconfig"}
    without = aggapi.admission_files(Plane, client_certificate=False)
    assert yaml.safe_load(without["kubeconfig"])["users"] == [] and "tls.crt" not in without
