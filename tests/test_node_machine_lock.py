"""One test node per machine (tools/controlplane/node.py): a second node is refused
while another's state is on the machine, naming it and how to stop it; a node whose
state was cleaned up (`cleanup` calls `release_machine`) leaves the machine free."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools" / "controlplane"))
import node  # noqa: E402


def a_node(folder: Path) -> node.Node:
    claimed = node.Node.__new__(node.Node)
    claimed.dir = folder / "node"
    return claimed


def test_a_second_node_is_refused_until_the_first_is_cleaned_up(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "MACHINE_LOCK", tmp_path / "lock")
    monkeypatch.setattr(node, "MACHINE_WAIT", 0.0)
    first, second = a_node(tmp_path / "one"), a_node(tmp_path / "two")
    first._claim_machine()
    first.dir.mkdir(parents=True)
    (first.dir / "node.json").write_text("{}")
    with pytest.raises(node.NodeError, match=r"already on this machine.*cluster.py down --dir .*one"):
        second._claim_machine()
    first._claim_machine()  # the same node again (a restart in its own folder) is fine
    node.release_machine(tmp_path / "two")  # not the holder: the lock stays
    assert (tmp_path / "lock").read_text().strip() == str(first.dir)
    node.release_machine(tmp_path / "one")  # what cleanup does first
    assert not (tmp_path / "lock").exists()
    second._claim_machine()
    assert (tmp_path / "lock").read_text().strip() == str(second.dir)


def test_a_lock_naming_a_node_with_no_state_is_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "MACHINE_LOCK", tmp_path / "lock")
    (tmp_path / "lock").write_text(str(tmp_path / "gone" / "node") + "\n")
    a_node(tmp_path / "new")._claim_machine()
    assert (tmp_path / "lock").read_text().strip() == str(tmp_path / "new" / "node")


def test_a_second_node_waits_for_the_first_to_go(tmp_path, monkeypatch):
    """Another run's node on the machine (a developer's cluster, a second test run): the claim
    waits for it, up to MACHINE_WAIT seconds, instead of failing at once."""
    import threading

    monkeypatch.setattr(node, "MACHINE_LOCK", tmp_path / "lock")
    monkeypatch.setattr(node, "MACHINE_WAIT", 60.0)
    first, second = a_node(tmp_path / "one"), a_node(tmp_path / "two")
    first._claim_machine()
    first.dir.mkdir(parents=True)
    (first.dir / "node.json").write_text("{}")
    releaser = threading.Timer(1.0, node.release_machine, args=(tmp_path / "one",))
    releaser.start()
    second._claim_machine()
    releaser.join()
    assert (tmp_path / "lock").read_text().strip() == str(second.dir)
