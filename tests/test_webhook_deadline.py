"""Every decision inside the API server's deadline (issue 34 item 2):
cozyrender.webhook.deadline, and the ledger's decisions under it: a ledger
slower than the time left refuses saying why and leaves no entry behind; a
request refused or answered too late has its entries released at once; a
turn on a shard, a ledger call and a lookup wait at most the time left; the
server gives each request its deadline. And the restart of issue 34: a
replica whose cache listed after a write was decided does not count an
entry whose object its list does not show. (In-memory shards with the
ConfigMaps' compare-and-swap; the ConfigMaps themselves:
test_webhook_ledger_live.py.)"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
from pathlib import Path

from test_budgets_builders import classes, tenant, vm
from test_webhook_admission import A100, review
from webhook_certs import make_certs

from cozyrender.budgets.live import LiveIndex
from cozyrender.webhook import deadline as deadlines
from cozyrender.webhook.ledger import Arbiter, Conflict, LedgerError, MemoryShards
from cozyrender.webhook.metrics import Metrics
from cozyrender.webhook.server import serve, tls_context

STATE = classes("a100") + [tenant("acme", quotas={A100: 8}), tenant("team", "tenant-acme", quotas={A100: 4})]


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Slow(MemoryShards):
    """In-memory shards where chosen calls take time (`ticks` moved by
    `cost` seconds), fail or conflict, and which remember the timeout
    each call was given."""

    def __init__(self, ticks: Ticks) -> None:
        super().__init__()
        self.ticks = ticks
        self.cost: dict[tuple[str, str], float] = {}  # (operation, shard) -> seconds it takes
        self.fail: set[tuple[str, str]] = set()  # (operation, shard) that time out after storing (writes)
        self.conflicts: dict[str, int] = {}  # shard -> 409s still to answer to writes
        self.timeouts: list[float | None] = []

    def read(self, shard, timeout=None):
        self.timeouts.append(timeout)
        self.ticks.now += self.cost.get(("read", shard), 0.0)
        return super().read(shard, timeout)

    def write(self, shard, entries, read, timeout=None):
        self.timeouts.append(timeout)
        if self.conflicts.get(shard):
            self.conflicts[shard] -= 1
            raise Conflict()
        self.ticks.now += self.cost.get(("write", shard), 0.0)
        super().write(shard, entries, read, timeout)
        if ("write", shard) in self.fail:
            self.fail.discard(("write", shard))
            raise LedgerError("the ledger's API server did not answer in the 0.5 s left")


def judge(store, ticks: Ticks, **options) -> Arbiter:
    return Arbiter(LiveIndex(STATE), threading.Lock(), Metrics(), ledger=store, monotonic=ticks,
                   release_in_background=False, **options)


def answer(arbiter: Arbiter, obj: dict) -> dict:
    return arbiter(review(obj))["response"]


TEAM_VM = vm("tenant-acme-team", "v", [{"class": "a100", "count": 1}])  # shards tenant-acme, tenant-acme-team


def test_the_margin_and_the_time_left() -> None:
    assert deadlines.margin(10) == 1.5 and deadlines.margin(2) == 0.5
    ticks = Ticks()
    limit = deadlines.Deadline.after(10, clock=ticks)
    assert limit.remaining() == 8.5 and not limit.expired()
    ticks.now += 9
    assert limit.remaining() == 0 and limit.expired()
    assert "10 s, less 1.5 s" in limit.said()


def test_ledger_calls_carry_the_time_left() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    store.cost[("read", "tenant-acme")] = 3.0
    assert answer(judge(store, ticks), TEAM_VM)["allowed"]
    # Two reads then two writes: each given what remained of the 8.5 s when it started.
    assert store.timeouts == [8.5, 5.5, 5.5, 5.5]


def test_a_ledger_slower_than_the_deadline_refuses_and_writes_nothing() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    store.cost[("read", "tenant-acme-team")] = 9.0  # the second read ends past the deadline
    out = answer(judge(store, ticks), TEAM_VM)
    assert out["allowed"] is False and out["status"]["code"] == 500
    assert "was not decided within the API server's timeout for this webhook (10 s" in out["status"]["message"]
    assert "nothing was reserved" in out["status"]["message"]
    assert re.search(r"\(\d+\.\d\d s since it arrived; reads 9\.\d\d s\)", out["status"]["message"]), out
    assert store.entries() == [] and store.writes == 0


def test_a_decision_answered_too_late_releases_what_it_wrote_at_once() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    store.cost[("write", "tenant-acme-team")] = 9.0  # stored, but after the API server gave up
    out = answer(judge(store, ticks), TEAM_VM)
    assert out["allowed"] is False and "was not decided within" in out["status"]["message"]
    assert store.entries() == []  # both shards written, both released


def test_a_write_that_fails_midway_releases_the_shards_it_may_have_written() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    store.fail.add(("write", "tenant-acme-team"))  # stored, but the answer never came
    out = answer(judge(store, ticks), TEAM_VM)
    assert out["allowed"] is False and "did not answer" in out["status"]["message"]
    assert store.entries() == []


def test_a_deadline_passing_in_409_retries_refuses_and_releases() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    store.conflicts["tenant-acme-team"] = 10**6  # another replica keeps winning the lower shard
    store.cost[("write", "tenant-acme")] = 1.0  # each round writes the upper shard first
    out = answer(judge(store, ticks), TEAM_VM)
    assert out["allowed"] is False and "was not decided within" in out["status"]["message"]
    assert store.entries() == []  # the upper shard's entry, written each round, is gone


def test_a_refusal_after_a_409_releases_the_entry_of_the_earlier_round() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    arbiter = judge(store, ticks)
    store.conflicts["tenant-acme-team"] = 1
    original = store.write

    def write(shard, entries, read, timeout=None):
        if shard == "tenant-acme-team" and store.conflicts.get(shard):
            # This round loses: another write took the team's whole budget meanwhile.
            arbiter.index.upsert(vm("tenant-acme-team", "big", [{"class": "a100", "count": 4}]))
        return original(shard, entries, read, timeout)

    store.write = write
    out = answer(arbiter, TEAM_VM)
    assert out["allowed"] is False and out["status"]["code"] == 403
    assert store.entries() == []


def test_a_turn_held_past_the_deadline_refuses_without_writing() -> None:
    ticks = Ticks()
    store = Slow(ticks)
    arbiter = judge(store, ticks, timeout=0.4)  # 0.3 s to wait for a turn, on the real clock
    arbiter.monotonic = __import__("time").monotonic
    with arbiter._turn("tenant-acme", deadlines.Deadline.after(10)) as got:
        assert got
        out = answer(arbiter, TEAM_VM)
    assert out["allowed"] is False and "held this replica's turn" in out["status"]["message"]
    assert store.entries() == []


def test_no_lookup_is_made_without_the_time_it_needs() -> None:
    ticks, lookups = Ticks(), []
    store = Slow(ticks)
    wall = [1000.0]
    first = judge(store, ticks, clock=lambda: wall[0], lookup=lambda identity: lookups.append(identity))
    assert answer(first, vm("tenant-acme-team", "a", [{"class": "a100", "count": 4}]))["allowed"]
    wall[0] += 60  # long settled: an entry to look up
    store.cost[("read", "tenant-acme")] = 7.0  # 1.5 s left: less than a lookup may take
    assert answer(first, vm("tenant-acme-team", "b", [{"class": "a100", "count": 1}]))["allowed"] is False
    assert lookups == []


def test_a_replica_listed_after_a_write_was_decided_does_not_count_it_unless_its_list_shows_it() -> None:
    """The restart of issue 34: entries of objects created and deleted before
    this replica's cache listed them are not counted; one its list shows is
    counted once, as the stored object."""
    ticks, store = Ticks(), Slow(Ticks())
    wall = [1000.0]
    old_replica = judge(store, ticks, clock=lambda: wall[0])
    for name in ("gone1", "gone2", "kept"):
        one = vm("tenant-acme-team", name, [{"class": "a100", "count": 1}])
        one["metadata"].update(uid=f"u-{name}", generation=1)
        assert answer(old_replica, one)["allowed"]
    wall[0] += 20  # gone1 and gone2 created and deleted, kept stored; then a new replica lists
    listed = {"VMInstance": 1015.0}
    stored = vm("tenant-acme-team", "kept", [{"class": "a100", "count": 1}])
    stored["metadata"].update(uid="u-kept", generation=1)
    new = Arbiter(LiveIndex(STATE + [stored]), threading.Lock(), Metrics(), ledger=store, monotonic=ticks,
                  clock=lambda: wall[0], known_since=listed.get, release_in_background=False,
                  seen=lambda uid, generation: uid == "u-kept")
    fits = vm("tenant-acme-team", "next", [{"class": "a100", "count": 3}])
    assert answer(new, fits)["allowed"]  # 1 stored + 3: the two deleted ones no longer count
    assert not answer(new, vm("tenant-acme-team", "more", [{"class": "a100", "count": 1}]))["allowed"]
    # A write decided less than `settle` before the list may have been stored after it: still counted.
    listed["VMInstance"] = wall[0] - 5
    late = vm("tenant-acme", "late", [{"class": "a100", "count": 4}])
    late["metadata"].update(uid="u-late", generation=1)
    assert answer(new, late)["allowed"]
    assert not answer(new, vm("tenant-acme", "after", [{"class": "a100", "count": 1}]))["allowed"]


def test_the_server_gives_each_request_its_deadline(tmp_path: Path) -> None:
    files = make_certs(tmp_path)
    seen: list = []

    def route(body):
        limit = deadlines.current()
        seen.append((limit.timeout, limit.remaining()))
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": body["request"]["uid"], "allowed": True}}

    server = serve(("127.0.0.1", 0), tls_context(str(files["cert"]), str(files["key"])), {"/validate": route},
                   lambda: True, Metrics(), timeout=4)
    thread = server.serve_in_thread()
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port,
                                           context=ssl.create_default_context(cafile=str(files["ca"])), timeout=10)
        conn.request("POST", "/validate", json.dumps(review(TEAM_VM, uid="d-1")).encode(),
                     {"Content-Type": "application/json"})
        assert json.loads(conn.getresponse().read())["response"]["allowed"] is True
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    [(timeout, remaining)] = seen
    assert timeout == 4 and 0 < remaining <= 4 - deadlines.margin(4)
    assert deadlines.current() is None  # set for the request only


def test_a_replica_started_during_a_create_and_delete_loop_admits_the_next_fitting_create() -> None:
    """Issue 34's rollout: a tenant's automation creates a 1-device VM and
    deletes the previous one every 0.3 s (budget 4). A replica that started
    in the middle never saw the last ten seconds' VMs created and deleted;
    the replica that did stamped their entries as seen when it next wrote
    the shard, and the new replica's list came after: it counts none of
    them, and the next create fits."""
    ticks, store, wall = Ticks(), MemoryShards(), [1000.0]
    state = classes("a100") + [tenant("acme", quotas={A100: 4})]
    seen_a: dict[str, float] = {}
    old = Arbiter(LiveIndex(state), threading.Lock(), Metrics(), ledger=store, monotonic=ticks,
                  clock=lambda: wall[0], release_in_background=False,
                  seen=lambda uid, generation: uid in seen_a)
    previous = None
    for i in range(40):
        one = vm("tenant-acme", f"vm-{i}", [{"class": "a100", "count": 1}])
        one["metadata"].update(uid=f"u{i}", generation=1)
        assert answer(old, one)["allowed"], i
        old.index.upsert(one)  # stored; the old replica's watch shows it
        seen_a[f"u{i}"] = 1
        if previous is not None:
            old.index.remove(previous)  # the previous one deleted, and seen deleted
        previous = one
        wall[0] += 0.3
    listed = {"VMInstance": wall[0]}  # a new replica lists now: it holds vm-39 only
    new = Arbiter(LiveIndex(state + [previous]), threading.Lock(), Metrics(), ledger=store, monotonic=ticks,
                  clock=lambda: wall[0], known_since=listed.get, release_in_background=False,
                  seen=lambda uid, generation: uid == "u39")
    nxt = vm("tenant-acme", "vm-40", [{"class": "a100", "count": 1}])
    nxt["metadata"].update(uid="u40", generation=1)
    out = answer(new, nxt)
    assert out["allowed"], out.get("status")
    # ... and room is still counted: vm-39 stored, vm-40 pending, so 3 more do not fit.
    assert not answer(new, vm("tenant-acme", "big", [{"class": "a100", "count": 3}]))["allowed"]
