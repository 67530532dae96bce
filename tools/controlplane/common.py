"""What every part of the test planes shares, below all of them: the error a
plane raises when a part cannot start, a free loopback port, and a kubeconfig
for a client certificate. cluster.py composes the planes from node.py,
flux.py, aggapi.py and certmanager.py; each of those imports this module,
never cluster.py, so the parts do not reach back up into what composes them."""

from __future__ import annotations

import socket
from pathlib import Path


class ClusterError(RuntimeError):
    """A part of a test plane could not start or did not become ready."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def client_kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> dict:
    """A kubeconfig for `user`'s client certificate against `server`."""
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "cozyrender-test",
        "clusters": [{"name": "cozyrender-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "cozyrender-test", "context": {"cluster": "cozyrender-test", "user": user}}],
    }
