"""The controller process: leader election, then the controllers, and an
HTTP endpoint for probes and metrics.

Rules:
- every replica campaigns for the Lease (`controllers.lease`); only the
  leader runs the controllers (the GPUClass status writer, the license
  copier, the metrics' figures), so there is one writer and one exporter;
- a standby serves `/healthz`, `/readyz` and `/metrics` too: its metrics
  say `cozyrender_controller_leader 0` and carry no per-tenant or per-class
  figures, so a PromQL sum over replicas never counts twice;
- when the leader loses the Lease it stops (`lost` is set) and the command
  exits non-zero: the Deployment restarts it as a standby, as
  controller-runtime does, rather than running on half-stopped threads;
- `/readyz` says whether the replica can reach the API server: Ready while
  the election loop's last answer from it (any HTTP answer, a 409 or 404
  included) is at most `ready_contact` seconds old (the loop asks every
  retry period), and, on the leader, once its controllers' first lists
  synced. A replica that cannot reach the API server is never Ready;
- `/healthz` says whether it is stuck: healthy while the election loop's
  thread runs and its last API call ended (answered or failed) at most
  `stuck_after` seconds ago (each call is bounded by the client's timeout,
  so only a loop that hangs or died goes past it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cozyrender.controllers.lease import LeaderElector

log = logging.getLogger("cozyrender.controllers.manager")

READY_CONTACT = 30.0
STUCK_AFTER = 90.0


class Contact:
    """A client whose calls are timed: `answered` is when the API server last
    answered one (an ApiError is an answer), `ended` when one last ended in
    any way (a transport error included), both on `clock`."""

    def __init__(self, client, clock: Callable[[], float] = time.monotonic) -> None:
        self._wrapped = client
        self._clock = clock
        self.answered: float | None = None
        self.ended = clock()

    def _timed(self, request: Callable[[], object]):
        from lightkube.core.exceptions import ApiError

        try:
            result = request()
        except ApiError:
            self.answered = self._clock()
            raise
        finally:
            self.ended = self._clock()
        self.answered = self.ended
        return result

    def bounded_call(self, method: str, timeout: float | None, **request):
        """`kube.bounded.call` through this client, timed like any other call."""
        from cozyrender.kube.bounded import call

        return self._timed(lambda: call(self._wrapped, method, timeout, **request))

    def __getattr__(self, name: str):
        attribute = getattr(self._wrapped, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._timed(lambda: attribute(*args, **kwargs))


class Manager:
    def __init__(self, make_client: Callable[[], object], elector_options: dict,
                 controllers: dict[str, Callable[[], object]], ready_contact: float = READY_CONTACT,
                 stuck_after: float = STUCK_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        """`controllers`: name -> factory of an object with run(stop) and, for
        metrics, optional collect() (see controllers.metrics)."""
        self.make_client = make_client
        self.factories = controllers
        self.running: dict[str, object] = {}
        self.stop_controllers = threading.Event()
        self.lost = threading.Event()
        self.ready_contact, self.stuck_after, self.clock = ready_contact, stuck_after, clock
        self.contact = Contact(make_client(), clock)
        self.elector = LeaderElector(self.contact, on_started=self._lead, on_stopped=self._stopped,
                                     **elector_options)
        self._threads: list[threading.Thread] = []
        self._elector_thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        return self.elector.leading.is_set()

    def _lead(self) -> None:
        for name, factory in self.factories.items():
            controller = factory()
            self.running[name] = controller
            thread = threading.Thread(target=controller.run, args=(self.stop_controllers,),
                                      name=f"controller-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _stopped(self) -> None:
        self.stop_controllers.set()
        self.lost.set()

    def start(self) -> None:
        self._elector_thread = self.elector.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Graceful stop: the controllers stop writing first, then the Lease is
        released (so a standby takes over within its retry period)."""
        self.stop_controllers.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.elector.stop()
        if self._elector_thread is not None:
            self._elector_thread.join(timeout=max(1.0, deadline - time.monotonic()))

    def readiness(self) -> tuple[bool, str]:
        """(Ready, why): the API server answered within ready_contact seconds,
        and, on the leader, its controllers' first lists synced."""
        answered = self.contact.answered
        if answered is None:
            return False, "no answer from the API server yet"
        age = self.clock() - answered
        if age > self.ready_contact:
            return False, (f"the API server's last answer is {age:.0f} s old (the bound is "
                           f"{self.ready_contact:g} s): it cannot be reached")
        if self.leading and not all(getattr(c, "synced", lambda: True)() for c in self.running.values()):
            return False, "the controllers' first lists have not synced"
        return True, "ok"

    def ready(self) -> bool:
        return self.readiness()[0]

    def liveness(self) -> tuple[bool, str]:
        """(Alive, why): the election loop runs and its last API call ended
        within stuck_after seconds."""
        thread = self._elector_thread
        if thread is not None and not thread.is_alive() and not self.lost.is_set():
            return False, "the leader election loop has stopped"
        age = self.clock() - self.contact.ended
        if age > self.stuck_after:
            return False, f"the leader election loop is stuck: no API call has ended for {age:.0f} s"
        return True, "ok"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a process that does not accept for a few seconds has
    # its probes' connections overflow it, and the kernel then drops new SYNs ("Possible SYN
    # flooding on port 8080" on the test node), each sent again only after 1, 3, 7 s. Go's servers
    # listen with the kernel's somaxconn.
    request_queue_size = 128


def serve_http(address: tuple[str, int], manager: Manager, metrics_text: Callable[[], bytes]) -> ThreadingHTTPServer:
    """/healthz, /readyz and /metrics on plain HTTP (as kube-state-metrics serves them)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:
            pass

        def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path in ("/healthz", "/readyz"):
                ok, why = manager.liveness() if path == "/healthz" else manager.readiness()
                self._send(200 if ok else 503, f"{why}\n".encode())
            elif path == "/metrics":
                try:
                    body = metrics_text()
                except Exception as err:  # noqa: BLE001 - a scrape that fails says why
                    log.exception("metrics")
                    self._send(500, f"cannot compute the metrics: {err}\n".encode())
                    return
                self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._send(404, b"not found\n")

    server = _HTTPServer(address, Handler)
    threading.Thread(target=server.serve_forever, name="controller-http", daemon=True).start()
    return server
