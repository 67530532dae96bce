"""A node drained under a tenant's writes (issue 34 item 4): two real nodes (tools/controlplane/node.py,
`ControlPlane(nodes=2)`): the plane's node with the GPU device plugin, and a second one without GPUs
in a mount namespace of its own, the webhook chart's two replicas spread over both.

`kubectl drain` of the node carrying the replica the writes go to, while a tenant's automation
creates a 1-GPU VM and deletes the one before it every 0.2 s (budget 4: every create fits):
the eviction respects the PodDisruptionBudget, the evicted replica is recreated on the other node
(the drained one is cordoned), the drain completes, and no write is refused. Each write is tried
once, never again.

Own plane: the second node is started for this module only (tests/test_node_cluster.py's plane
keeps one node).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import test_webhook_live
from test_webhook_live import A100

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))

from test_node_cluster import (GPU, NAMESPACE, _busiest, _churn, deployment_settled,  # noqa: E402
                               kubectl_json, ready, wait_cached_tenant, wait_for, webhook_pods)
from test_node_cluster import api  # noqa: E402,F401 - the fixture: the GPUClass a100 on this module's plane


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    from cluster import ControlPlane

    plane = ControlPlane(tmp_path_factory.mktemp("node-drain"), BIN, webhook_replicas=2, node=True,
                         gpus={GPU: 4}, nodes=2)
    plane.start()
    yield plane
    plane.stop()


def nodes_of(plane) -> dict[str, str]:
    """Each ready webhook pod's node."""
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in webhook_pods(plane) if ready(p)}


def test_both_nodes_are_ready_and_the_second_has_no_gpu(plane):
    nodes = {n["metadata"]["name"]: n for n in kubectl_json(plane, "get", "nodes")["items"]}
    assert sorted(nodes) == ["cozyrender-node", "cozyrender-node-2"]
    for node in nodes.values():
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    assert nodes["cozyrender-node"]["status"]["allocatable"][GPU] == "4"
    assert GPU not in nodes["cozyrender-node-2"]["status"]["allocatable"]
    # Each kubelet serves at its own bridge address.
    addresses = {name: [a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"]
                 for name, n in nodes.items()}
    assert addresses == {plane.node.name: [plane.node.gateway], plane.extra_nodes[0].name: [plane.extra_nodes[0].gateway]}
    # The second kubelet's device manager, which deletes every socket in its device-plugin folder on
    # start, had a private folder (its mount namespace): the first node's sockets are still there.
    host = Path("/var/lib/kubelet/device-plugins")
    assert (host / "kubelet.sock").is_socket() and list(host.glob("cozyrender-*.sock")), list(host.iterdir())
    assert [p.name for p in (plane.extra_nodes[0].dir / "device-plugins").iterdir()] == ["kubelet.sock"]


def spread(plane) -> bool:
    """The two replicas on the two nodes. The chart's anti-affinity is preferred; where the scheduler
    still put both on one node, that node is cordoned and one replica deleted, so the ReplicaSet's
    new one lands on the other (the PodDisruptionBudget keeps one serving meanwhile). Returns whether
    the scheduler had spread them itself."""
    wait_for("the Deployment settled", lambda: deployment_settled(plane))
    placed = nodes_of(plane)
    if len(set(placed.values())) == 2:
        return True
    crowded = next(iter(placed.values()))
    plane.kubectl("cordon", crowded)
    try:
        plane.kubectl("-n", NAMESPACE, "delete", "pod", next(iter(placed)))
        wait_for("the Deployment settled over both nodes",
                 lambda: deployment_settled(plane) and len(set(nodes_of(plane).values())) == 2)
    finally:
        plane.kubectl("uncordon", crowded)
    return False


def test_a_node_drained_during_writes_refuses_no_fitting_write(plane, api, record_property):
    record_property("spread_by_scheduler", spread(plane))
    namespace = test_webhook_live.make_tenant(api, "drain", {A100: 4})
    wait_cached_tenant(plane, namespace)
    done = threading.Event()
    answers, threads = _churn(plane, namespace, done)
    try:
        victim = _busiest(plane, webhook_pods(plane), 2)
        drained = victim["spec"]["nodeName"]
        started = time.monotonic()
        drain = plane.kubectl("drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s",
                              check=False, timeout=320)
        record_property("drain_s", round(time.monotonic() - started, 1))
        record_property("drained", drained)
        try:
            wait_for("the Deployment settled on the other node", lambda: deployment_settled(plane))
            placed = nodes_of(plane)
            time.sleep(3)
        finally:
            plane.kubectl("uncordon", drained)
    finally:
        done.set()
        for thread in threads:
            thread.join(30)
    assert drain.returncode == 0 and f"node/{drained} drained" in drain.stdout, (drain.stdout, drain.stderr)
    assert f"pod/{victim['metadata']['name']} evicted" in drain.stdout, drain.stdout
    assert victim["metadata"]["name"] not in placed and drained not in placed.values(), placed
    refused = [(name, status, message) for _, name, status, message in answers if status != 201]
    record_property("writes", len(answers))
    assert len(answers) > 20, answers  # the writes kept coming through the drain
    assert refused == [], refused
