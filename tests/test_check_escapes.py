"""Issue 11, one regression per item through the CLI (`cozyrender check`
via click's CliRunner): the over-commit paths an adversarial review found,
order independence, hostile numbers, names, and a write that is also part
of the state."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_budgets_builders import (
    as_listed,
    classes,
    gpuclass,
    klist,
    nodes,
    pod,
    quota,
    root_namespace,
    run_check,
    run_check_json,
    tenant,
    vm,
    write_json,
)

from cozyrender.commands.check import command

A100 = "a100.gpuclass.cozystack.io/devices"
H100 = "h100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"
APPS = "apps.cozystack.io/v1alpha1"


def _invoke(*args: str):
    return CliRunner().invoke(command, list(args))


def _bad_input(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output and "error:" in result.output
    for word in words:
        assert word in result.output, (word, result.output)


# -- item 1: lowering a child's budget frees nothing of the parent's ---------------

def test_item1_lowering_a_child_below_what_it_holds_frees_nothing_for_the_parent(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={A100: 4}),
             vm("tenant-a-b", "v", [{"class": "a100", "count": 4}])]
    lowered = tenant("b", "tenant-a", quotas={A100: 0})
    assert run_check_json(tmp_path, state, lowered)[0] == 0  # lowering is the parent's call (design example 3)
    state[-2] = lowered
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "w", [{"class": "a100", "count": 4}]))
    assert code == 1
    assert "requested 4, reserved 0, carved out 4, budget 4 (8 > 4)" in answer["reasons"][0]["message"]
    # b still holds its 4 and may not grow: its own pool is over its new value.
    assert run_check_json(tmp_path, state, vm("tenant-a-b", "x", [{"class": "a100"}]))[0] == 1
    # A sibling's carve-out sees the 4 too.
    code, answer = run_check_json(tmp_path, state, tenant("c", "tenant-a", quotas={A100: 1}))
    assert code == 1 and "carved out 4" in answer["reasons"][0]["message"]


# -- item 2: an all-classes key below a class-only parent -------------------------

def test_item2_an_all_classes_child_is_charged_towards_every_class_key_above_it(tmp_path):
    state = [*classes(), tenant("a", quotas={ALL: 10}), tenant("b", "tenant-a", quotas={A100: 4}),
             tenant("c", "tenant-a-b", quotas={ALL: 3})]
    assert run_check_json(tmp_path, state[:-1], state[-1])[0] == 0  # 3 fits b's 4 A100s
    state += [vm("tenant-a-b-c", "v", [{"class": "a100", "count": 3}]), vm("tenant-a", "w", [{"class": "h100", "count": 6}])]
    # c may spend its 3 on A100s: b has 1 A100 left, and a none of its 10 (b's 4 + 6 H100s).
    code, answer = run_check_json(tmp_path, state, vm("tenant-a-b", "x", [{"class": "a100", "count": 2}]))
    assert code == 1 and "carved out 3, budget 4 (5 > 4)" in answer["reasons"][0]["message"]
    assert run_check_json(tmp_path, state, vm("tenant-a-b", "x", [{"class": "a100", "count": 1}]))[0] == 0
    assert run_check_json(tmp_path, state, vm("tenant-a", "y", [{"class": "h100", "count": 1}]))[0] == 1
    # A second all-classes sibling of c no longer fits b's A100 key, naming the all-classes key.
    code, answer = run_check_json(tmp_path, state, tenant("d", "tenant-a-b", quotas={ALL: 2}))
    assert code == 1 and answer["reasons"][0]["field"] == f'spec.resourceQuotas["{ALL}"]'
    assert "its all-classes budget, which it may spend on this class" in answer["reasons"][0]["message"]


# -- item 3: raw device-plugin names ------------------------------------------------

def test_item3_a_raw_device_name_is_refused_where_classes_or_budgets_apply(tmp_path):
    gpus = [gpuclass("a100", "nvidia.com/A100"), gpuclass("h100", "nvidia.com/H100")]
    state = [*gpus, tenant("a", quotas={A100: 4}), tenant("b", quotas={"cpu": 4})]
    # The resource of a class, even where no budget applies: the message names the class.
    code, answer = run_check_json(tmp_path, state, vm("tenant-b", "v", [{"name": "nvidia.com/A100", "count": 50}]))
    assert code == 1
    [reason] = answer["reasons"]
    assert reason["field"] == "spec.gpus[0].name" and "{class: a100}" in reason["message"]
    # Any device name in a pool with GPU budgets.
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "v", [{"name": "vendor.example/fpga"}]))
    assert code == 1 and "pool tenant-a" in answer["reasons"][0]["message"]
    # Elsewhere it is admitted, and the audit reports it.
    assert run_check_json(tmp_path, state, vm("tenant-b", "v", [{"name": "vendor.example/fpga"}]))[0] == 0
    state += [vm("tenant-b", "v", [{"name": "vendor.example/fpga"}]), vm("tenant-a", "w", [{"name": "nvidia.com/H100"}])]
    code, findings = run_check_json(tmp_path, state)
    assert code == 1
    assert sorted((f["severity"], f["kind"], f["namespace"]) for f in findings if f["kind"] == "device-name") == [
        ("error", "device-name", "tenant-a"), ("warning", "device-name", "tenant-b")]


# -- item 4: minReplicas > maxReplicas ----------------------------------------------

def test_item4_a_worker_pool_with_min_above_max_is_refused(tmp_path):
    state = [*classes(), tenant("a", quotas={A100: 8})]
    inverted = nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=2, minReplicas=3)
    code, answer = run_check_json(tmp_path, state, inverted)
    assert code == 1 and answer["reasons"][0] == {
        "field": "spec.minReplicas", "message": "Invalid: spec.minReplicas 3 is more than spec.maxReplicas 2"}
    assert run_check_json(tmp_path, state, nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=3, minReplicas=3))[0] == 0
    code, findings = run_check_json(tmp_path, state + [inverted])
    assert code == 1 and [f["kind"] for f in findings] == ["invalid-workload"]


# -- item 5: an unusable budget in the state caps at zero ---------------------------

@pytest.mark.parametrize("quotas,named", [
    ({A100: "4000m"}, "'4000m'"),
    ({A100: "four"}, "'four'"),
    ({"A100.gpuclass.cozystack.io/devices": 4}, "unsupported GPU budget key"),
])
def test_item5_an_unusable_budget_in_the_state_refuses_growth_naming_the_value(tmp_path, quotas, named):
    state = [*classes(), tenant("a", quotas=quotas), vm("tenant-a", "v", [{"class": "a100", "count": 1}])]
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "w", [{"class": "a100"}]))
    assert code == 1 and named in answer["reasons"][0]["message"] and "counted as 0" in answer["reasons"][0]["message"]
    # No growth is still admitted (it does not evict), and the audit reports the value.
    assert run_check_json(tmp_path, state, vm("tenant-a", "v", [{"class": "a100", "count": 1}], memory="8Gi"))[0] == 0
    code, findings = run_check_json(tmp_path, state)
    assert code == 1 and "invalid-declaration" in [f["kind"] for f in findings]
    # A sub-tenant cannot carve anything out of it either.
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={A100: 1}))[0] == 1


def test_item5_an_unusable_ordinary_value_caps_carve_outs_at_zero(tmp_path):
    state = [tenant("a", quotas={"cpu": "lots"})]
    code, answer = run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 1}))
    assert code == 1 and "'cpu' is 'lots'" in answer["reasons"][0]["message"]


# -- item 6: entitlement sources that disagree --------------------------------------

def _values_secret(values: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": "tenant-root"},
            "stringData": {"values.yaml": values}}


@pytest.mark.parametrize("label,values,allowed", [
    ("true", "_cluster:\n  gpu-vgpu: true\n", True),
    ("true", "_cluster: {}\n", False),
    ("false", "_cluster:\n  gpu-vgpu: true\n", False),
    ("true", None, True),
    (None, "_cluster:\n  gpu-vgpu: true\n", True),
])
def test_item6_every_present_entitlement_source_must_say_true(tmp_path, label, values, allowed):
    state = [gpuclass("a100-4c", "nvidia.com/GRID_A100_4C", mode="vgpu"), tenant("a", vgpu=True)]
    if label is not None:
        state.append(root_namespace(label))
    if values is not None:
        state.append(_values_secret(values))
    code, answer = run_check_json(tmp_path, state, vm("tenant-a", "desktop", [{"class": "a100-4c"}]))
    assert answer["allowed"] is allowed
    disagree = label is not None and values is not None and not allowed
    if disagree:
        message = answer["reasons"][0]["message"]
        assert "the tenant-root Namespace label says" in message and "_cluster.gpu-vgpu" in message and "disagree" in message
        code, findings = run_check_json(tmp_path, state)
        assert code == 1 and [f["kind"] for f in findings] == ["vgpu-disagreement"]


# -- item 7: one object, whatever its version ---------------------------------------

def test_item7_one_object_under_two_versions_is_one_identity(tmp_path):
    v1 = vm("tenant-a", "v", [{"class": "a100", "count": 4}])
    v2 = dict(v1, apiVersion="apps.cozystack.io/v1beta1", spec={"gpus": [{"class": "a100", "count": 1}]})
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    write_json(state_dir / "base.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    write_json(state_dir / "one.json", v1)
    write_json(state_dir / "two.json", v2)
    write_json(tmp_path / "w.json", vm("tenant-a", "w", [{"class": "a100"}]))
    result = _invoke("--state", str(state_dir), "--write", str(tmp_path / "w.json"))
    _bad_input(result, "two different copies of one object", str(state_dir / "one.json"), str(state_dir / "two.json"))
    # Identical copies under two versions are one object: counted once.
    write_json(state_dir / "two.json", dict(v1, apiVersion="apps.cozystack.io/v1beta1"))
    result = _invoke("--state", str(state_dir), "-o", "json")
    assert result.exit_code == 0, result.output


def test_item7_a_stray_namespace_on_a_cluster_scoped_kind_is_the_same_object(tmp_path):
    a100 = gpuclass("a100", "nvidia.com/A100")
    stray = dict(a100, metadata=dict(a100["metadata"], namespace="tenant-a"))
    renamed = dict(stray, spec=dict(a100["spec"], resourceName="nvidia.com/other"))
    state = [tenant("a", quotas={A100: 1}), a100, stray]
    assert run_check_json(tmp_path, state, vm("tenant-a", "v", [{"class": "a100"}]))[0] == 0
    _bad_input(run_check(tmp_path, [tenant("a"), a100, renamed], vm("tenant-a", "v", [{"class": "a100"}])),
               "two different copies of one object (GPUClass")


# -- item 8: hostile numbers ---------------------------------------------------------

HUGE = "9" * 5000


@pytest.mark.parametrize("state,field", [
    ([tenant("a", quotas={A100: HUGE})], f"spec.resourceQuotas['{A100}']"),
    ([tenant("a", quotas={"cpu": "1e9999999"})], "spec.resourceQuotas['cpu'] has an exponent out of range"),
    ([tenant("a", quotas={"cpu": "1e5000"})], "spec.resourceQuotas['cpu']"),
    ([tenant("a", quotas={"cpu": HUGE})], "spec.resourceQuotas['cpu'] is too long"),
    ([tenant("a", quotas={"cpu": 10**100})], "spec.resourceQuotas['cpu'] is too large"),
    ([tenant("a", quotas={"cpu": 4}), pod("tenant-a", "p", {"cpu": "1e9999999"})],
     "spec.containers[0].resources.limits.cpu has an exponent out of range"),
    ([tenant("a", quotas={"memory": "1Gi"}), pod("tenant-a", "p", {"memory": HUGE + "Gi"})],
     "Pod tenant-a/p (in the namespace of Tenant tenant-root/a): spec.containers[0].resources.limits.memory is too long"),
    ([tenant("a", quotas={"cpu": 4}), quota("tenant-a", "q", {"limits.cpu": "1e100"})], "status.used.limits.cpu"),
    # A count or replica number is an integer (issue 19 item 4): a string of digits is refused as one.
    ([tenant("a", quotas={A100: 1}), vm("tenant-a", "v", [{"class": "a100", "count": HUGE}])],
     "spec.gpus[0].count is not an integer"),
    ([tenant("a", quotas={A100: 1}), vm("tenant-a", "v", [{"class": "a100", "count": 10**400}])],
     "spec.gpus[0].count is too large"),
    ([tenant("a", quotas={A100: 1}), vm("tenant-a", "v", [{"class": "a100", "count": 2**40}])],
     "spec.gpus[0].count is too large"),
    ([tenant("a", quotas={A100: 1}), nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=10**30)],
     "spec.maxReplicas is too large"),
])
def test_item8_a_hostile_number_anywhere_in_the_state_is_bad_input_naming_the_field(tmp_path, state, field):
    """Bad input for the audit; a write in the pools of the object holding it (tenant-a) is
    refused naming it, as the webhook refuses it (issue 28 item 2)."""
    _bad_input(run_check(tmp_path, [*classes(), *state]), field)
    refused = run_check(tmp_path, [*classes(), *state], vm("tenant-a", "w", [{"class": "a100"}]))
    assert refused.exit_code == 1 and "cannot be shown to fit" in refused.output, refused.output
    assert field in refused.output and "Traceback" not in refused.output


@pytest.mark.parametrize("write,field", [
    (tenant("b", "tenant-a", quotas={A100: HUGE}), "resourceQuotas"),
    (tenant("b", "tenant-a", quotas={"cpu": "1e9999999"}), "exponent out of range"),
    (vm("tenant-a", "w", [{"class": "a100", "count": "1e9999999"}]), "spec.gpus[0].count"),
    (nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=1, minReplicas=HUGE), "spec.minReplicas is not an integer"),
    (nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=1, minReplicas=10**400), "spec.minReplicas is too large"),
])
def test_item8_a_hostile_number_in_the_write_is_bad_input(tmp_path, write, field):
    _bad_input(run_check(tmp_path, [*classes(), tenant("a", quotas={A100: 1, "cpu": 4})], write), field)


def test_item8_numbers_past_the_parsers_digit_limit_are_bad_input(tmp_path):
    (tmp_path / "s.yaml").write_text(f"apiVersion: {APPS}\nkind: Tenant\nmetadata: {{name: a, namespace: tenant-root}}\n"
                                     f"spec: {{resourceQuotas: {{cpu: {'9' * 5000}}}}}\n")
    _bad_input(_invoke("--state", str(tmp_path / "s.yaml")), "s.yaml", "too long (at most 4300 digits)")
    (tmp_path / "s.json").write_text('{"kind": "Tenant", "spec": {"x": ' + "9" * 5000 + "}}")
    _bad_input(_invoke("--state", str(tmp_path / "s.json")), "s.json", "too long (at most 4300 digits)")


# -- item 9: raising a value is never worse than keeping it -------------------------

def test_item9_raising_a_value_below_usage_is_admitted_when_keeping_it_is(tmp_path):
    state = [tenant("a", quotas={"cpu": 20}), tenant("b", "tenant-a", quotas={"cpu": 4}),
             pod("tenant-a-b", "p", {"cpu": "6"})]
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 4}))[0] == 0
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 5}))[0] == 0
    # Only the gate against the pool root applies: 14 left besides b's 6.
    assert run_check_json(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 20}))[0] == 0
    assert run_check_json(tmp_path, state + [tenant("c", "tenant-a", quotas={"cpu": 10})],
                          tenant("b", "tenant-a", quotas={"cpu": 11}))[0] == 1


# -- item 10: names ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["b-c", "B", "1b", "b.c"])
def test_item10_a_tenant_name_outside_the_grammar_is_bad_input(tmp_path, name):
    _bad_input(run_check(tmp_path, [tenant("a")], tenant(name, "tenant-a")), "is not a tenant name")
    _bad_input(run_check(tmp_path, [tenant("a"), tenant(name, "tenant-a")]), "is not a tenant name")


@pytest.mark.parametrize("key", ["a100.gpuclass.cozystack.io", "gpuclass.cozystack.io", "GPUCLASS.cozystack.io"])
def test_item10_a_budget_domain_key_without_a_slash_is_a_malformed_budget_key(tmp_path, key):
    code, answer = run_check_json(tmp_path, [tenant("a", quotas={"cpu": 4})], tenant("b", "tenant-a", quotas={key: 1}))
    assert code == 1 and answer["reasons"][0]["field"] == f'spec.resourceQuotas["{key}"]'
    assert "unsupported GPU budget key" in answer["reasons"][0]["message"]


def test_item10_a_namespace_no_tenant_can_own_is_reported(tmp_path):
    state = [*classes(), tenant("root", quotas={A100: 1})]
    code, answer = run_check_json(tmp_path, state, vm("tenant--x", "v", [{"class": "a100", "count": 5}]))
    assert code == 1 and answer["reasons"][0]["field"] == "metadata.namespace"
    assert "tenant--x" in answer["reasons"][0]["message"]
    code, findings = run_check_json(tmp_path, state + [vm("tenant--x", "v", [{"class": "a100"}]),
                                                       pod("tenant-A", "p", {"cpu": "1"})])
    assert code == 1
    assert sorted(f["namespace"] for f in findings if f["kind"] == "malformed-namespace") == ["tenant--x", "tenant-A"]


# -- item 11: the write file inside the state ----------------------------------------

@pytest.mark.parametrize("output", ["text", "json"])
def test_item11_a_write_that_is_also_in_the_state_is_checked_against_the_rest(tmp_path, output):
    repo = tmp_path / "gitops"
    repo.mkdir()
    write_json(repo / "base.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 2}),
                                                    vm("tenant-a", "other", [{"class": "a100"}])])))
    write_json(repo / "vm.json", vm("tenant-a", "v", [{"class": "a100", "count": 2}]))
    result = _invoke("--state", str(repo), "--write", str(repo / "vm.json"), "-o", output)
    assert result.exit_code == 1, result.output  # 1 + 2 > 2: not an update of itself
    note = f"{repo / 'vm.json'} is also in --state: the state's copy is ignored"
    if output == "json":
        assert note in json.loads(result.stdout)["warnings"][0]
    else:
        assert result.stdout.startswith("refused") and f"warning: {note}" in result.output
    # Named another way, it is the same file.
    result = _invoke("--state", str(repo), "--write", str(tmp_path / "gitops" / ".." / "gitops" / "vm.json"))
    assert result.exit_code == 1 and "is also in --state" in result.output


# -- item 8, fuzzed: no input makes `check` print a traceback --------------------------

_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True),
    st.sampled_from(["9" * 3000, "1e9999999", "1e-9999999", "-1", "500m", "4000m", "1Ei", "0x10", "", "Infinity"]),
    st.text(max_size=8), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_fuzzed = st.one_of(
    st.builds(lambda name, ns, q: tenant(name, ns, quotas=q), st.sampled_from(["a", "b", "root", "a-b", "X"]),
              st.sampled_from(["tenant-root", "tenant-a", "tenant--x"]),
              st.dictionaries(st.sampled_from([A100, ALL, "cpu", "memory", "a100.gpuclass.cozystack.io"]), _values, max_size=3)),
    st.builds(lambda ns, count, name: vm(ns, "v", [{"class": "a100", "count": count}, {"name": name}]),
              st.sampled_from(["tenant-a", "tenant-root"]), _values, st.sampled_from(["nvidia.com/a100", "x.io/y"])),
    st.builds(lambda low, high: nodes("tenant-a", "p", [{"class": "a100"}], max_replicas=high, minReplicas=low), _values, _values),
    st.builds(lambda cpu: pod("tenant-a", "p", {"cpu": cpu}), _values),
    st.builds(lambda used: quota("tenant-a", "q", {"limits.cpu": used}), _values),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_fuzzed, max_size=4), _fuzzed)
def test_item8_no_state_or_write_makes_check_fail_with_a_traceback(tmp_path, state, write):
    result = run_check(tmp_path, [*classes(), tenant("a", quotas={"cpu": 4, A100: 2}), *state], write)
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
