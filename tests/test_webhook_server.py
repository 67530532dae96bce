"""The webhook's HTTPS server (cozyrender.webhook.server) over real TLS:
AdmissionReview JSON posted as the API server posts it, concurrent
keep-alive connections, readiness, metrics, and every way a request can be
bad answered with a refusal (fail closed)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_budgets_builders import classes, tenant, vm
from test_webhook_admission import A100, review
from webhook_certs import make_certs

from cozyrender.budgets import check_write, index_state
from cozyrender.webhook import admission
from cozyrender.webhook.metrics import Metrics
from cozyrender.webhook.server import MAX_BODY, serve, tls_context

STATE = classes("a100") + [tenant("acme", quotas={A100: 4}), vm("tenant-acme", "vm1", [{"class": "a100", "count": 2}])]


class Running:
    def __init__(self, tmp_path: Path, route=None) -> None:
        self.files = make_certs(tmp_path)
        self.state = index_state(STATE)
        self.is_ready = threading.Event()
        self.is_ready.set()
        self.metrics = Metrics()
        routes = {"/validate": route or (lambda body: admission.admit(self.state, body))}
        self.server = serve(("127.0.0.1", 0), tls_context(str(self.files["cert"]), str(self.files["key"])), routes,
                            self.is_ready.is_set, self.metrics, lambda: "still listing vminstances")
        self.thread = self.server.serve_in_thread()
        self.client_tls = ssl.create_default_context(cafile=str(self.files["ca"]))

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.server.port, context=self.client_tls, timeout=10)

    def post(self, body, conn=None, path="/validate") -> tuple[int, dict]:
        own = conn is None
        conn = conn or self.connection()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read()
        if own:
            conn.close()
        return response.status, json.loads(text) if response.getheader("Content-Type") == "application/json" else text

    def get(self, path: str) -> tuple[int, str]:
        conn = self.connection()
        conn.request("GET", path)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, text

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def running(tmp_path: Path):
    server = Running(tmp_path)
    yield server
    server.stop()


def test_a_review_over_tls_gets_checks_answer(running: Running) -> None:
    write = vm("tenant-acme", "vm2", [{"class": "a100", "count": 3}])
    status, body = running.post(review(write, uid="tls-1"))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "tls-1" and response["allowed"] is False
    expected = check_write(running.state, write)
    assert [c["field"] for c in response["status"]["details"]["causes"]] == [r.field for r in expected.reasons]


def test_concurrent_keep_alive_connections(running: Running) -> None:
    writes = [vm("tenant-acme", f"vm{i}", [{"class": "a100", "count": i % 4}]) for i in range(40)]

    def client(worker: int) -> list[tuple[str, bool]]:
        conn = running.connection()
        out = []
        for i in range(worker, len(writes), 8):  # 5 requests on one connection
            status, body = running.post(review(writes[i], uid=f"u{i}"), conn)
            assert status == 200
            out.append((body["response"]["uid"], body["response"]["allowed"]))
        conn.close()
        return out

    with ThreadPoolExecutor(8) as pool:
        answers = dict(pair for chunk in pool.map(client, range(8)) for pair in chunk)
    assert answers == {f"u{i}": check_write(running.state, w).allowed for i, w in enumerate(writes)}
    assert set(answers.values()) == {True, False}
    metrics = running.get("/metrics")[1]
    assert 'cozyrender_webhook_decisions_total{kind="VMInstance",outcome="allowed"}' in metrics
    assert 'cozyrender_webhook_decisions_total{kind="VMInstance",outcome="refused"}' in metrics
    assert "cozyrender_webhook_decision_seconds_bucket" in metrics


def test_health_and_readiness(running: Running) -> None:
    assert running.get("/healthz") == (200, "ok\n")
    assert running.get("/readyz") == (200, "ok\n")
    running.is_ready.clear()
    assert running.get("/readyz") == (503, "not ready: still listing vminstances\n")
    assert running.get("/healthz")[0] == 200
    assert running.get("/nothing")[0] == 404


def test_a_request_before_sync_is_refused_with_a_clear_message(running: Running) -> None:
    running.is_ready.clear()
    status, body = running.post(review(vm("tenant-acme", "vm2", []), uid="early"))
    assert status == 200
    response = body["response"]
    assert response["uid"] == "early" and response["allowed"] is False
    assert "not ready: still listing vminstances" in response["status"]["message"]


def test_a_body_over_the_limit_is_refused_unread(running: Running) -> None:
    conn = running.connection()
    conn.putrequest("POST", "/validate")
    conn.putheader("Content-Length", str(MAX_BODY + 1))
    conn.putheader("Content-Type", "application/json")
    conn.endheaders()
    response = conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 413 and body["response"]["allowed"] is False
    assert "more than" in body["response"]["status"]["message"]
    conn.close()


@pytest.mark.parametrize("data,why", [
    (b"{not json", "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "too deeply nested"),
    (b'{"a": ' + b"[" * 150 + b"]" * 150 + b"}", "nested more than"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
])
def test_bad_bodies_are_refused_saying_why(running: Running, data: bytes, why: str) -> None:
    status, body = running.post(data)
    assert status == 200 and body["response"]["allowed"] is False
    assert why in body["response"]["status"]["message"]


@pytest.mark.parametrize("levels,refused", [(98, False), (99, False), (100, True), (101, True)])
def test_the_depth_bound_holds_at_its_edge(running: Running, levels: int, refused: bool) -> None:
    """The nesting check is walked only for a body with MAX_DEPTH openers or more (fewer cannot nest
    deeper): at the edge it answers as the walk does (the write itself is unchecked: an unknown kind)."""
    body = review(vm("tenant-acme", "v", []), uid="deep")
    body["request"]["kind"]["kind"] = "Unchecked"
    text = json.dumps(body)
    data = (text[:-1] + ', "deep": ' + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "}").encode()
    status, answer = running.post(data)
    assert status == 200
    assert ("nested more than" in (answer["response"].get("status") or {}).get("message", "")) is refused


def test_a_route_that_raises_is_a_refusal(tmp_path: Path) -> None:
    def broken(body):
        raise RuntimeError("the ledger is unreachable")

    server = Running(tmp_path, broken)
    try:
        status, body = server.post(review(vm("tenant-acme", "vm2", []), uid="boom"))
        assert status == 200 and body["response"]["uid"] == "boom" and body["response"]["allowed"] is False
        assert "the ledger is unreachable" in body["response"]["status"]["message"]
        assert 'outcome="error"' in server.get("/metrics")[1]
    finally:
        server.stop()


def test_a_post_without_length_or_to_an_unknown_path(running: Running) -> None:
    assert running.post(review(vm("tenant-acme", "vm2", [])), path="/mutate")[0] == 404
    conn = running.connection()
    conn.putrequest("POST", "/validate")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"0\r\n\r\n")
    assert conn.getresponse().status == 411
    conn.close()


def test_plain_http_and_a_stalled_handshake_do_not_block_others(running: Running) -> None:
    stalled = socket.create_connection(("127.0.0.1", running.server.port))  # never says hello
    plain = socket.create_connection(("127.0.0.1", running.server.port))
    plain.sendall(b"POST /validate HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    try:
        status, body = running.post(review(vm("tenant-acme", "vm2", []), uid="after"))
        assert status == 200 and body["response"]["uid"] == "after"
    finally:
        stalled.close()
        plain.close()


def test_old_tls_versions_are_refused(running: Running) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(running.files["ca"]))
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", running.server.port)) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
