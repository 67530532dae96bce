"""An object the rules cannot read bears only on what it touches (issue 28
item 2): the writes decided in the pools it belongs to are refused naming it
and its owner; every other write is decided as `check` decides it on the
state without it. (Live: test_webhook_hostile.py, attack 2.)"""

from __future__ import annotations

import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_budgets_builders import classes, pod, tenant, vm
from test_budgets_properties import GPUCLASSES, _materialize, namespace_of, random_state, tenant_paths, writes
from test_webhook_admission import A100, review

from cozyrender.budgets import check_write, index_state
from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.unreadable import UnreadableObject, bearing, owner
from cozyrender.webhook.ledger import Arbiter
from cozyrender.webhook.metrics import Metrics

WIDGET = "Pod tenant-foo/w: spec.containers[0].resources.limits.example.com/widget is too large"
STATE = classes("a100") + [
    tenant("foo", quotas={"cpu": "4"}),
    tenant("bar", quotas={A100: 4, "cpu": "4"}),
    tenant("free"),  # no quotas: in tenant-root's pools
    tenant("sub", "tenant-foo", quotas={"cpu": "1"}),
]


def judge(objects, unreadable: dict) -> Arbiter:
    return Arbiter(LiveIndex(objects), threading.Lock(), Metrics(), unreadable=lambda: unreadable)


def answer(arbiter: Arbiter, write: dict) -> dict:
    """The arbiter's answer to `write`: an UPDATE of the stored object when its
    name is taken (a CREATE of it is refused as the API server refuses it)."""
    stored = arbiter.index.get(write)
    operation = "CREATE" if stored is None else "UPDATE"
    return arbiter(review(write, operation, old=None if stored is None else dict(stored)))["response"]


def test_a_pod_the_rules_cannot_read_refuses_only_its_own_pools_writes() -> None:
    arbiter = judge(STATE, {("Pod", "tenant-foo", "w"): WIDGET})
    for write in (vm("tenant-bar", "v", [{"class": "a100", "count": 1}]), tenant("bar", quotas={A100: 3, "cpu": "4"}),
                  tenant("new", quotas={"cpu": "1"}), vm("tenant-free", "v", []),
                  vm("tenant-foo-sub", "v", []), tenant("deep", "tenant-foo-sub", quotas={"cpu": "1"})):
        out = answer(arbiter, write)
        assert out["allowed"] is check_write(index_state(STATE), write).allowed is True, (write, out)
    for write in (vm("tenant-foo", "v", []), tenant("foo", quotas={"cpu": "5"}),
                  tenant("other", "tenant-foo", quotas={"cpu": "1"})):
        out = answer(arbiter, write)
        assert out["allowed"] is False, write
        message = out["status"]["message"]
        assert "Pod tenant-foo/w (in the namespace of Tenant tenant-root/foo)" in message, message
        assert "example.com/widget is too large" in message and "pool tenant-foo" in message or "subtree" in message


def test_an_unreadable_object_in_a_tenant_without_quotas_is_in_the_root_pool() -> None:
    objects = STATE + [tenant("root", "tenant-root", quotas={A100: 8})]
    arbiter = judge(objects, {("Pod", "tenant-free", "p"): "Pod tenant-free/p: spec is bad"})
    assert answer(arbiter, vm("tenant-root", "v", []))["allowed"] is False  # tenant-root's pool holds it
    assert answer(arbiter, vm("tenant-bar", "v", [{"class": "a100"}]))["allowed"] is True


def test_the_hosters_objects_bear_on_every_decision_and_other_namespaces_on_none() -> None:
    arbiter = judge(STATE, {("GPUClass", None, "a100"): "GPUClass a100: spec.x is bad"})
    assert answer(arbiter, vm("tenant-bar", "v", []))["allowed"] is False
    arbiter = judge(STATE, {("Pod", "kube-system", "p"): "Pod kube-system/p: spec is bad"})
    assert answer(arbiter, vm("tenant-bar", "v", []))["allowed"] is True


def test_an_unreadable_tenant_holds_its_subtree() -> None:
    found = UnreadableObject("Tenant", "tenant-foo", "sub", "Tenant tenant-foo/sub: spec.resourceQuotas is bad")
    state = index_state(STATE[:-1])  # out of the index, as the cache keeps it
    assert [where for _, where in bearing(state, [found], vm("tenant-foo-sub", "v", []))] == ["pool tenant-foo"]
    deep = UnreadableObject("Tenant", "tenant-foo-sub", "x", "bad")
    assert bearing(state, [deep], vm("tenant-foo-sub-x-y", "v", []))  # below it, whatever the pools say
    assert not bearing(state, [deep], vm("tenant-bar", "v", []))


def test_the_owner_is_the_tenant_owning_the_namespace() -> None:
    assert owner("tenant-foo") == "Tenant tenant-root/foo"
    assert owner("tenant-foo-bar") == "Tenant tenant-foo/bar"
    assert owner("tenant-root") == "Tenant tenant-root/root"
    assert owner("kube-system") is None and owner(None) is None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_state, writes, tenant_paths)
def test_writes_outside_an_unreadable_objects_pools_are_decided_as_check_decides(objects, write, where) -> None:
    """Whatever the state, the write and where the unreadable pod is: either
    the answer names the pod (the write reads its pool or subtree), or it is
    exactly `check`'s answer on the state without it."""
    objects = GPUCLASSES + objects
    namespace = namespace_of(where)
    unreadable = {("Pod", namespace, "w"): f"Pod {namespace}/w: spec is bad"}
    obj = _materialize(write, {})
    out = answer(judge(objects, unreadable), obj)
    state = index_state(objects)
    if bearing(state, [UnreadableObject("Pod", namespace, "w", "bad")], obj):
        assert out["allowed"] is False and f"Pod {namespace}/w" in out["status"]["message"]
    else:
        assert out["allowed"] is check_write(state, obj).allowed


def test_a_readable_pod_is_never_reported() -> None:
    arbiter = judge(STATE + [pod("tenant-foo", "p", {"cpu": "1"})], {})
    assert answer(arbiter, vm("tenant-foo", "v", []))["allowed"] is True
