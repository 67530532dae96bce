"""The controller's probes against a real kube-apiserver (issue 33 item 4):
`/readyz` says whether the replica can reach the API server. Two replicas as
the chart runs them (its args, its `--ready-contact`, shortened here); the
standby reaches the API server through a TCP forward (tools/controlplane/
balancer.py) the test stops: the standby turns not Ready within
--ready-contact and says why, stays alive (`/healthz`: its election loop
still runs, its calls fail fast), and is Ready again once the API server is
reachable. The leader, on a direct path, stays Ready throughout.

On the node (a pod whose `kubernetes` Service is not routed) this is the
state the chart's controller pods were in while showing Ready; the node test
(tests/node_controller_checks.py) runs the pods as the chart deploys them."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from controller_plane import ControllerPlane, start_plane, wait_for

ROOT = Path(__file__).resolve().parent.parent
READY_CONTACT = 3  # seconds; the test's retry period is 0.5 s (controller_plane.TIMINGS)


def probe(cp: ControllerPlane, name: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cp.replicas[name]}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    plane = start_plane(tmp_path_factory)  # puts tools/controlplane on the path
    from common import free_port

    controllers = ControllerPlane(plane)
    try:
        controllers.apply_chart()
        # A forward to the API server the test can cut: the standby's only path to it.
        port = free_port()
        controllers.forward_port = port
        controllers.forward = ["balancer", [sys.executable, str(ROOT / "tools" / "controlplane" / "balancer.py"),
                                            "--listen", f"127.0.0.1:{port}",
                                            "--backend", plane.server.removeprefix("https://")]]
        plane._spawn(*controllers.forward)
        config = yaml.safe_load(controllers.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
        forwarded = plane.dir / "controller-kubeconfig-forwarded"
        forwarded.write_text(yaml.safe_dump(config))
        controllers.start("controller-a", "status", "--ready-contact", str(READY_CONTACT))
        wait_for(controllers.holder, what="a leader")
        controllers.start("controller-b", "status", "--ready-contact", str(READY_CONTACT),
                          "--kubeconfig", str(forwarded))
        yield controllers
    finally:
        plane.stop()


def test_a_replica_that_cannot_reach_the_api_server_is_not_ready_and_ready_again_when_it_can(cp):
    assert cp.holder() == "controller-a"
    wait_for(lambda: probe(cp, "controller-b", "/readyz")[0] == 200, what="the standby Ready")
    assert probe(cp, "controller-a", "/readyz")[0] == 200
    cut = time.monotonic()
    cp.plane.stop_process("balancer")

    def not_ready() -> str | None:
        code, why = probe(cp, "controller-b", "/readyz")
        return why if code == 503 else None

    why = wait_for(not_ready, timeout=60, what="the cut-off standby not Ready")
    took = time.monotonic() - cut
    assert "cannot be reached" in why and f"the bound is {READY_CONTACT} s" in why, why
    assert took >= READY_CONTACT - 1  # not Ready because its last answer aged past the stated bound
    assert probe(cp, "controller-b", "/healthz") == (200, "ok\n")  # not stuck: its calls fail and it goes on
    assert probe(cp, "controller-a", "/readyz")[0] == 200  # the leader reaches the API server directly
    cp.plane._spawn(*cp.forward)
    wait_for(lambda: probe(cp, "controller-b", "/readyz")[0] == 200, timeout=60, what="the standby Ready again")
    assert cp.holder() == "controller-a"


def test_a_replica_is_not_ready_before_its_first_answer(cp, tmp_path):
    """A replica pointed at an address nothing serves never becomes Ready."""
    from common import free_port

    config = yaml.safe_load(cp.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    nowhere = tmp_path / "kubeconfig-nowhere"
    nowhere.write_text(yaml.safe_dump(config))
    cp.start("controller-c", "status", "--ready-contact", str(READY_CONTACT), "--kubeconfig", str(nowhere))
    try:
        wait_for(lambda: probe(cp, "controller-c", "/readyz"), what="controller-c answering")
        time.sleep(READY_CONTACT + 1)
        assert probe(cp, "controller-c", "/readyz") == (503, "no answer from the API server yet\n")
        assert probe(cp, "controller-c", "/healthz")[0] == 200
        assert cp.holder() == "controller-a"
    finally:
        cp.stop("controller-c")
