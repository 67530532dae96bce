"""One leader at a time (issue 34 item 6), cozyrender.controllers.lease
against a real kube-apiserver: every renewal attempt is bounded by the
renew deadline even when the API server never answers; a leader may act
(`holds`) only while its last renewal started less than the renew deadline
ago, so a replica paused past it (SIGSTOP, a frozen VM) writes nothing on
resuming: its controllers' client (`Fenced`) refuses every write, reads
pass. (The processes themselves, killed and stopped:
test_controller_status_live.py.)"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import yaml

from cozyrender.controllers.lease import Fenced, LeaderElector, NotLeader
from cozyrender.kube.client import make_client

NAMESPACE = "cozyrender-system"


def elector(client, name: str, identity: str) -> LeaderElector:
    return LeaderElector(client, NAMESPACE, name, identity, lease_duration=4, renew_deadline=3, retry_period=0.5)


def test_a_leader_past_its_renew_deadline_no_longer_holds_and_its_writes_are_refused(apiserver) -> None:
    client = make_client(str(apiserver.kubeconfig))
    leader = elector(client, "fence-test", "a")
    assert leader._attempt() and not leader.holds()  # won, but not leading until run() says so
    leader.leading.set()
    assert leader.holds()
    fenced = Fenced(client, leader.holds)
    from lightkube.resources.core_v1 import ConfigMap
    from lightkube.models.meta_v1 import ObjectMeta

    fenced.create(ConfigMap(metadata=ObjectMeta(name="fence-1", namespace=NAMESPACE), data={"a": "1"}))
    leader._renewed_at -= 3.01  # as if the process had been paused past its renew deadline
    assert not leader.holds()
    with pytest.raises(NotLeader, match="no longer holds the lease in time"):
        fenced.create(ConfigMap(metadata=ObjectMeta(name="fence-2", namespace=NAMESPACE), data={"a": "2"}))
    with pytest.raises(NotLeader):
        fenced.delete(ConfigMap, "fence-1", namespace=NAMESPACE)
    assert fenced.get(ConfigMap, "fence-1", namespace=NAMESPACE).data == {"a": "1"}  # reads pass
    names = {c.metadata.name for c in client.list(ConfigMap, namespace=NAMESPACE)}
    assert "fence-1" in names and "fence-2" not in names
    client.delete(ConfigMap, "fence-1", namespace=NAMESPACE)


def test_a_resumed_leader_stops_at_its_next_round_without_writing_the_lease(apiserver) -> None:
    from lightkube.resources.coordination_v1 import Lease

    client = make_client(str(apiserver.kubeconfig))
    leader = elector(client, "pause-test", "first")
    assert leader._attempt()
    leader.leading.set()
    assert leader.keeps_leading()  # a renewal in time
    written = client.get(Lease, "pause-test", namespace=NAMESPACE).metadata.resourceVersion
    leader._renewed_at -= 3.01  # paused past its renew deadline, then resumed
    assert leader.keeps_leading() is False
    assert client.get(Lease, "pause-test", namespace=NAMESPACE).metadata.resourceVersion == written


def test_each_request_of_an_attempt_waits_at_most_until_the_renew_deadline(tmp_path) -> None:
    """An API server that accepts connections and never answers: the
    attempt ends when its deadline comes, not after the client's own
    timeout (an hour here)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(silent.accept()[0]) for _ in range(8)], daemon=True).start()
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{silent.getsockname()[1]}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    hung = elector(make_client(str(config), timeout=3600), "hung", "a")
    outcome: list = []

    def attempt() -> None:
        try:
            outcome.append(hung.try_acquire_or_renew(until=time.monotonic() + 0.5))
        except Exception as err:  # noqa: BLE001 - what the attempt raised is the outcome
            outcome.append(err)

    runner = threading.Thread(target=attempt, daemon=True)
    runner.start()
    runner.join(60)  # a liveness bound for a loaded machine, far below the client's hour
    try:
        assert not runner.is_alive(), "the attempt outlived its deadline"
        [raised] = outcome
        assert isinstance(raised, Exception) and "did not answer" in str(raised)
        # And the loop's attempt, as a leader whose renew deadline is near, is a failed attempt.
        hung._renewed_at = time.monotonic() - 2.7
        hung.leading.set()
        assert hung._attempt() is False
        assert not hung.holds()
    finally:
        silent.close()
        for conn in held:
            conn.close()
