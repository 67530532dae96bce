"""One leader at a time, live (issue 34 item 6): two `cozyrender controller`
replicas (the GPUClass status controller) against a real kube-apiserver
v1.35.4, as the chart's service account. The leader is paused (SIGSTOP)
past its lease while a pod is bound: the standby takes the Lease over and
writes the new figures; the paused one, resumed, writes nothing (the API
server's own count of GPUClass status PATCHes does not move) and exits
saying it lost the lease. And a leader whose API server stops answering
(its connection frozen by a proxy in between): it stops leading before the
standby takes over, never two leaders at once (each replica's
`cozyrender_controller_leader`, polled)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

import yaml

import pytest

from controller_plane import ControllerPlane, add_node, gpuclass, pod, start_plane, wait_for
from kubeapi import GPUCLASSES

A100 = "nvidia.com/GA100_A100_PCIE_40GB"
NS = "tenant-root"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    # Own plane (issue 36): its electors share the controller's Lease name, cluster-wide state another module's controllers would contend for.
    plane = start_plane(tmp_path_factory)
    controllers = ControllerPlane(plane)
    try:
        controllers.apply_chart()
        controllers.create(f"/api/v1/namespaces/{NS}/serviceaccounts",
                           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        controllers.start("controller-a", "status")
        controllers.start("controller-b", "status")
        wait_for(controllers.holder, what="a leader")
        yield controllers
    finally:
        plane.stop()


def figures(cp) -> tuple:
    code, obj = cp.api.get(f"{GPUCLASSES}/a100")
    status = obj.get("status") or {} if code == 200 else {}
    return status.get("free"), status.get("allocatable"), status.get("nodes")


def status_patches(cp) -> float:
    """The API server's count of PATCHes of GPUClass status (apiserver_request_total), every client's."""
    conn = http.client.HTTPSConnection(cp.api.host, cp.api.port, context=cp.api.context, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="gpuclasses"' in line \
                and 'subresource="status"' in line and 'verb="PATCH"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(cp):
    cp.create(GPUCLASSES, gpuclass("a100", A100))
    add_node(cp, "gpu-1", {A100: "4"})
    wait_for(lambda: figures(cp) == (4, 4, 1), what="4 free units")
    leader = wait_for(cp.holder, what="a leader")
    standby = next(name for name in cp.replicas if name != leader)
    pid = cp.plane.pids[leader]
    os.killpg(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: cp.holder() == standby, timeout=60, step=0.1, what="the standby holding the Lease")
        cp.create(PODS, pod("vm-1", "gpu-1", {A100: "2"}))
        wait_for(lambda: figures(cp) == (2, 4, 1), what="the new leader's write")
        # Quiet: the new leader has written what it had to (the count holds still for a second).
        counted = wait_for(lambda: _steady(cp), timeout=60, what="no status write in flight")
    finally:
        os.killpg(pid, signal.SIGCONT)
    process = cp.plane.processes.pop(leader)
    cp.plane.pids.pop(leader)
    cp.replicas.pop(leader)
    assert process.wait(timeout=60) == 1  # it stops: it lost the lease
    log = (cp.plane.logs / f"{leader}.log").read_text()
    assert "lost the lease" in log
    assert status_patches(cp) == counted  # the resumed replica wrote nothing
    assert figures(cp) == (2, 4, 1) and cp.holder() == standby


def _steady(cp) -> float | None:
    first = status_patches(cp)
    time.sleep(1)
    return first if status_patches(cp) == first else None


class FreezableProxy:
    """A TCP proxy to `target` whose traffic can be held (`frozen`): the
    connections stay open, nothing passes, as with an API server that hangs."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frozen, self.closed = threading.Event(), threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.frozen.is_set() and not self.closed.is_set():
                    time.sleep(0.02)
                if self.closed.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for each in (source, sink):
                try:
                    each.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
        for each in self.sockets:
            try:
                each.close()
            except OSError:
                pass


def leading(cp, name: str) -> bool:
    """The replica's `cozyrender_controller_leader` sample (its HELP line mentions 1 too)."""
    try:
        text = cp.metrics(name)
    except OSError:
        return False  # gone: it exited
    return any(line.split() == ["cozyrender_controller_leader", "1.0"] or
               line.split() == ["cozyrender_controller_leader", "1"] for line in text.splitlines())


def test_a_leader_whose_api_server_hangs_stops_before_the_standby_takes_over(tmp_path_factory):
    plane = start_plane(tmp_path_factory)
    proxy = None
    try:
        cp = ControllerPlane(plane)
        cp.apply_chart()
        url = urlsplit(plane.server)
        proxy = FreezableProxy((url.hostname, url.port))
        through = yaml.safe_load(cp.kubeconfig.read_text())
        through["clusters"][0]["cluster"]["server"] = f"https://{url.hostname}:{proxy.port}"
        proxied = plane.dir / "controller-kubeconfig-proxied"
        proxied.write_text(yaml.safe_dump(through))
        cp.start("controller-a", "status", "--kubeconfig", str(proxied))  # the last --kubeconfig wins
        wait_for(lambda: cp.holder() == "controller-a", what="controller-a leading")
        cp.start("controller-b", "status")
        wait_for(lambda: "cozyrender_controller_leader 0" in cp.metrics("controller-b"), what="the standby")
        proxy.frozen.set()
        frozen = time.monotonic()
        both = []
        while time.monotonic() - frozen < 90:
            a, b = leading(cp, "controller-a"), leading(cp, "controller-b")
            if a and b:
                both.append(round(time.monotonic() - frozen, 2))
            if b and not a:
                break
            time.sleep(0.05)
        took = time.monotonic() - frozen
        assert leading(cp, "controller-b") and cp.holder() == "controller-b"
        assert both == [], f"two leaders at once {both} s after the freeze"
        print(f"\nstandby leading {took:.2f} s after the leader's API server froze (lease 4 s, renew deadline 3 s)")
    finally:
        if proxy is not None:
            proxy.close()
        plane.stop()
