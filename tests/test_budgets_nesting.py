"""Escapes are loud, and a hoster can close them (issue 28 item 5).

- a Tenant write whose subtree leaves GPU budgets above it is admitted with a
  warning naming the keys it escapes; `check` prints it, the webhook sends it
  as an AdmissionResponse warning;
- the platform's `_cluster.gpu-budgets-nest` (tenant-root/cozystack-values)
  makes GPU pool roots be decided by GPU keys alone: a tenant declaring only
  `cpu` stays in its parent's GPU pool, so attack 5's VM is refused;
- `check`, `tree`, the audit and the webhook read the switch from the one
  place. (The invariant under both settings: test_budgets_properties.py;
  the live index across flips: test_budgets_live.py; live: test_webhook_hostile.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from test_budgets_builders import classes, tenant, vm
from test_webhook_admission import review

from cozyrender.budgets import BudgetInputError, audit, check_write, index_state
from cozyrender.budgets.live import LiveIndex
from cozyrender.webhook.ledger import Arbiter
from cozyrender.webhook.metrics import Metrics

A100 = "a100.gpuclass.cozystack.io/devices"
H100 = "h100.gpuclass.cozystack.io/devices"


def values(nest: object) -> dict:
    text = "_cluster:\n" + (f"  gpu-budgets-nest: {json.dumps(nest)}\n" if nest is not None else "  root-host: x\n")
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": "tenant-root"},
            "stringData": {"values.yaml": text}}


BASE = classes("a100", "h100") + [tenant("foo", quotas={A100: 4})]
ESCAPING = tenant("sub", "tenant-foo", quotas={"cpu": "1"})
BIG_VM = vm("tenant-foo-sub", "big", [{"class": "a100", "count": 1000}])


def test_off_by_default_a_cpu_only_sub_tenant_escapes_loudly() -> None:
    state = index_state(BASE)
    assert state.gpu_budgets_nest is False
    decision = check_write(state, ESCAPING)
    assert decision.allowed
    [warning] = decision.warnings
    assert warning.startswith("Tenant tenant-foo/sub leaves the GPU budget 'a100.gpuclass.cozystack.io/devices' "
                              "of Tenant tenant-root/foo (pool tenant-foo)")
    assert "_cluster.gpu-budgets-nest: true" in warning
    assert check_write(index_state(BASE + [ESCAPING]), BIG_VM).allowed  # the seed's rule: it left the pool


@pytest.mark.parametrize("setting", [True, "true"])
def test_with_the_switch_on_a_cpu_only_sub_tenant_stays_in_the_gpu_pool(setting) -> None:
    state = index_state(BASE + [values(setting), ESCAPING])
    assert state.gpu_budgets_nest is True
    assert state.budget_root("tenant-foo-sub") == "tenant-foo"
    assert check_write(index_state(BASE + [values(setting)]), ESCAPING).warnings == ()
    decision = check_write(state, BIG_VM)
    assert not decision.allowed
    assert "exceeded GPU budget 'a100.gpuclass.cozystack.io/devices' of pool tenant-foo" in decision.reasons[0].message
    assert not [f for f in audit(state) if f.kind == "escapes-budget"]


def test_with_the_switch_on_a_class_key_still_escapes_the_others_loudly() -> None:
    state = index_state(BASE + [values(True)])
    [warning] = check_write(state, tenant("sub", "tenant-foo", quotas={H100: 1, "cpu": "1"})).warnings
    assert "leaves the GPU budget 'a100.gpuclass.cozystack.io/devices'" in warning
    assert "or the all-classes key" in warning and "gpu-budgets-nest" not in warning
    assert check_write(state, tenant("sub", "tenant-foo", quotas={A100: 1})).warnings == ()


def test_off_unless_it_says_true_and_a_wrong_value_is_bad_input() -> None:
    assert index_state(BASE + [values(False)]).gpu_budgets_nest is False
    assert index_state(BASE + [values(None)]).gpu_budgets_nest is False
    with pytest.raises(BudgetInputError, match="gpu-budgets-nest is 'yes': expected true or false"):
        index_state(BASE + [values("yes")])


def test_the_audit_and_the_tree_read_the_switch_as_the_checks_do() -> None:
    from cozyrender.tree.model import build_tree
    from cozyrender.tree.text import render_text

    for nest, root in ((False, "tenant-foo-sub"), (True, "tenant-foo")):
        objects = BASE + [ESCAPING, BIG_VM] + ([values(True)] if nest else [])
        state = index_state(objects)
        escapes = [f for f in audit(state) if f.kind == "escapes-budget"]
        over = [f for f in audit(state) if f.kind == "over-committed"]
        assert bool(escapes) is not nest and bool(over) is nest
        tree = build_tree(state, audit(state))
        assert tree.nodes["tenant-foo-sub"].budget_pool == root
        assert tree.nodes["tenant-foo-sub"].budget_root is not nest
        assert ("GPU budgets nest" in render_text(tree)) is nest


def test_the_webhook_sends_the_warning_and_reads_the_switch_from_the_cluster() -> None:
    def judge(objects):
        return Arbiter(LiveIndex(objects), threading.Lock(), Metrics())

    out = judge(BASE)(review(ESCAPING))["response"]
    assert out["allowed"] is True and "leaves the GPU budget" in out["warnings"][0]
    index = LiveIndex(BASE + [ESCAPING])
    arbiter = Arbiter(index, threading.Lock(), Metrics())
    assert arbiter(review(BIG_VM))["response"]["allowed"] is True
    index.upsert(values(True))  # the watch sees the platform's switch
    assert arbiter(review(BIG_VM))["response"]["allowed"] is False
    index.remove(values(True))
    assert arbiter(review(BIG_VM))["response"]["allowed"] is True


def test_check_prints_the_warning(tmp_path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": BASE + [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-foo"}}]}))
    write = tmp_path / "sub.json"
    write.write_text(json.dumps(ESCAPING))
    proc = subprocess.run([sys.executable, "-m", "cozyrender", "check", "--state", str(state), "--write", str(write),
                           "-o", "text"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("admitted\n")
    assert "  warning: Tenant tenant-foo/sub leaves the GPU budget 'a100.gpuclass.cozystack.io/devices'" in proc.stdout
