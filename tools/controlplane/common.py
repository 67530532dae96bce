"""What every part of the test planes shares, below all of them: the error a
plane raises when a part cannot start, a free loopback port reserved for the
process that asked, and a kubeconfig for a client certificate. cluster.py composes the planes from node.py,
flux.py, aggapi.py and certmanager.py; each of those imports this module,
never cluster.py, so the parts do not reach back up into what composes them."""

from __future__ import annotations

import fcntl
import os
import random
import socket
from pathlib import Path

# Ports handed out by `free_port`, one file per port naming the process it is reserved for
# (shared by every process of a run: the pytest workers, `make cluster`).
PORTS = Path(os.environ.get("COZYRENDER_PORTS", "/run/cozyrender-ports"))
PORT_SPAN = 12000  # ports below the kernel's ephemeral range that `free_port` chooses from


class ClusterError(RuntimeError):
    """A part of a test plane could not start or did not become ready."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, reserved for this process while it lives.

    A port is chosen before the part that listens on it starts, and a replica restarted by a
    test listens on its port again: in between the port is closed. The kernel's choice (bind to
    port 0) is taken from its ephemeral range, where any other process's bind(0) or outgoing
    connection may take that port meanwhile (a run saw a test's TLS client reach another plane's
    plain-HTTP metrics server on its replica's port). So the port comes from below the ephemeral
    range (net.ipv4.ip_local_port_range), which the kernel hands to no one, and is reserved in
    PORTS under a lock: no other process of the run gets it until this one has exited."""
    PORTS.mkdir(parents=True, exist_ok=True)
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first = max(1024, low - PORT_SPAN)
    ports = range(first, low)
    start = random.randrange(len(ports))
    with open(PORTS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for offset in range(len(ports)):
            port = ports[(start + offset) % len(ports)]
            reservation = PORTS / str(port)
            if _reserved(reservation) or not _bindable(port):
                continue
            reservation.write_text(str(os.getpid()))
            return port
    raise ClusterError(f"no free port in {first}-{low - 1}: every one is reserved in {PORTS} or in use")


def _reserved(reservation: Path) -> bool:
    """Whether `reservation` names a process still running (another than this one may be, too)."""
    try:
        pid = int(reservation.read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def client_kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> dict:
    """A kubeconfig for `user`'s client certificate against `server`."""
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "cozyrender-test",
        "clusters": [{"name": "cozyrender-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "cozyrender-test", "context": {"cluster": "cozyrender-test", "user": user}}],
    }
