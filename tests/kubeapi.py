"""Raw REST calls to the test control plane, for tests that must send the API
server exactly the bytes they mean (hostile objects included) and read its
Status answer as it is. Authenticates with the admin client certificate."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from urllib.parse import urlsplit


class KubeAPI:
    def __init__(self, plane) -> None:
        self.plane = plane
        url = urlsplit(plane.server)
        self.host, self.port = url.hostname, url.port
        self.context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
        self.context.load_cert_chain(*(str(p) for p in plane.admin_cert))
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        return conn

    def request(self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
                content_type: str = "application/json") -> tuple[int, dict]:
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        return response.status, (json.loads(data) if data else {})

    def get(self, path: str) -> tuple[int, dict]:
        return self.request("GET", path)

    def create(self, path: str, body: object, *, dry_run: bool = False) -> tuple[int, dict]:
        return self.request("POST", path + ("?dryRun=All" if dry_run else ""), body)

    def replace(self, path: str, body: object) -> tuple[int, dict]:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> tuple[int, dict]:
        return self.request("DELETE", path)


def apps_path(plural: str, namespace: str, name: str | None = None) -> str:
    base = f"/apis/apps.cozystack.io/v1alpha1/namespaces/{namespace}/{plural}"
    return base if name is None else f"{base}/{name}"


GPUCLASSES = "/apis/cozystack.io/v1alpha1/gpuclasses"


class Changes:
    """Watches on API collections (`paths`, e.g. a namespace's pods), each
    event waking a waiter: a test waiting for the cluster re-checks its
    condition when something it reads has changed, not on a timer (issue 36
    item 3). Use `clear()` before reading the state, then `wait()`: an event
    in between is never missed. A watch the server ends is opened again."""

    def __init__(self, api: KubeAPI, paths: list[str]) -> None:
        self.api = api
        self.event = threading.Event()
        self.events = 0
        self._stopped = threading.Event()
        self._connections: list[http.client.HTTPSConnection] = []
        self._threads = [threading.Thread(target=self._watch, args=(path,), daemon=True) for path in paths]
        for thread in self._threads:
            thread.start()

    def _watch(self, path: str) -> None:
        separator = "&" if "?" in path else "?"
        while not self._stopped.is_set():
            conn = http.client.HTTPSConnection(self.api.host, self.api.port, context=self.api.context, timeout=300)
            self._connections.append(conn)
            try:
                conn.request("GET", f"{path}{separator}watch=1", headers={"Accept": "application/json"})
                response = conn.getresponse()
                while not self._stopped.is_set():
                    line = response.readline()
                    if not line:
                        break
                    self.events += 1
                    self.event.set()
            except (OSError, http.client.HTTPException):
                if not self._stopped.is_set():
                    self._stopped.wait(0.5)  # the server went (a restarted API server): watch again
            finally:
                conn.close()
                self._connections.remove(conn)

    def clear(self) -> None:
        self.event.clear()

    def wait(self, timeout: float) -> bool:
        """Until an event arrives (True) or `timeout` seconds pass (False)."""
        return self.event.wait(timeout)

    def close(self) -> None:
        self._stopped.set()
        for conn in list(self._connections):
            try:
                conn.sock and conn.sock.shutdown(2)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=5)
