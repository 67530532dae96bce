"""The controllers' pieces without a cluster: the watch helper's store (a
relist changes the handlers' view only where the cluster changed), the
coalescing queue, the metrics' text format (read back with
prometheus_client's own parser) and `cozyrender controller`'s bad input
(one line, exit 2)."""

from __future__ import annotations

import subprocess
import sys
import threading

from prometheus_client.parser import text_string_to_metric_families

from cozyrender.controllers.metrics import budget_samples, render
from cozyrender.kube.client import Watched
from cozyrender.kube.watch import CoalescingQueue, Informer

POD = Watched("", "v1", "Pod", "pods", True)


def obj(name: str, version: str, value: int = 0, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}, "spec": {"v": value}}


def recording_informer(transform=None):
    heard = []
    informer = Informer(lambda: None, POD, lambda event, new, old: heard.append(
        (event, (new or old)["metadata"]["name"])), transform=transform)
    return informer, heard


def test_a_relist_reports_only_what_changed():
    small = (lambda o: {"metadata": {"name": o["metadata"]["name"], "namespace": "ns"}, "v": o["spec"]["v"]})
    informer, heard = recording_informer(small)
    informer.replace([obj("a", "1"), obj("b", "1"), obj("c", "1", 5)])
    assert heard == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
    heard.clear()
    # b gone, c changed, a touched in a field the transform drops (a new resourceVersion), d new.
    informer.replace([obj("a", "2"), obj("c", "2", 6), obj("d", "2")])
    assert sorted(heard) == [("ADDED", "d"), ("DELETED", "b"), ("MODIFIED", "c")]
    assert set(informer.store) == {("ns", "a"), ("ns", "c"), ("ns", "d")}


def test_a_transform_returning_none_keeps_an_object_out():
    informer, heard = recording_informer(lambda o: o if o["spec"]["v"] else None)
    informer.apply("ADDED", obj("a", "1", 0))
    assert heard == [] and not informer.store
    informer.apply("MODIFIED", obj("a", "2", 1))
    informer.apply("MODIFIED", obj("a", "3", 0))  # no longer kept: a DELETED downstream
    assert heard == [("ADDED", "a"), ("DELETED", "a")] and not informer.store


def test_a_failing_handler_does_not_stop_the_store():
    informer = Informer(lambda: None, POD, lambda *args: 1 / 0)
    informer.apply("ADDED", obj("a", "1"))
    assert ("ns", "a") in informer.store


def test_the_queue_coalesces_a_burst():
    queue = CoalescingQueue()
    for _ in range(1000):
        queue.add("a100", "l4")
    assert queue.take(timeout=1) == {"a100", "l4"}
    assert queue.take(timeout=0.01) == set()
    threading.Timer(0.05, queue.add, args=("late",)).start()
    assert queue.take(timeout=5) == {"late"}


def test_the_text_format_reads_back_with_prometheus_own_parser():
    text = render([
        ("cozyrender_controller_leader", {}, 1.0),
        ("cozyrender_tenant_budget", {"namespace": "tenant-a", "tenant": "a", "key": "memory", "quota_key": "memory",
                                      "key_type": "ordinary", "type": "hard"}, 137438953472.0),
        ("cozyrender_tenant_budget", {"namespace": "tenant-a", "tenant": 'we"ird\\', "key": "cpu",
                                      "quota_key": "cpu", "key_type": "ordinary", "type": "left"}, -0.5),
        ("cozyrender_gpuclass_status_writes_total", {}, 3.0),
    ]).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    budget = families["cozyrender_tenant_budget"]
    assert budget.type == "gauge"
    values = {(s.labels["key"], s.labels["type"], s.labels["tenant"]): s.value for s in budget.samples}
    assert values == {("memory", "hard", "a"): 137438953472.0, ("cpu", "left", 'we"ird\\'): -0.5}
    assert families["cozyrender_gpuclass_status_writes"].type == "counter"
    assert families["cozyrender_controller_leader"].samples[0].value == 1.0


def test_budget_samples_carry_every_side_of_every_key():
    from cozyrender.budgets import audit, index_state
    from cozyrender.state import load_objects
    from cozyrender.tree import build_tree
    from tests.conftest import ROOT

    state = index_state(load_objects([ROOT / "examples" / "budgets" / "state"]))
    tree = build_tree(state, audit(state))
    samples = budget_samples(tree)
    rows = [(node.namespace, row) for node in tree.shown() for row in node.keys]
    budgets = [s for s in samples if s[0] == "cozyrender_tenant_budget"]
    assert len(budgets) == 4 * len(rows) and rows
    by_key = {(s[1]["namespace"], s[1]["key"], s[1]["type"]): s[2] for s in budgets}
    for namespace, row in rows:
        assert by_key[(namespace, row.key, "left")] == float(row.left)
        assert by_key[(namespace, row.key, "hard")] == float(row.budget)


def _controller(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cozyrender", "controller", *args], capture_output=True, text=True,
                          timeout=60)


def test_bad_input_is_one_line_and_exit_2():
    for args, words in (
        (["--controllers", "status,typo"], "--controllers 'status,typo': expected a comma-separated list of status, "
                                           "licenses, metrics"),
        (["--lease-duration", "5", "--renew-deadline", "10"], "--lease-duration (5) > --renew-deadline (10) > "
                                                               "--retry-period (2) is required"),
        (["--listen", "nowhere"], "--listen nowhere: expected HOST:PORT"),
        (["--retry-period", "0"], "is not a number of seconds from 0.2 to 60"),
        (["--ready-contact", "2"], "--ready-contact (2) > --retry-period (2) is required"),
    ):
        result = _controller(*args)
        assert result.returncode == 2 and result.stdout == "", (args, result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr, (args, lines)
