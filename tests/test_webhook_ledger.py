"""The ledger's pure parts (cozyrender.webhook.ledger): what grows, the entry
format, and the overlay: reservations laid over the watched view through
LiveIndex upsert/remove, decided by check_write on that view, and reverted
after, so the index is left exactly as the watch made it. (The
compare-and-swap against the API server is tested in test_webhook_live.py.)"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
    assert judge(review(pod))["response"]["allowed"] is True  # unchecked kinds stay untouched


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_state, writes, st.lists(writes, max_size=4))
def test_the_overlay_decides_as_check_on_the_state_with_the_reservations(objects, write, pending) -> None:
    """Reservations laid over the watched view give the decision `check`
    gives on a state holding those objects, and leave the view unchanged."""
    existing = {_identity(o): o for o in objects}
    reserved = {}
    for op in pending:
        obj = _materialize(op, {**existing, **reserved})
        reserved[_identity(obj)] = obj
    obj = _materialize(write, {**existing, **reserved})
    reserved.pop(_identity(obj), None)
    old = existing.get(_identity(obj))
    view = dict(existing)
    view.update(reserved)
    if old is not None:
        view[_identity(obj)] = old
    try:
        expected = check_write(index_state(GPUCLASSES + list(view.values())), obj).as_dict()
    except admission.ShapeError:
        return
    judge = arbiter(GPUCLASSES + objects)
    before = snapshot(judge.index)
    request = admission.read_review(review(obj, "UPDATE" if old is not None else "CREATE", old))
    entries = [entry_for(o) for o in reserved.values()]
    assert judge._check(request, obj, old, entries).as_dict() == expected
    assert snapshot(judge.index) == before
