"""Stopping refuses nothing (issue 34 item 4, the webhook's side): on
SIGTERM `/readyz` turns 503 first, the listener keeps answering requests in
flight and new ones for the drain period, then stops; over real TLS, and
through `cozyrender webhook` itself."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from test_budgets_builders import vm
from test_webhook_admission import review
from test_webhook_cli import ROOT, free_port, kubeconfig
from webhook_certs import make_certs

from cozyrender.webhook.metrics import Metrics
from cozyrender.webhook.server import serve, tls_context

WRITE = vm("tenant-a", "v", [{"class": "a100", "count": 1}])


def _answer(body) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": body["request"]["uid"], "allowed": True}}


def _raw(server, context: ssl.SSLContext) -> ssl.SSLSocket:
    """A TLS connection to `server` whose bytes the test writes itself (no client library's
    pacing between requests)."""
    return context.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=30),
                               server_hostname="localhost")


def _send_review(raw: ssl.SSLSocket, uid: str) -> None:
    body = json.dumps(review(WRITE, uid=uid)).encode()
    raw.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_draining_is_unready_and_answers_every_request_until_the_listener_closes(tmp_path: Path) -> None:
    files = make_certs(tmp_path)
    release = threading.Event()

    def route(body):
        if body["request"]["uid"] == "slow":
            release.wait(30)
        return _answer(body)

    server = serve(("127.0.0.1", 0), tls_context(str(files["cert"]), str(files["key"])), {"/validate": route},
                   lambda: True, Metrics())
    thread = server.serve_in_thread()
    context = ssl.create_default_context(cafile=str(files["ca"]))

    def connection() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)

    def post(conn, uid: str) -> dict:
        conn.request("POST", "/validate", json.dumps(review(WRITE, uid=uid)).encode(),
                     {"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())

    def readyz() -> tuple[int, bytes]:
        conn = connection()
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        out = response.status, response.read()
        conn.close()
        return out

    try:
        assert readyz()[0] == 200
        kept = connection()  # a keep-alive connection opened before the stop
        assert post(kept, "before")["response"]["allowed"]
        slow: list = []
        in_flight = threading.Thread(target=lambda: slow.append(post(connection(), "slow")))
        in_flight.start()
        stopper = server.stop_after(2.0)
        status, text = readyz()
        assert status == 503 and b"shutting down" in text
        assert post(kept, "during-kept")["response"]["allowed"]  # the old connection, a new request
        assert post(connection(), "during-new")["response"]["allowed"]  # a new connection
        release.set()
        in_flight.join(30)
        assert slow and slow[0]["response"]["uid"] == "slow" and slow[0]["response"]["allowed"]
        stopper.join(30)
        assert server.drain(10)
        thread.join(10)
        server.server_close()
        with pytest.raises(OSError):
            post(connection(), "after")
    finally:
        release.set()
        server.server_close()


def test_sigterm_turns_unready_then_stops_after_the_drain(tmp_path: Path) -> None:
    files = make_certs(tmp_path)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cozyrender", "webhook", "--listen", f"127.0.0.1:{port}",
                             "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]),
                             "--kubeconfig", str(kubeconfig(tmp_path, free_port())), "--drain-seconds", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    context = ssl.create_default_context(cafile=str(files["ca"]))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while True:  # the signal is handled between two bytecodes of the main thread: soon
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=5)
            except urllib.error.HTTPError as err:
                if b"shutting down" in err.read():
                    break
            assert time.monotonic() < deadline, "not draining"
            time.sleep(0.1)
        # Still listening, and still answering an AdmissionReview (here: refused, the cache never synced).
        request = urllib.request.Request(f"https://127.0.0.1:{port}/validate", method="POST",
                                         data=json.dumps(review(WRITE, uid="draining")).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, context=context, timeout=5).read())
        assert answer["response"]["uid"] == "draining"
        out, errors = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, errors
    assert "stopping: not ready, answering for 3 s more" in errors and "Traceback" not in errors


def _server(tmp_path: Path, route=None):
    files = make_certs(tmp_path)
    server = serve(("127.0.0.1", 0), tls_context(str(files["cert"]), str(files["key"])),
                   {"/validate": route or _answer}, lambda: True, Metrics())
    context = ssl.create_default_context(cafile=str(files["ca"]))
    return server, server.serve_in_thread(), context


def test_closing_closes_idle_connections_itself_and_answers_the_active_ones(tmp_path: Path) -> None:
    """As Go's http.Server.Shutdown: after the drain the listener closes, a keep-alive connection
    no request used during the drain is closed by the server at once (a FIN the caller sees
    while the process still runs, not a reset at its exit), and a request being answered gets
    its answer, saying Connection: close."""
    release, entered = threading.Event(), threading.Event()

    def route(body):
        if body["request"]["uid"] == "slow":
            entered.set()
            release.wait(30)
        return _answer(body)

    server, thread, context = _server(tmp_path, route)
    try:
        idle = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
        idle.request("POST", "/validate", json.dumps(review(WRITE, uid="before")).encode())
        assert json.loads(idle.getresponse().read())["response"]["allowed"]
        busy = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
        answers: list = []

        def slow() -> None:
            busy.request("POST", "/validate", json.dumps(review(WRITE, uid="slow")).encode())
            response = busy.getresponse()
            answers.append((response.getheader("Connection"), json.loads(response.read())))

        in_flight = threading.Thread(target=slow)
        in_flight.start()
        assert entered.wait(30)  # the slow request is being answered (not the first one's count, not yet gone)
        server.shutdown()
        thread.join(10)
        finished: list = []
        closing = threading.Thread(target=lambda: finished.append(server.close_gracefully(10)))
        closing.start()
        idle.sock.settimeout(10)
        assert idle.sock.recv(1) == b""  # the server closed the idle connection: end of stream
        assert server.open_connections() == 1  # the busy one waits for its answer
        release.set()
        in_flight.join(10)
        closing.join(10)
        [(connection, answer)] = answers
        assert connection == "close" and answer["response"]["uid"] == "slow" and answer["response"]["allowed"]
        assert finished == [True] and server.open_connections() == 0
    finally:
        release.set()
        server.server_close()


def test_an_idle_connection_outlives_the_request_timeout_but_a_stalled_request_does_not(tmp_path: Path) -> None:
    """A connection may idle (IDLE_TIMEOUT, longer than the API server's transport keeps one),
    but a handshake or a request once begun must arrive within the request timeout."""
    server, thread, context = _server(tmp_path)
    server.idle_timeout, server.request_timeout = 30.0, 0.5
    try:
        kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
        for uid in ("first", "after-idling"):
            kept.request("POST", "/validate", json.dumps(review(WRITE, uid=uid)).encode())
            assert json.loads(kept.getresponse().read())["response"]["uid"] == uid
            time.sleep(1.5)  # three request timeouts, idle
        stalled = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
        stalled.connect()
        stalled.sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\n")  # the headers never end
        stalled.sock.settimeout(10)
        started = time.monotonic()
        assert stalled.sock.recv(1) == b""
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)  # no handshake at all
        assert silent.recv(1) == b""
        silent.close()
        assert time.monotonic() - started < 8
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_a_request_that_waited_on_its_socket_has_spent_its_deadline_there(tmp_path: Path) -> None:
    """A call's deadline runs from its arrival on this host (the kernel's receive timestamp),
    not from when a thread got to read it: a request queued on a connection while the replica
    could not read it (here: behind a slow one; in a cluster, a paused process) is read with
    its deadline already spent, so nothing is written for it."""
    from cozyrender.webhook.deadline import current

    seen: dict[str, float] = {}

    def route(body):
        uid = body["request"]["uid"]
        seen[uid] = current().remaining()
        if uid == "slow":
            time.sleep(2.5)
        return _answer(body)

    server, thread, context = _server(tmp_path, route)
    server.timeout = 2.0  # a deadline 1.5 s after arrival (less the margin)
    try:
        raw = _raw(server, context)
        for uid in ("slow", "queued"):
            _send_review(raw, uid)
            time.sleep(0.3)  # the second is queued while the first is being answered
        received = b""
        while received.count(b"HTTP/1.1 200") < 2:  # both answered, in order
            chunk = raw.recv(65536)
            assert chunk, received
            received += chunk
        raw.close()
        assert seen["slow"] > 1.0
        assert seen["queued"] == 0.0, seen  # read 2.2 s after it arrived: past its 1.5 s
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_the_request_a_connection_was_dialled_for_runs_from_the_handshakes_arrival(tmp_path: Path) -> None:
    """A connection opened while the replica could not accept it (here: its accept delayed 2.2 s;
    in a cluster, a paused process) holds only the TLS handshake's first bytes until the replica
    resumes; the request it was dialled for is sent once the handshake is done. The caller's clock
    ran from before the dial, so that request's deadline runs from the handshake's arrival: read
    past it, nothing is written for it. A request sent later on the same connection runs from
    its own arrival."""
    from cozyrender.webhook.deadline import current

    seen: dict[str, float] = {}

    def route(body):
        seen[body["request"]["uid"]] = current().remaining()
        return _answer(body)

    server, thread, context = _server(tmp_path, route)
    server.timeout = 2.0  # a deadline 1.5 s after arrival (less the margin)
    accept, delayed = server.get_request, threading.Event()

    def get_request():
        if not delayed.is_set():
            delayed.set()
            time.sleep(2.2)  # the connection and its ClientHello wait in the kernel meanwhile
        return accept()

    server.get_request = get_request
    try:
        raw = _raw(server, context)
        for uid in ("dialled", "later"):
            _send_review(raw, uid)
            received = b""
            while b"HTTP/1.1 200" not in received or not received.endswith(b"}"):
                chunk = raw.recv(65536)
                assert chunk, received
                received += chunk
            time.sleep(1.2)  # the next request comes well after the handshake
        raw.close()
        assert seen["dialled"] == 0.0, seen  # 2.2 s after its connection's handshake arrived: past 1.5 s
        assert seen["later"] > 1.0, seen
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
