"""`cozyrender check` on a state holding an object the rules cannot read
(issue 28 item 2): the hostile tenant's pod requesting `example.com/widget:
"10E"`, which the API server stores.

- The audit cannot vouch for the pools it is in: bad input (exit 2), one line
  naming the file, the object and the Tenant owning its namespace, as the
  webhook names them.
- A write is decided as the webhook decides it: in the object's pools (or a
  subtree holding it) refused, exit 1, naming it and its owner; anywhere else
  decided as on the state without it, with a warning naming it. The property
  test holds check's answer to the webhook's (its index and arbiter, the pod
  read as its cache reads it) over random states.
"""

from __future__ import annotations

import json
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_budgets_builders import classes, pod, run_check, tenant, vm
from test_budgets_properties import (
    GPUCLASSES,
    _identity,
    _materialize,
    namespace_of,
    random_state,
    tenant_at,
    tenant_paths,
    writes,
)
from test_webhook_admission import A100, review

from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.unreadable import MAX_LEFT_OUT, decide_write
from cozyrender.kube.shape import ShapeError
from cozyrender.webhook.ledger import Arbiter
from cozyrender.webhook.metrics import Metrics

WIDGET_PROBLEM = ("spec.containers[0].resources.limits.example.com/widget is too large "
                  "(at or past 9223372036854775807, where Kubernetes caps a quantity)")


def widget(namespace: str, name: str = "widget") -> dict:
    return pod(namespace, name, {"example.com/widget": "10E"}, requests={"example.com/widget": "10E"})


STATE = classes("a100") + [tenant("foo", quotas={"cpu": "4"}), tenant("bar", quotas={A100: 4}),
                           widget("tenant-foo")]
NAMED = f"Pod tenant-foo/widget (in the namespace of Tenant tenant-root/foo): {WIDGET_PROBLEM}"


def test_the_audit_is_bad_input_naming_the_object_and_its_owner(tmp_path):
    result = run_check(tmp_path, STATE)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("cozyrender check: error: ") and f"state.json: {NAMED}" in result.output


def test_a_write_elsewhere_is_decided_as_without_it_with_a_warning(tmp_path):
    for count, code in ((4, 0), (5, 1)):
        write = vm("tenant-bar", "v", [{"class": "a100", "count": count}])
        with_it = run_check(tmp_path, STATE, write, "-o", "json")
        without = run_check(tmp_path, STATE[:-1], write, "-o", "json")
        assert with_it.exit_code == without.exit_code == code, (with_it.output, without.output)
        decided, plain = json.loads(with_it.stdout), json.loads(without.stdout)
        assert decided["reasons"] == plain["reasons"]
        (note,) = [w for w in decided["warnings"] if w not in plain["warnings"]]
        assert note.startswith("1 object(s) the rules cannot read are left out of the state; none is in the pools "
                               "this write is decided in") and note.endswith(NAMED), note


def test_a_write_in_its_pool_is_refused_naming_it_and_its_owner(tmp_path):
    for write in (vm("tenant-foo", "v", []), tenant("foo", quotas={"cpu": "5"}), tenant("sub", "tenant-foo")):
        result = run_check(tmp_path, STATE, write, "-o", "json")
        assert result.exit_code == 1, result.output
        (reason,) = json.loads(result.stdout)["reasons"]
        assert reason["field"] == "metadata.namespace"
        assert reason["message"].startswith("1 object(s) the rules cannot read are in the pools this write is "
                                            f"decided in, so it cannot be shown to fit: {NAMED} [in ")
        assert "until the object is fixed or deleted" in reason["message"]


def test_an_object_with_no_usable_name_two_copies_and_the_write_itself_stay_bad_input(tmp_path):
    nameless = dict(widget("tenant-foo"), metadata={"namespace": "tenant-foo"})
    result = run_check(tmp_path, STATE[:-1] + [nameless], vm("tenant-bar", "v", []))
    assert result.exit_code == 2 and "Pod tenant-foo/<unnamed>: metadata.name is missing" in result.output
    result = run_check(tmp_path, STATE + [tenant("bar", quotas={A100: 5})], vm("tenant-bar", "v", []))
    assert result.exit_code == 2 and "two different copies of one object" in result.output, result.output
    result = run_check(tmp_path, STATE[:-1], vm("tenant-bar", "v", [{"class": "a100", "count": "10E"}]))
    assert result.exit_code == 2 and "write.json: VMInstance tenant-bar/v: spec.gpus[0].count" in result.output, \
        result.output


def test_past_the_limit_of_objects_left_out_the_state_is_bad_input(tmp_path):
    pods = [widget("tenant-foo", f"w{i:03d}") for i in range(MAX_LEFT_OUT + 1)]
    result = run_check(tmp_path, STATE[:-1] + pods, vm("tenant-bar", "v", []))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"more than {MAX_LEFT_OUT} objects the rules cannot read" in result.output
    assert "(in the namespace of Tenant tenant-root/foo)" in result.output


def webhook_answer(objects: list[dict], write: dict) -> dict:
    """The webhook's answer: its live index of the readable objects, the unreadable ones kept
    as its cache keeps them (the ShapeError of the index's upsert), its arbiter deciding."""
    index, unreadable = LiveIndex([]), {}
    for obj in objects:
        try:
            index.upsert(obj)
        except ShapeError as err:
            meta = obj["metadata"]
            unreadable[(obj["kind"], meta.get("namespace"), meta["name"])] = str(err)
    arbiter = Arbiter(index, threading.Lock(), Metrics(), unreadable=lambda: unreadable)
    stored = index.get(write)
    operation = "CREATE" if stored is None else "UPDATE"
    return arbiter(review(write, operation, old=None if stored is None else dict(stored)))["response"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_state, writes, tenant_paths, st.booleans())
def test_check_answers_as_the_webhook_whatever_the_state_and_where_the_pod_is(objects, write, where, cpu_pool):
    """Admitted by one exactly when admitted by the other; refused for the pod by check, the
    webhook's refusal names it too (its own words when the write is what makes the pod read:
    a Tenant write giving the pod's namespace its first pool, a 422 naming the pod's field).
    With `cpu_pool`, the pod's own tenant declares cpu, so the rules read it whatever the state."""
    namespace = namespace_of(where)
    if cpu_pool:
        own = tenant_at(where, {"cpu": 1})
        objects = [obj for obj in objects if _identity(obj) != _identity(own)] + [own]
    objects = GPUCLASSES + objects + [widget(namespace)]
    obj = _materialize(write, {})
    decision = decide_write(objects, obj, None)
    out = webhook_answer(objects, obj)
    assert out["allowed"] is decision.allowed, (out, decision)
    message = out.get("status", {}).get("message", "")
    if "the rules cannot read" in message:
        (reason,) = decision.reasons
        assert message.endswith(f"cannot decide it: {reason.message}"), (message, reason)
    if any("the rules cannot read" in reason.message for reason in decision.reasons):
        assert f"Pod {namespace}/widget" in message, (message, decision)
