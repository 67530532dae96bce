"""The webhook's HTTPS server: AdmissionReview routes, health, readiness and
metrics.

Rule: every AdmissionReview gets an AdmissionReview back, and an answer that
cannot be computed is a refusal saying why (fail closed): a request before
the cache has synced, a body that is too large, too deep or not JSON, a
route that raises.

Stopping refuses nothing (issue 34 item 4): `stop_after(drain)` turns
`/readyz` to 503 at once (the kubelet's probe and the endpoints stop
sending new callers here), keeps serving every request, in flight or new,
for `drain` seconds (an API server whose endpoints lag still reaches a
replica that answers), each answer closing its connection; then
`close_gracefully` stops as Go's `http.Server.Shutdown` does: the listener
closes, idle keep-alive connections are closed at once (while the process
still runs, never by its exit), and the requests being answered get their
answers. An idle HTTP/1.1 connection can only be closed by racing a request
the caller may be sending on it at that instant (kubernetes#127335: the API
server reuses connections to a replica whose endpoint is gone, and does not
retry a POST on a reset); closing them at one known moment, before the
interpreter winds down, keeps that window to a packet's flight. For the
same reason a connection may idle longer (`IDLE_TIMEOUT`) than the API
server's transport keeps one (Go's `IdleConnTimeout`, 90 s): in steady
state the caller always closes first, so no close can race its request. Routes are a dict of path -> handler (`/validate` now;
`/mutate` is added the same way), each taking the parsed body and returning
the AdmissionReview to send. `/healthz` is 200 while the process serves,
`/readyz` 503 until `ready()` says the cache has synced, `/metrics` the
Prometheus text format.

Built on the standard library (`ssl` and `http.server.ThreadingHTTPServer`,
HTTP/1.1 keep-alive, one thread per connection): the API server keeps a few
long-lived connections per replica, the work per request is a few
milliseconds of Python under a lock, and nothing asynchronous would run it
faster; a framework would add a dependency and an event loop for no gain.
The TLS handshake runs in the connection's thread, never in the accept
loop, so a slow or hostile client cannot stall other connections.

A call's deadline runs from its arrival on this host, not from when a thread
got to read it: each connection asks the kernel to timestamp what it receives
(`SO_TIMESTAMP`), and the first byte of a request is peeked for its timestamp
before it is read. A replica that was paused (SIGSTOP, a frozen VM, a
starved CPU) with requests queued on its sockets finds them already past
their deadline when it resumes, and writes nothing for them: the API server
refused them long ago (issue 34 item 2). A connection the API server opened
while the replica was paused holds no request yet, only the first bytes of the
TLS handshake: the request is sent once the handshake is done, after the
resume, while the API server's clock has run since before its dial. So the
first request of a connection, sent as soon as the handshake completed (the
request the connection was dialled for), runs from the arrival of the
handshake's first bytes (`DIALLED_REQUEST`).

Only the API server may ask (issue 28 item 4): with a client CA
(`tls_context(..., client_ca=...)`), a client presenting a certificate that
CA did not sign fails the handshake, and a POST from a client presenting
none is refused with 401 before its body is read: no route runs, no ledger
entry is written. kube-apiserver presents its certificate through its
AdmissionConfiguration (a kubeconfig per webhook). GETs of `/healthz`,
`/readyz` and `/metrics` stay open to the kubelet's probes and Prometheus.

A renewed certificate is served without a restart (`ReloadingTLS`): cert-manager
renews the serving certificate (every 60 days by default) and the kubelet
updates the mounted Secret; the files are checked every few seconds and a new
context is made from them for the connections accepted after. The registered
caBundle follows the same Secret (cozyrender.webhook.registration).
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import admission
from .deadline import TIMEOUT, Deadline, within
from .metrics import Metrics

log = logging.getLogger("cozyrender.webhook.server")

MAX_BODY = 3 * 1024 * 1024  # the API server's own request limit is 3 MiB
MAX_DEPTH = 100  # JSON nesting; an AdmissionReview of these kinds is a dozen levels deep
IDLE_TIMEOUT = 120.0  # seconds a keep-alive connection may idle: more than the API server's 90 s, so it closes first
REQUEST_TIMEOUT = 10.0  # seconds each read of a handshake or of a request begun may take
# A connection's first request arriving within this many seconds of its TLS handshake's end is the
# one the caller dialled for (Go's transport writes it at once): its call began before the handshake.
DIALLED_REQUEST = 1.0

SO_TIMESTAMP = getattr(socket, "SO_TIMESTAMP", 29)  # Linux: receive timestamps as a struct timeval
_TIMEVAL = struct.Struct("@ll")

Route = Callable[[object], dict]


def arrival(connection: socket.socket) -> float | None:
    """When the first byte queued on `connection` reached this host (the kernel's receive
    timestamp, on time.monotonic()'s scale), peeked without reading it; None when nothing is
    queued or the kernel gave no timestamp."""
    try:  # the plain socket's recvmsg, under TLS too: the bytes stay queued for the TLS layer
        _, ancillary, _, _ = socket.socket.recvmsg(connection, 1, socket.CMSG_SPACE(_TIMEVAL.size),
                                                   socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMP and len(data) >= _TIMEVAL.size:
            seconds, micros = _TIMEVAL.unpack(data[:_TIMEVAL.size])
            return time.monotonic() - max(0.0, time.time() - (seconds + micros / 1e6))
    return None


class WebhookServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # idle keep-alive connections never hold up a stop; see `drain`
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], tls: ssl.SSLContext | ReloadingTLS | None, routes: dict[str, Route],
                 ready: Callable[[], bool], metrics: Metrics, not_ready_reason: Callable[[], str] = lambda: "",
                 timeout: float = TIMEOUT) -> None:
        self.tls = tls
        self.timeout = timeout  # the webhook configuration's timeoutSeconds: each request's deadline
        # A client certificate is required for the routes when the context verifies them.
        self.authenticate = tls is not None and tls.verify_mode != ssl.CERT_NONE
        self.routes = dict(routes)
        self.ready = ready
        self.not_ready_reason = not_ready_reason
        self.metrics = metrics
        self.inflight = 0
        self._inflight_lock = threading.Lock()
        self.draining = False  # /readyz 503 while the listener still serves (stop_after)
        self.idle_timeout, self.request_timeout = IDLE_TIMEOUT, REQUEST_TIMEOUT
        # Each open connection and whether it is "idle" (waiting for a request) or "active";
        # `close_idle` closes the idle ones, and a connection it closed takes no further request.
        self._connections: dict[socket.socket, str] = {}
        self._closing = False
        super().__init__(address, _Handler)

    def stop_after(self, drain: float) -> threading.Thread:
        """Unready at once, serving on for `drain` seconds, then shut down (on
        a thread of its own: callable from a signal handler)."""
        self.draining = True

        def later() -> None:
            threading.Event().wait(drain)
            self.shutdown()

        thread = threading.Thread(target=later, name="webhook-drain", daemon=True)
        thread.start()
        return thread

    def track(self, delta: int) -> None:
        with self._inflight_lock:
            self.inflight += delta

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being answered (after `shutdown`), at most `timeout` s."""
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.inflight

    def connection_state(self, connection: socket.socket, state: str) -> bool:
        """Record a connection's state ("idle", "active", or "gone" when it ends); False when
        the connection may not go on (the server is closing and it was idle, or was closed)."""
        with self._inflight_lock:
            if state == "gone":
                self._connections.pop(connection, None)
                return False
            current = self._connections.get(connection)
            if current == "closed" or (self._closing and state == "idle"):
                return False
            self._connections[connection] = state
            return True

    def close_idle(self) -> int:
        """Close every idle connection (a FIN to the caller, which then dials another
        replica); the number closed."""
        closed = 0
        with self._inflight_lock:
            for connection, state in self._connections.items():
                if state == "idle":
                    self._connections[connection] = "closed"
                    try:  # the socket's own shutdown, under TLS too: wakes the thread waiting on it
                        socket.socket.shutdown(connection, socket.SHUT_RDWR)
                    except OSError:
                        pass
                    closed += 1
        return closed

    def open_connections(self) -> int:
        with self._inflight_lock:
            return sum(1 for state in self._connections.values() if state != "closed")

    def close_gracefully(self, timeout: float = 5.0) -> bool:
        """After `shutdown`: close the listener, then each connection as soon as it is idle
        (a request being answered first gets its answer, with `Connection: close`), for at most
        `timeout` seconds; whether every connection closed in time."""
        self.draining = True
        with self._inflight_lock:
            self._closing = True
        self.server_close()
        deadline = time.monotonic() + timeout
        while True:
            self.close_idle()
            if not self.open_connections() or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        return not self.open_connections()

    def server_bind(self) -> None:
        super().server_bind()
        try:  # inherited by each accepted connection: what arrives before its accept is stamped too
            self.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        except OSError:
            pass

    def get_request(self):
        conn, addr = self.socket.accept()
        # Small answers: never wait for the peer's delayed ACK (Nagle) before sending one.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:  # each request's arrival, for its deadline (`arrival`)
            conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        except OSError:
            pass
        if self.tls is not None:  # the handshake happens on first read, in the connection's thread
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away mid-handshake or mid-request: nothing to answer

    @property
    def port(self) -> int:
        return self.server_address[1]

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="webhook-https", daemon=True)
        thread.start()
        return thread


class ReloadingTLS:
    """`tls_context` of the files, made again when they change (checked at most every
    `interval` seconds, when a connection is accepted). A change is seen by each file's inode,
    size and mtime: the kubelet swaps a Secret volume's files by renaming, so a renewal gives
    new inodes. Files that do not load (read mid-update, a key not matching the certificate)
    leave the current context in use and are tried again at the next check."""

    def __init__(self, cert_file: str, key_file: str, client_ca: str | None = None, interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.files = (cert_file, key_file, client_ca)
        self.interval, self.clock = interval, clock
        self.context = tls_context(cert_file, key_file, client_ca)
        self.signature = self._signature()
        self.checked = clock()
        self.reloads = 0
        self.on_load: Callable[[], None] | None = None  # called after each reload (the metrics' expiry)

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return self.context.verify_mode

    def _signature(self) -> tuple | None:
        try:
            return tuple((st.st_ino, st.st_size, st.st_mtime_ns)
                         for st in (os.stat(path) for path in self.files if path))
        except OSError:
            return None

    def current(self) -> ssl.SSLContext:
        now = self.clock()
        if now - self.checked >= self.interval:
            self.checked = now
            signature = self._signature()
            if signature is not None and signature != self.signature:
                try:
                    context = tls_context(*self.files)
                except (ssl.SSLError, OSError, ValueError) as err:
                    log.warning("cozyrender webhook: the serving certificate %s changed but does not load yet: %s",
                                self.files[0], err)
                else:
                    self.context, self.signature = context, signature
                    self.reloads += 1
                    if self.on_load is not None:
                        self.on_load()
                    log.info("cozyrender webhook: serving the renewed certificate %s", self.files[0])
        return self.context

    def wrap_socket(self, sock: socket.socket, **options) -> ssl.SSLSocket:
        return self.current().wrap_socket(sock, **options)


def tls_context(cert_file: str, key_file: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server context: TLS 1.2 or later, the given certificate and key;
    with `client_ca`, client certificates verified against that CA (a
    client may present none: the server then refuses it every route)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca is not None:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(current, dict):
            stack.extend((item, depth + 1) for item in current.values())
        elif isinstance(current, list):
            stack.extend((item, depth + 1) for item in current)
    return False


def _uid_of(body: object) -> str:
    request = body.get("request") if isinstance(body, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _kind_of(body: object) -> str:
    request = body.get("request") if isinstance(body, dict) else None
    kind = request.get("kind") if isinstance(request, dict) else None
    name = kind.get("kind") if isinstance(kind, dict) else None
    known = name in admission.CHECKED_KINDS or any(name == kind for _, kind in admission.DOOR_RESOURCES)
    return name if known or name == "HelmRelease" else "other"  # HelmRelease: /mutate


def _outcome(review: dict) -> str:
    response = review.get("response") or {}
    if response.get("allowed"):
        return "allowed"
    code = (response.get("status") or {}).get("code")
    return {403: "refused", 422: "invalid"}.get(code, "error")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT
    # An answer's status line, headers and body leave in one write (http.server flushes after each
    # request), and with TCP_NODELAY (setup) at once, as Go's net/http sends them: two small writes
    # would be two TLS records, and Nagle's algorithm could hold the second for the caller's ACK.
    wbufsize = 64 * 1024
    server: WebhookServer
    arrived = 0.0  # when the request being answered reached this host (time.monotonic())
    # Until the connection's first request is read: when the TLS handshake's first bytes reached
    # this host, and when the handshake completed.
    hello: float | None = None
    handshaken = 0.0

    def setup(self) -> None:
        # The earliest a first request can have arrived (a bound for one the TLS layer read
        # with the handshake, which no kernel timestamp then covers).
        self.arrived = time.monotonic()
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connection.settimeout(self.server.request_timeout)
        if isinstance(self.connection, ssl.SSLSocket):
            self.hello = arrival(self.connection)  # queued before this thread began: its time
            self.connection.do_handshake()  # bounded by the request timeout, not the idle one
            self.handshaken = time.monotonic()
        self.server.connection_state(self.connection, "active")

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.connection_state(self.connection, "gone")

    def handle_one_request(self) -> None:
        """Wait (idle, up to the idle timeout) for a request's first byte, then read and
        answer it (active, each read bounded by the request timeout)."""
        if not self.server.connection_state(self.connection, "idle"):
            self.close_connection = True
            return
        arrived = arrival(self.connection)  # bytes the kernel holds already: their time
        self.connection.settimeout(0.0)
        try:
            started = self.rfile.peek(1)  # or bytes read past the last request
        except (OSError, ValueError):  # nothing yet (under TLS, a "want read")
            started = b""
        if started and arrived is None:  # read with the handshake or the last request: no later than it
            arrived = self.arrived
        self.connection.settimeout(self.server.idle_timeout)
        if not started:
            try:
                readable = select.select([self.connection], [], [], self.server.idle_timeout)[0]
                arrived = arrival(self.connection) if readable else None
                started = self.rfile.peek(1) if readable else b""
            except (OSError, ValueError):  # reset, or closed by close_idle
                started = b""
        if not started or not self.server.connection_state(self.connection, "active"):
            self.close_connection = True
            return
        arrived = arrived if arrived is not None else time.monotonic()
        if self.hello is not None and arrived - self.handshaken <= DIALLED_REQUEST:
            arrived = min(arrived, self.hello)  # the request the connection was dialled for
        self.hello = None  # later requests run from their own arrival
        self.arrived = arrived
        self.connection.settimeout(self.server.request_timeout)
        super().handle_one_request()

    def log_message(self, format: str, *args) -> None:  # the metrics say what happened; no access log
        pass

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.server.draining or self.close_connection:
            # Draining: each answer closes its connection, so no caller keeps a connection to this
            # replica that the listener's close could reset under a request in flight.
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        elif path == "/readyz":
            if self.server.draining:
                self._send(503, b"not ready: shutting down (still answering while callers move away)\n",
                           "text/plain")
            elif self.server.ready():
                self._send(200, b"ok\n", "text/plain")
            else:
                reason = self.server.not_ready_reason() or "the cache has not synced"
                self._send(503, f"not ready: {reason}\n".encode(), "text/plain")
        elif path == "/metrics":
            self._send(200, generate_latest(self.server.metrics.registry), CONTENT_TYPE_LATEST)
        else:
            self._send(404, b"not found\n", "text/plain")

    def _authenticated(self) -> bool:
        """Whether the caller presented a certificate the client CA signed
        (the handshake refused any other); always, without a client CA."""
        if not self.server.authenticate:
            return True
        try:
            return bool(self.connection.getpeercert())
        except (ValueError, AttributeError):
            return False

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self._authenticated():
            self.close_connection = True  # the body is not read
            self.server.metrics.unauthenticated.inc()
            self._send(401, b"a client certificate signed by the webhook's client CA is required\n", "text/plain")
            return
        route = self.server.routes.get(path)
        if route is None:
            self._drain_and_close()
            self._send(404, b"not found\n", "text/plain")
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self._send(411, b"a Content-Length is required\n", "text/plain")
            return
        if int(length) > MAX_BODY:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            self._reply(admission.envelope(admission.cannot_decide(
                None, "", f"the request body is {int(length)} bytes, more than the {MAX_BODY} accepted")), "other",
                413)
            return
        started = time.perf_counter()
        # From the request's arrival on this host; the API server's clock started a little earlier: the margin.
        limit = Deadline.after(self.server.timeout, arrived=self.arrived)
        self.server.track(1)
        try:
            data = self.rfile.read(int(length))
            with within(limit):
                review = self._review(route, data)
            kind = review.pop("_kind", "other")
            self.server.metrics.latency.labels(kind).observe(time.perf_counter() - started)
            self._reply(review, kind)
        finally:
            self.server.track(-1)

    def _review(self, route: Route, data: bytes) -> dict:
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as err:
            why = "too deeply nested" if isinstance(err, RecursionError) else f"not JSON ({err})"
            return dict(admission.envelope(admission.cannot_decide(None, "", f"the body is {why}")), _kind="other")
        kind, uid = _kind_of(body), _uid_of(body)
        # Fewer than MAX_DEPTH openers cannot nest a value deeper: counted in C, walked only past that.
        if data.count(b"{") + data.count(b"[") >= MAX_DEPTH and _too_deep(body):
            return dict(admission.envelope(admission.cannot_decide(
                None, uid, f"the body is nested more than {MAX_DEPTH} levels deep")), _kind=kind)
        if not self.server.ready():
            reason = self.server.not_ready_reason() or "its cache of the cluster has not synced yet"
            return dict(admission.envelope(admission.cannot_decide(None, uid, f"the webhook is not ready: {reason}")),
                        _kind=kind)
        try:
            review = route(body)
        except Exception as err:  # fail closed, saying why; never a traceback to the API server
            review = admission.envelope(admission.cannot_decide(None, uid, f"{type(err).__name__}: {err}"))
        return dict(review, _kind=kind)

    def _reply(self, review: dict, kind: str, code: int = 200) -> None:
        self.server.metrics.decisions.labels(_outcome(review), kind).inc()
        self._send(code, json.dumps(review, separators=(",", ":")).encode())

    def _drain_and_close(self) -> None:
        self.close_connection = True


def serve(address: tuple[str, int], tls: ssl.SSLContext | ReloadingTLS | None, routes: dict[str, Route],
          ready: Callable[[], bool], metrics: Metrics, not_ready_reason: Callable[[], str] = lambda: "",
          timeout: float = TIMEOUT) -> WebhookServer:
    """A server bound to `address` (port 0: any free port), not yet serving;
    each request is decided within `timeout` (the configuration's
    timeoutSeconds) less a margin (cozyrender.webhook.deadline)."""
    return WebhookServer(address, tls, routes, ready, metrics, not_ready_reason, timeout)


__all__ = ["MAX_BODY", "MAX_DEPTH", "ReloadingTLS", "Route", "WebhookServer", "serve", "tls_context"]
