"""The ledger's pure parts (cozyrender.webhook.ledger): what grows, the entry
format, and the overlay: reservations laid over the watched view through
LiveIndex upsert/remove, decided by check_write on that view, and reverted
after, so the index is left exactly as the watch made it; the sharded
ledger through an in-memory store with the same compare-and-swap: which
shards a write takes, entries holding only what the rules read, per-tenant
shares, pending writes that only ever take room, and the property that the
stored state never over-commits across writes admitted but never stored.
(The ConfigMap shards against the API server: test_webhook_live.py and
test_webhook_ledger_live.py.)"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
import json

from test_budgets_builders import classes, nodes, tenant, vm
from test_budgets_properties import GPUCLASSES, _identity, _materialize, random_state, writes
from test_webhook_admission import A100, review

from cozyrender.budgets import check_write, index_state
from cozyrender.budgets.live import LiveIndex
from cozyrender.webhook import admission
from cozyrender.webhook.ledger import Arbiter, Entry, decode, encode, grows, identity, projection
from cozyrender.webhook.metrics import Metrics

STATE = classes("a100") + [tenant("acme", quotas={A100: 4}), vm("tenant-acme", "vm1", [{"class": "a100", "count": 2}])]


def arbiter(objects, **options) -> Arbiter:
    return Arbiter(LiveIndex(objects), threading.Lock(), Metrics(), **options)


def entry_for(obj: dict, uid: str = "", generation: int = 1, expires: float = 1e12) -> Entry:
    return Entry(identity(obj), uid, generation, projection(obj), 0.0, expires)


def snapshot(index: LiveIndex) -> dict:
    return {identity(o): o for o in index.objects()}


def test_what_grows() -> None:
    small, big = vm("tenant-acme", "v", [{"class": "a100", "count": 1}]), vm("tenant-acme", "v", [{"class": "a100", "count": 2}])
    assert grows(small, None) and grows(big, small) and not grows(small, big) and not grows(small, small)
    assert not grows(vm("tenant-acme", "v", []), None)
    pool = nodes("tenant-acme", "p", [{"class": "a100"}], max_replicas=2)
    assert grows(nodes("tenant-acme", "p", [{"class": "a100"}], max_replicas=3), pool)
    assert not grows(nodes("tenant-acme", "p", [{"class": "a100"}], max_replicas=1), pool)
    before = tenant("t", quotas={A100: 2})
    assert grows(tenant("t", quotas={A100: 3}), before) and grows(tenant("t", quotas={A100: 1}), before)
    assert not grows(tenant("t", quotas={A100: 2}, vgpu=True), before)
    assert grows(before, None) and not grows(tenant("t"), None)


def test_entries_round_trip() -> None:
    entries = [entry_for(vm("tenant-acme", "v", [{"class": "a100"}]), "uid-1", 3), entry_for(tenant("t", quotas={A100: 1}))]
    assert decode(encode(entries)) == entries
    assert decode("") == [] and decode(None) == []
    with pytest.raises(Exception, match="cannot be read"):
        decode("{broken")


def test_a_reservation_in_view_refuses_what_would_not_fit_beside_it() -> None:
    judge = arbiter(STATE)
    write = vm("tenant-acme", "vm2", [{"class": "a100", "count": 2}])
    request = admission.read_review(review(write))
    assert judge._check(request, write, None, []).allowed
    pending = entry_for(vm("tenant-acme", "other", [{"class": "a100", "count": 1}]), "u-other")
    decision = judge._check(request, write, None, [pending])
    assert not decision.allowed and "reserved 3" in decision.reasons[0].message


def test_the_overlay_is_reverted_whatever_happens() -> None:
    judge = arbiter(STATE)
    before = snapshot(judge.index)
    pending = [entry_for(vm("tenant-acme", "vm1", [{"class": "a100", "count": 4}])),  # replaces a watched object
               entry_for(vm("tenant-acme", "new", [{"class": "a100"}]))]  # adds one
    write = vm("tenant-acme", "vm1", [{"class": "a100", "count": 3}])
    old = vm("tenant-acme", "vm1", [{"class": "a100", "count": 1}])  # the stored object the watch has not seen
    judge._check(admission.read_review(review(write, "UPDATE", old)), write, old, pending)
    assert snapshot(judge.index) == before
    judge._check(admission.read_review(review(vm("tenant-acme", "vm1", []))), vm("tenant-acme", "vm1", []), None, [])
    assert snapshot(judge.index) == before  # a CREATE takes a stale object of its identity away, and puts it back


def test_an_update_is_judged_against_its_old_object() -> None:
    judge = arbiter(STATE)  # the watch still shows vm1 at 2 devices
    old = vm("tenant-acme", "vm1", [{"class": "a100", "count": 4}])  # stored at 4 (the parent since lowered nothing)
    write = vm("tenant-acme", "vm1", [{"class": "a100", "count": 4}], memory="8Gi")
    assert judge._check(admission.read_review(review(write, "UPDATE", old)), write, old, []).allowed
    grown = vm("tenant-acme", "vm1", [{"class": "a100", "count": 5}])
    decision = judge._check(admission.read_review(review(grown, "UPDATE", old)), grown, old, [])
    assert not decision.allowed


def test_entries_the_watch_has_seen_or_that_expired_are_not_counted() -> None:
    seen = {"u-seen": 2}
    judge = arbiter(STATE, seen=lambda uid, generation: seen.get(uid, -1) >= generation)
    fresh = entry_for(vm("tenant-acme", "a", []), "u-seen", 3)
    caught = entry_for(vm("tenant-acme", "b", []), "u-seen", 2)
    assert not judge._caught_up(fresh) and judge._caught_up(caught)
    # Without a uid: caught up once the watched object of that identity has the entry's spec.
    assert judge._caught_up(entry_for(vm("tenant-acme", "vm1", [{"class": "a100", "count": 2}])))
    assert not judge._caught_up(entry_for(vm("tenant-acme", "vm1", [{"class": "a100", "count": 3}])))


def test_without_a_ledger_the_route_answers_as_check() -> None:
    judge = arbiter(STATE)
    state = index_state(STATE)
    for write in (vm("tenant-acme", "x", [{"class": "a100", "count": 2}]), vm("tenant-acme", "x", [{"class": "a100", "count": 3}]),
                  tenant("big", quotas={A100: 9})):
        out = judge(review(write))["response"]
        assert out["allowed"] is check_write(state, write).allowed


def test_unreadable_objects_in_the_cache_refuse_the_checked_writes_of_their_pool() -> None:
    judge = arbiter(STATE, unreadable=lambda: {("Pod", "tenant-acme", "p"): "Pod tenant-acme/p: spec.x is bad"})
    out = judge(review(vm("tenant-acme", "x", [])))["response"]
    assert out["allowed"] is False and "Pod tenant-acme/p (in the namespace of Tenant tenant-root/acme): spec.x is bad" \
        in out["status"]["message"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-acme"}}
    assert judge(review(pod))["response"]["allowed"] is True  # a pod asking for no GPU is never held back


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_state, writes, st.lists(writes, max_size=4))
# A pending sub-tenant declaring only another class's key (its a100 escapes tenant-root's all-classes
# key) while tenant-root, not yet a pool root in the view, is lowered below that a100: found by this test.
@example(objects=[_materialize(("vm", ("b",), 0, [{"class": "a100", "count": 1}]), {})],
         write=("lower", (), "gpuclass.cozystack.io/devices", 0),
         pending=[("tenant", ("b",), {"h100.gpuclass.cozystack.io/devices": 0})])
def test_reservations_only_take_room(objects, write, pending) -> None:
    """Whatever becomes of the pending writes (each stored or never stored),
    a write the overlay admits is one `check` admits on that stored state:
    the reservations laid over the watched view only ever take room. And the
    view is left unchanged."""
    import itertools

    existing = {_identity(o): o for o in objects}
    reserved = {}
    for op in pending:
        obj = _materialize(op, {**existing, **reserved})
        reserved[_identity(obj)] = obj
    obj = _materialize(write, {**existing, **reserved})
    reserved.pop(_identity(obj), None)
    old = existing.get(_identity(obj))
    judge = arbiter(GPUCLASSES + objects)
    before = snapshot(judge.index)
    request = admission.read_review(review(obj, "UPDATE" if old is not None else "CREATE", old))
    try:
        decision = judge._check(request, obj, old, [entry_for(o) for o in reserved.values()])
    except admission.ShapeError:
        return
    assert snapshot(judge.index) == before
    if not decision.allowed:
        return
    for chosen in itertools.product((False, True), repeat=len(reserved)):
        view = dict(existing)
        view.update({key: o for (key, o), stored in zip(reserved.items(), chosen) if stored})
        try:
            state = index_state(GPUCLASSES + list(view.values()))
        except admission.ShapeError:
            continue
        assert check_write(state, obj).allowed, chosen


# -- issue 28 item 1 / item 3, issue 26 item 1: the sharded ledger -------------------------

from cozyrender.webhook.ledger import (  # noqa: E402
    MAX_ENTRY_BYTES,
    MAX_GROUP_ENTRIES,
    MemoryShards,
    effective,
    group_of,
    shard_order,
    shards_of,
)
from test_budgets_properties import naive_violations, parse_declaration  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ledgered(objects, store=None, **options) -> Arbiter:
    return arbiter(objects, ledger=store if store is not None else MemoryShards(), **options)


def allowed(judge: Arbiter, obj: dict, operation: str = "CREATE", old: dict | None = None) -> bool:
    return judge(review(obj, operation, old))["response"]["allowed"]


def test_a_create_of_a_name_the_cache_holds_is_refused_at_once() -> None:
    """Attack 1: re-creating vm1 smaller must not hide the stored vm1 (and writes no entry)."""
    store = MemoryShards()
    judge = ledgered(STATE, store)
    again = judge(review(vm("tenant-acme", "vm1", [{"class": "a100", "count": 1}])))["response"]
    assert again["allowed"] is False and again["status"]["code"] == 409
    assert again["status"]["reason"] == "AlreadyExists" and "already exists" in again["status"]["message"]
    assert store.entries() == []
    # So the stored vm1 (2) still counts: 2 more fit, 3 do not.
    assert not allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 3}]))
    assert allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 2}]))


def test_a_pending_workload_counts_as_the_larger_of_itself_and_what_is_stored() -> None:
    stored = vm("tenant-acme", "vm1", [{"class": "a100", "count": 2}])
    smaller = projection(vm("tenant-acme", "vm1", [{"class": "a100", "count": 1}, {"class": "h100", "count": 3}]))
    larger = effective([smaller], stored, "tenant-acme")
    assert parse_workload_reservations(larger) == {"a100": 2, "h100": 3}
    pool = nodes("tenant-acme", "p", [{"class": "a100", "count": 2}], max_replicas=1)
    wider = projection(nodes("tenant-acme", "p", [{"class": "a100", "count": 1}], max_replicas=3))
    assert parse_workload_reservations(effective([wider], pool, "tenant-acme"))["a100"] >= 3


def parse_workload_reservations(obj: dict) -> dict:
    from cozyrender.budgets.model import parse_workload

    return parse_workload(obj).reservations


def test_a_pending_tenant_takes_room_above_and_raises_nothing_below() -> None:
    stored = tenant("team", "tenant-acme", quotas={A100: 2})
    raised = projection(tenant("team", "tenant-acme", quotas={A100: 4}))
    lowered = projection(tenant("team", "tenant-acme", quotas={A100: 1}))
    quotas = lambda obj: obj["spec"]["resourceQuotas"]  # noqa: E731
    # Seen from outside its subtree (its charge to the parent): the larger.
    assert quotas(effective([raised], stored, "tenant-acme")) == {A100: 4}
    assert quotas(effective([lowered], stored, "tenant-acme-other")) == {A100: 2}
    # Seen from inside (its own budget over its pool): the smaller.
    assert quotas(effective([raised], stored, "tenant-acme-team")) == {A100: 2}
    assert quotas(effective([lowered], stored, "tenant-acme-team-x")) == {A100: 1}


def test_a_pending_budget_increase_does_not_admit_growth_below_it() -> None:
    """Attack 4's mechanism: a pending Tenant raising its budget must not make
    room in its own pool before it is stored."""
    state = classes("a100") + [tenant("acme", quotas={A100: 8}), tenant("team", "tenant-acme", quotas={A100: 2})]
    store = MemoryShards()
    judge = ledgered(state, store)
    raise_ = tenant("team", "tenant-acme", quotas={A100: 6})
    assert allowed(judge, raise_, "UPDATE", state[-1])  # admitted, never stored
    assert not allowed(judge, vm("tenant-acme-team", "big", [{"class": "a100", "count": 5}]))
    # ... while its parent's pool sees it charged: 8 - 6 = 2 left there.
    assert not allowed(judge, vm("tenant-acme", "p", [{"class": "a100", "count": 3}]))
    assert allowed(judge, vm("tenant-acme", "p", [{"class": "a100", "count": 2}]))


def test_a_pending_decrease_takes_room_below_at_once_and_frees_the_parent_only_once_stored() -> None:
    state = classes("a100") + [tenant("acme", quotas={A100: 6}), tenant("team", "tenant-acme", quotas={A100: 4})]
    judge = ledgered(state)
    assert allowed(judge, tenant("team", "tenant-acme", quotas={A100: 1}), "UPDATE", state[-1])
    assert not allowed(judge, vm("tenant-acme-team", "v", [{"class": "a100", "count": 2}]))
    assert not allowed(judge, vm("tenant-acme", "p", [{"class": "a100", "count": 3}]))  # 6 - 4: still charged 4


def test_entries_hold_only_what_the_rules_read() -> None:
    """Attack 3: 921 KB in a field the rules do not read (spec.host: an
    unknown field such as spec.notes is refused by the app's schema first),
    long node group names and unknown fields in a gpus entry never reach the ledger."""
    notes = "x" * 921_000
    big = tenant("team", "tenant-acme", quotas={A100: 1})
    big["spec"]["host"] = notes
    cluster = kubernetes_with_long_names()
    for obj in (big, cluster):
        kept = projection(obj)
        text = json.dumps(kept)
        assert notes not in text and "y" * 100 not in text and "junk" not in text
        assert len(text) < 400
    assert projection(big)["spec"] == {"resourceQuotas": {A100: 1}}
    store = MemoryShards()
    judge = ledgered(STATE, store)
    assert allowed(judge, big)
    assert sorted(store.shards) == ["tenant-acme", "tenant-acme-team"]  # the pool above, and its own
    assert all(entry.size() < 600 and notes[:100] not in encode([entry]) for entry in store.entries())


def kubernetes_with_long_names() -> dict:
    from test_budgets_builders import kubernetes, node_group

    group = node_group([{"class": "a100", "count": 1, "junk": "z" * 5000}], 2)
    return kubernetes("tenant-acme", "k", {"y" * 200: group})


def test_an_entry_is_bounded_and_a_refusal_says_nothing_of_others() -> None:
    store = MemoryShards()
    judge = ledgered(STATE, store)
    many = vm("tenant-acme", "many", [{"class": "a100", "count": 1}] + [{"class": "a100", "count": 0}] * 400)
    out = judge(review(many))["response"]
    assert out["allowed"] is False and f"more than {MAX_ENTRY_BYTES} bytes" in out["status"]["message"]
    assert store.entries() == []


def test_one_tenant_cannot_fill_a_shard_another_tenant_needs() -> None:
    """Attack 3 at scale: a sub-tenant's in-flight writes are capped in every
    shard, so its sibling's write in the shared pool is still decided."""
    state = classes("a100") + [tenant("acme", quotas={A100: 1000}), tenant("bad", "tenant-acme"),
                               tenant("good", "tenant-acme")]
    store = MemoryShards()
    judge = ledgered(state, store)
    refusals = []
    for index in range(MAX_GROUP_ENTRIES + 5):
        out = judge(review(vm("tenant-acme-bad", f"v{index}", [{"class": "a100", "count": 1}])))["response"]
        if not out["allowed"]:
            refusals.append(out["status"]["message"])
    assert len(refusals) == 5 and all("too many writes of tenant-acme-bad are in flight" in m for m in refusals)
    assert not any("bytes" in m or "entries" in m or "reserved" in m for m in refusals)
    assert allowed(judge, vm("tenant-acme-good", "v", [{"class": "a100", "count": 1}]))
    assert allowed(judge, vm("tenant-acme", "own", [{"class": "a100", "count": 1}]))


def test_shards_follow_the_chain_of_pool_roots() -> None:
    state = index_state(classes("a100") + [
        tenant("acme", quotas={A100: 8}), tenant("team", "tenant-acme", quotas={A100: 2}),
        tenant("free", "tenant-acme"), tenant("other", quotas={A100: 4}), tenant("loose")])
    at = lambda namespace: shards_of(state, vm(namespace, "v", [{"class": "a100"}]), None)  # noqa: E731
    assert at("tenant-acme-team") == {"tenant-acme-team", "tenant-acme"}
    assert at("tenant-acme-free") == at("tenant-acme") == {"tenant-acme"}
    assert at("tenant-other") == {"tenant-other"}  # independent of acme's: disjoint shards
    assert at("tenant-loose-x") == {"tenant-root"}  # in no pool: where a pool appearing above meets it
    assert at("kube-system") == set()
    # A Tenant: the pool above it, and its own while it declares keys.
    assert shards_of(state, tenant("new", "tenant-acme-free", quotas={A100: 1}), None) == \
        {"tenant-acme-free-new", "tenant-acme"}
    assert shards_of(state, tenant("new", "tenant-loose", quotas={A100: 1}), None) == \
        {"tenant-loose-new", "tenant-root"}
    assert sorted(["tenant-acme-team", "tenant-acme", "tenant-b"], key=shard_order) == \
        ["tenant-acme", "tenant-b", "tenant-acme-team"]
    assert group_of("tenant-acme", "tenant-acme-team-x") == "tenant-acme-team"
    assert group_of("tenant-acme", "tenant-acme") == "tenant-acme"


def test_independent_pools_never_touch_the_same_shard() -> None:
    state = classes("a100") + [tenant(f"p{i}", quotas={A100: 2}) for i in range(4)]
    store = MemoryShards()
    judge = ledgered(state, store)
    for i in range(4):
        assert allowed(judge, vm(f"tenant-p{i}", "v", [{"class": "a100", "count": 2}]))
    assert sorted(store.shards) == [f"tenant-p{i}" for i in range(4)]
    assert all(len(decode(text)) == 1 for _, text in store.shards.values())


def test_a_reservation_known_never_stored_is_released_after_settle() -> None:
    clock = Clock()
    stored: dict = {}
    store = MemoryShards()
    judge = ledgered(STATE, store, clock=clock, lookup=stored.get, settle=5)
    write = vm("tenant-acme", "v2", [{"class": "a100", "count": 2}])
    write["metadata"]["uid"] = "u2"
    assert allowed(judge, write)  # and never stored (a later plugin refused it)
    other = vm("tenant-acme", "v3", [{"class": "a100", "count": 2}])
    assert not allowed(judge, other)  # the room is held ...
    clock.now += 6
    assert allowed(judge, other)  # ... until the API server shows it was never stored
    assert [e.identity[3] for e in store.entries()] == ["v3"]


def test_a_reservation_stored_but_unseen_is_kept_after_settle() -> None:
    clock = Clock()
    stored: dict = {}
    seen: dict[str, int] = {}
    judge = ledgered(STATE, clock=clock, settle=5, lookup=stored.get,
                     seen=lambda uid, generation: seen.get(uid, -1) >= generation)
    write = vm("tenant-acme", "v2", [{"class": "a100", "count": 2}])
    write["metadata"].update(uid="u2", generation=1)
    assert allowed(judge, write)
    stored[identity(write)] = write  # stored; this replica's watch lags
    clock.now += 6
    assert not allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 1}]))
    clock.now += 60  # past the TTL: age alone never releases what may be stored (issue 34 item 5)
    assert not allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 1}]))
    seen["u2"] = 1  # the watch shows it: now it counts as stored, and once only
    judge.index.upsert(write)
    assert not allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 1}]))
    judge.index.remove(write)  # deleted
    assert allowed(judge, vm("tenant-acme", "v3", [{"class": "a100", "count": 1}]))


def test_contended_shards_are_retried_in_order_and_both_writes_decided() -> None:
    """Two replicas, one shared pool root above two pools: threads racing
    through a store that conflicts admit exactly what fits."""
    state = classes("a100") + [tenant("acme", quotas={A100: 6}), tenant("a", "tenant-acme", quotas={A100: 4}),
                               tenant("b", "tenant-acme", quotas={A100: 2})]
    store = MemoryShards()
    judges = [ledgered(state, store), ledgered(state, store)]
    writes_ = [(judges[i % 2], vm(ns, f"v{i}", [{"class": "a100", "count": 1}]))
               for i, ns in enumerate(["tenant-acme-a"] * 6 + ["tenant-acme-b"] * 4 + ["tenant-acme"] * 3)]
    barrier = threading.Barrier(len(writes_))
    results = []

    def go(pair):
        judge, obj = pair
        barrier.wait()
        results.append((obj["metadata"]["namespace"], judge(review(obj))["response"]["allowed"]))

    threads = [threading.Thread(target=go, args=(pair,)) for pair in writes_]
    [t.start() for t in threads]
    [t.join() for t in threads]
    admitted = {ns: sum(1 for n, ok in results if n == ns and ok) for ns in ("tenant-acme-a", "tenant-acme-b", "tenant-acme")}
    assert admitted == {"tenant-acme-a": 4, "tenant-acme-b": 2, "tenant-acme": 0}


# -- the property: writes admitted but never stored never over-commit -----------------------------

from test_budgets_properties import writes as budget_writes  # noqa: E402

FATES = ("stored", "stored", "already-exists", "refused-later", "timeout")
ledger_ops = st.one_of(
    st.tuples(st.just("write"), budget_writes, st.integers(0, 1), st.sampled_from(FATES)),
    st.tuples(st.just("recreate"), budget_writes, st.integers(0, 1)),
    st.tuples(st.just("sync"), st.integers(0, 1)),
    st.tuples(st.just("tick"), st.integers(1, 20)),
)


A2 = [{"class": "a100", "count": 2}]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ledger_ops, min_size=1, max_size=25))
# Attack 1: re-creating stored names smaller, then growing beside them.
@example([("write", ("tenant", ("a",), {A100: 4}), 0, "stored"), ("write", ("vm", ("a",), 0, A2), 0, "stored"),
          ("write", ("vm", ("a",), 1, A2), 0, "stored"), ("sync", 0),
          ("recreate", ("vm", ("a",), 0, [{"class": "a100", "count": 1}]), 0),
          ("recreate", ("vm", ("a",), 1, [{"class": "a100", "count": 1}]), 0),
          ("write", ("pool", ("a",), 0, A2, 1), 0, "stored")])
# A pending budget increase never stored (its entry must not make room below it).
@example([("write", ("tenant", ("a",), {A100: 4}), 0, "stored"), ("write", ("tenant", ("a", "b"), {A100: 1}), 0, "stored"),
          ("sync", 0), ("write", ("tenant", ("a", "b"), {A100: 4}), 0, "timeout"),
          ("write", ("vm", ("a", "b"), 0, [{"class": "a100", "count": 3}]), 0, "stored")])
# A pending decrease stored after growth below it was admitted on the other replica.
@example([("write", ("tenant", ("a",), {A100: 4}), 0, "stored"), ("sync", 0), ("sync", 1),
          ("write", ("lower", ("a",), A100, 1), 0, "stored"),
          ("write", ("vm", ("a",), 0, [{"class": "a100", "count": 3}]), 1, "stored")])
def test_the_stored_state_never_over_commits(sequence) -> None:
    """Two replicas with lagging watches share one sharded ledger; writes are
    admitted and then stored, or never stored (AlreadyExists, a later
    admission plugin refusing, a timeout), or are re-creates of stored names.
    After every step the stored objects hold no pool past a budget that was
    never lowered (the budget properties' naive oracle)."""
    clock, store = Clock(), MemoryShards()
    stored: dict[tuple, dict] = {}  # ledger identity -> the API server's object
    judges, lag = [], [[], []]
    for _ in range(2):
        index, lock = LiveIndex(GPUCLASSES), threading.Lock()
        seen: dict[str, int] = {}
        judges.append((Arbiter(index, lock, Metrics(), ledger=store, clock=clock, lookup=stored.get,
                               seen=lambda uid, generation, seen=seen: seen.get(uid, -1) >= generation),
                       index, seen))
    lowered: set = set()
    uids = iter(range(10**6))

    def sync(replica: int) -> None:
        judge, index, seen = judges[replica]
        for obj in lag[replica]:
            index.upsert(obj)
            seen[obj["metadata"]["uid"]] = obj["metadata"]["generation"]
        lag[replica].clear()

    by_short = lambda: {_identity(o): o for o in stored.values()}  # noqa: E731
    for step in sequence:
        if step[0] == "sync":
            sync(step[1])
            continue
        if step[0] == "tick":
            for replica in (0, 1):
                sync(replica)  # the watch lag stays below the TTL
            clock.now += step[1]
            continue
        obj = _materialize(step[1], by_short())
        try:
            key = identity(obj)
        except admission.ShapeError:
            continue
        previous = stored.get(key)
        judge = judges[step[2]][0]
        meta = obj["metadata"] = dict(obj["metadata"])
        if step[0] == "recreate" or previous is None:
            meta.update(uid=f"u{next(uids)}", generation=1)
            operation, old = "CREATE", None
        else:
            meta.update(uid=previous["metadata"]["uid"], generation=previous["metadata"]["generation"] + 1)
            operation, old = "UPDATE", previous
        if not judge(review(obj, operation, old))["response"]["allowed"]:
            continue
        fate = "already-exists" if step[0] == "recreate" else step[3]
        if fate != "stored" or (operation == "CREATE" and previous is not None):
            continue  # the API server answers AlreadyExists, another plugin refuses, or it times out
        if obj["kind"] == "Tenant" and previous is not None:
            before = previous["spec"].get("resourceQuotas") or {}
            after = obj["spec"].get("resourceQuotas") or {}
            namespace = parse_declaration(obj).namespace
            lowered |= {(namespace, k) for k, v in after.items() if k in before and v < before[k]}
        stored[key] = obj
        for replica in (0, 1):
            lag[replica].append(obj)
        assert naive_violations(list(stored.values()), lowered) == [], (obj, sequence)


def test_many_new_tenants_in_flight_at_once_are_all_decided() -> None:
    """A hoster creating tenants in bulk: new tenants hold nothing yet, so
    which keys they declare bears on no other decision (no combinations to
    check), and each new tenant is its own share of the shard above it."""
    state = classes("a100") + [tenant("acme", quotas={A100: 100})]
    judge = ledgered(state)
    for index in range(12):
        assert allowed(judge, tenant(f"t{index}", "tenant-acme", quotas={A100: 2}))
        assert allowed(judge, tenant(f"top{index}", quotas={A100: 2}))
    assert not allowed(judge, tenant("t99", "tenant-acme", quotas={A100: 77}))  # 12 x 2 pending: 76 left
    assert allowed(judge, tenant("t99", "tenant-acme", quotas={A100: 76}))
