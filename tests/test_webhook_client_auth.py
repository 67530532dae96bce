"""Only the API server may ask (issue 28 item 4): with `--client-ca`, the
webhook's server answers an AdmissionReview only from a client presenting a
certificate that CA signed. A client with no certificate gets 401 before its
body is read (no route runs, so no ledger entry can be written); one with a
certificate from another CA fails the handshake; probes and metrics stay
open. (Live, through kube-apiserver's AdmissionConfiguration:
test_webhook_hostile.py, attack 4.)"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from pathlib import Path

import pytest
from test_budgets_builders import tenant
from test_webhook_admission import A100, review
from webhook_certs import make_certs, make_client_ca

from cozyrender.webhook.metrics import Metrics
from cozyrender.webhook.server import serve, tls_context


@pytest.fixture
def guarded(tmp_path: Path):
    files = make_certs(tmp_path)
    apiserver, stranger = make_client_ca(tmp_path, "apiserver"), make_client_ca(tmp_path, "stranger")
    called = []
    metrics = Metrics()

    def route(body):
        called.append(body)
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": body["request"]["uid"], "allowed": True}}

    server = serve(("127.0.0.1", 0), tls_context(str(files["cert"]), str(files["key"]), str(apiserver["ca"])),
                   {"/validate": route}, lambda: True, metrics)
    thread = server.serve_in_thread()

    def connect(client: dict | None) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(files["ca"]))
        if client is not None:
            context.load_cert_chain(str(client["cert"]), str(client["key"]))
        return http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)

    yield {"connect": connect, "apiserver": apiserver, "stranger": stranger, "called": called, "metrics": metrics}
    server.shutdown()
    server.server_close()
    thread.join(5)


def _post(conn: http.client.HTTPSConnection) -> tuple[int, bytes]:
    conn.request("POST", "/validate", json.dumps(review(tenant("big", quotas={A100: 60}))).encode(),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def test_the_api_servers_certificate_is_answered(guarded) -> None:
    status, body = _post(guarded["connect"](guarded["apiserver"]))
    assert status == 200 and json.loads(body)["response"]["allowed"] is True
    assert len(guarded["called"]) == 1


def test_a_caller_without_a_certificate_is_refused_unheard(guarded) -> None:
    status, body = _post(guarded["connect"](None))
    assert status == 401 and b"client certificate" in body
    assert guarded["called"] == []
    assert guarded["metrics"].unauthenticated._value.get() == 1


def test_a_certificate_from_another_ca_fails_the_handshake(guarded) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        _post(guarded["connect"](guarded["stranger"]))
    assert guarded["called"] == []


def test_probes_and_metrics_stay_open(guarded) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        conn = guarded["connect"](None)
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, path
