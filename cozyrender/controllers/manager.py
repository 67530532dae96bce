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
  controller-runtime does, rather than running on half-stopped threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cozyrender.controllers.lease import LeaderElector

log = logging.getLogger("cozyrender.controllers.manager")


class Manager:
    def __init__(self, make_client: Callable[[], object], elector_options: dict,
                 controllers: dict[str, Callable[[], object]]) -> None:
        """`controllers`: name -> factory of an object with run(stop) and, for
        metrics, optional collect() (see controllers.metrics)."""
        self.make_client = make_client
        self.factories = controllers
        self.running: dict[str, object] = {}
        self.stop_controllers = threading.Event()
        self.lost = threading.Event()
        self.elector = LeaderElector(make_client(), on_started=self._lead, on_stopped=self._stopped,
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

    def ready(self) -> bool:
        """A standby is ready (it only waits); the leader once its controllers' first lists synced."""
        if not self.leading:
            return True
        return all(getattr(c, "synced", lambda: True)() for c in self.running.values())


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
            if path == "/healthz":
                self._send(200, b"ok\n")
            elif path == "/readyz":
                ok = manager.ready()
                self._send(200 if ok else 503, b"ok\n" if ok else b"the controllers' first lists have not synced\n")
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

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="controller-http", daemon=True).start()
    return server
