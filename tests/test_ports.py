"""tools/controlplane/common.py's `free_port`: the ports the test planes listen on.

- a port comes from below the kernel's ephemeral range (no bind(0) and no outgoing connection
  of another process takes it while the part that will listen on it starts or restarts);
- a port reserved by a running process is never handed to another, and one in use (listening)
  is never handed out;
- the reservation of a process that has exited is free again;
- with every port reserved or in use, the answer is a clear error, not a port in use.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))

import common  # noqa: E402

EPHEMERAL_LOW = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


@pytest.fixture
def ports(tmp_path, monkeypatch) -> Path:
    """Reservations in a folder of this test's own (the run's other workers keep theirs)."""
    monkeypatch.setattr(common, "PORTS", tmp_path / "ports")
    return tmp_path / "ports"


def _take(ports: Path, count: int) -> subprocess.Popen:
    """A process that takes `count` ports, prints them, and holds them until its stdin closes."""
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'tools' / 'controlplane')!r}); import common; "
            f"from pathlib import Path; common.PORTS = Path({str(ports)!r}); "
            f"print(json.dumps([common.free_port() for _ in range({count})]), flush=True); sys.stdin.read()")
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_port_is_below_the_ephemeral_range_and_free(ports):
    port = common.free_port()
    assert max(1024, EPHEMERAL_LOW - common.PORT_SPAN) <= port < EPHEMERAL_LOW
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # nothing listens there
    assert (ports / str(port)).read_text() == str(os.getpid())


def test_processes_alive_together_never_share_a_port(ports):
    holders = [_take(ports, 200) for _ in range(2)]
    try:
        taken = [json.loads(holder.stdout.readline()) for holder in holders]
        mine = [common.free_port() for _ in range(200)]
    finally:
        for holder in holders:
            holder.communicate("", timeout=30)
    assert all(len(set(each)) == 200 for each in (*taken, mine))
    assert not set(taken[0]) & set(taken[1]) and not (set(taken[0]) | set(taken[1])) & set(mine)


def test_a_listening_port_and_a_live_reservation_are_skipped_and_a_dead_ones_is_free(ports, monkeypatch):
    monkeypatch.setattr(common, "PORT_SPAN", 3)
    span = range(EPHEMERAL_LOW - 3, EPHEMERAL_LOW)
    ports.mkdir()
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    listening, held, freed = span
    (ports / str(held)).write_text(str(os.getppid()))  # a live process other than this one
    (ports / str(freed)).write_text(exited.stdout.strip())  # a process that has exited
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", listening))
        sock.listen()
        assert common.free_port() == freed
        with pytest.raises(common.ClusterError, match=rf"no free port in {span[0]}-{span[-1]}"):
            common.free_port()
