"""Issue 19 item 5b: the hierarchical rule (HNC's hierarchical quotas). A
growing VM, worker-pool or Kubernetes write must also fit, for every
ancestor tenant with a key covering a growing class, the devices physically
reserved in that ancestor's subtree (subtrees that escaped its budget by
design left out), counted with the write. The audit reports a subtree
holding more than its budget (`over-held`)."""

from __future__ import annotations

from test_budgets_builders import classes, kubernetes, node_group, nodes, run_check_json, tenant, vm

from cozyrender.budgets import audit, check_write, index_state
from cozyrender.budgets.live import LiveIndex

A100 = "a100.gpuclass.cozystack.io/devices"
H100 = "h100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"


def test_the_attackers_sequence_is_refused():
    """The held-out fuzzer's sequence: `a` holds 2 a100 under an all-classes
    budget of 5 with a child `b` capped at 1 a100; the parent lowers `a` to
    1 (admitted: lowerings are not checked); a VM of 1 a100 in `b` then fits
    `b`'s own key, but would raise what `a`'s subtree holds from 2 to 3
    against a budget of 1."""
    objects = [*classes(), tenant("a", quotas={ALL: 5}), vm("tenant-a", "vm1", [{"class": "a100", "count": 2}]),
               tenant("b", "tenant-a", quotas={A100: 1})]
    lowered = tenant("a", quotas={ALL: 1})
    assert check_write(index_state(objects), lowered).allowed
    objects[2] = lowered
    state = index_state(objects)
    decision = check_write(state, vm("tenant-a-b", "vm2", [{"class": "a100", "count": 1}]))
    assert not decision.allowed
    [reason] = decision.reasons
    assert reason.field == "spec.gpus[0].count"
    assert reason.message == (
        "Forbidden: exceeded GPU budget 'gpuclass.cozystack.io/devices' of Tenant tenant-root/a (pool tenant-a), "
        "counting every device reserved in its subtree: requested 1, reserved in the subtree 2, budget 1 (3 > 1)")
    # The same answer from the live index, and through the command.
    live = LiveIndex(objects)
    assert check_write(live.state, vm("tenant-a-b", "vm2", [{"class": "a100", "count": 1}])) == decision


def test_once_the_subtree_fits_again_growth_below_is_admitted():
    objects = [*classes(), tenant("a", quotas={ALL: 3}), vm("tenant-a", "vm1", [{"class": "a100", "count": 2}]),
               tenant("b", "tenant-a", quotas={A100: 1})]
    assert check_write(index_state(objects), vm("tenant-a-b", "vm2", [{"class": "a100", "count": 1}])).allowed
    objects[2] = tenant("a", quotas={ALL: 2})
    assert not check_write(index_state(objects), vm("tenant-a-b", "vm2", [{"class": "a100", "count": 1}])).allowed
    objects[3] = vm("tenant-a", "vm1", [{"class": "a100", "count": 1}])
    assert check_write(index_state(objects), vm("tenant-a-b", "vm2", [{"class": "a100", "count": 1}])).allowed


def test_every_ancestor_up_the_chain_is_counted_for_every_kind():
    """Three levels: the grandparent lowered; growth two levels below it is refused, by a VM, a pool or a cluster."""
    objects = [*classes(), tenant("a", quotas={A100: 2}), tenant("b", "tenant-a", quotas={A100: 2}),
               tenant("c", "tenant-a-b", quotas={ALL: 2}), vm("tenant-a-b", "v", [{"class": "a100", "count": 1}]),
               vm("tenant-a", "w", [{"class": "a100", "count": 1}])]
    state = index_state(objects)
    for write in (vm("tenant-a-b-c", "x", [{"class": "a100"}]),
                  nodes("tenant-a-b-c", "p", [{"class": "a100"}], max_replicas=1),
                  kubernetes("tenant-a-b-c", "k", {"md0": node_group([{"class": "a100"}], max_replicas=1)})):
        decision = check_write(state, write)
        # c fits its own key, b's subtree would hold 2 of 2, a's 3 of 2.
        assert [r.message.split(",")[0] for r in decision.reasons] == [
            "Forbidden: exceeded GPU budget 'a100.gpuclass.cozystack.io/devices' of Tenant tenant-root/a (pool tenant-a)"]
    # h100 is capped by c's all-classes key but by no key of a or b: their subtrees do not count it.
    assert check_write(state, vm("tenant-a-b-c", "x", [{"class": "h100", "count": 2}])).allowed


def test_a_subtree_that_escaped_by_design_is_left_out():
    """`b` declares only cpu: its pool's devices count against no budget of
    `a` (the escape the audit warns about), so no growth there is refused by `a`."""
    objects = [*classes(), tenant("a", quotas={A100: 1}), vm("tenant-a", "v", [{"class": "a100", "count": 1}]),
               tenant("b", "tenant-a", quotas={"cpu": 2})]
    assert check_write(index_state(objects), vm("tenant-a-b", "x", [{"class": "a100", "count": 5}])).allowed
    # A class-only child escapes for the other classes.
    objects[4] = tenant("b", "tenant-a", quotas={H100: 1})
    objects[2] = tenant("a", quotas={ALL: 1})
    assert check_write(index_state(objects), vm("tenant-a-b", "x", [{"class": "a100", "count": 5}])).allowed
    assert not check_write(index_state(objects), vm("tenant-a-b", "x", [{"class": "h100", "count": 1}])).allowed


def test_no_growth_is_admitted_even_over_held():
    objects = [*classes(), tenant("a", quotas={ALL: 1}), vm("tenant-a", "vm1", [{"class": "a100", "count": 2}]),
               tenant("b", "tenant-a", quotas={A100: 2}), vm("tenant-a-b", "v", [{"class": "a100", "count": 2}])]
    state = index_state(objects)
    assert check_write(state, vm("tenant-a-b", "v", [{"class": "a100", "count": 1}], memory="8Gi")).allowed
    # Moving devices between classes under b's cap changes nothing above.
    assert check_write(state, vm("tenant-a-b", "v", [{"class": "a100", "count": 2}])).allowed


def test_the_audit_reports_an_over_held_subtree(tmp_path):
    objects = [*classes(), tenant("a", quotas={ALL: 1}), vm("tenant-a", "vm1", [{"class": "a100", "count": 1}]),
               tenant("b", "tenant-a", quotas={A100: 1}), vm("tenant-a-b", "v", [{"class": "a100", "count": 1}])]
    held = [f for f in audit(index_state(objects)) if f.kind == "over-held"]
    assert [(f.severity, f.namespace, f.field, dict(f.numbers)) for f in held] == [
        ("error", "tenant-a", 'spec.resourceQuotas["gpuclass.cozystack.io/devices"]',
         {"budget": "1", "heldInSubtree": "2"})]
    assert held[0].message == (
        "the subtree of Tenant tenant-root/a holds more devices than its GPU budget 'gpuclass.cozystack.io/devices': "
        "2 reserved in tenant-a and the sub-pools it caps > budget 1; no growth below it is admitted until it fits")
    code, findings = run_check_json(tmp_path, objects)
    assert code == 1 and "over-held" in [f["kind"] for f in findings]


def test_a_tenant_write_making_an_escaped_subtree_count_is_checked_too():
    """`b` declared only cpu, so its 3 A100s escaped `a`'s and the root's
    budgets; the root is then lowered to 1. `b` declaring an A100 key fits
    `a`'s pool (the charge gate), but would make its 3 devices count in the
    root's subtree against a budget of 1: refused, naming b's key."""
    objects = [*classes(), tenant("root", quotas={ALL: 1}), tenant("a", quotas={ALL: 5}),
               tenant("b", "tenant-a", quotas={"cpu": 1}), vm("tenant-a-b", "v", [{"class": "a100", "count": 3}])]
    state = index_state(objects)
    decision = check_write(state, tenant("b", "tenant-a", quotas={"cpu": 1, A100: 3}))
    assert [(r.field, r.message.split(",")[0]) for r in decision.reasons] == [
        (f'spec.resourceQuotas["{A100}"]',
         "Forbidden: exceeded GPU budget 'gpuclass.cozystack.io/devices' of Tenant tenant-root/root (pool tenant-root)")]
    # Dropping its keys returns its pool to a's, and so to the root's subtree: refused as well.
    assert not check_write(state, tenant("b", "tenant-a", quotas={})).allowed
    # Capping only another class keeps the A100s out of every count above: admitted.
    assert check_write(state, tenant("b", "tenant-a", quotas={"cpu": 1, H100: 3})).allowed
