"""Issue 19 item 10: messages point at the object to fix.
- the audit names the Tenant object (kind, namespace, name) declaring a key,
  in the message and as `object` in JSON, not only the namespace it owns;
- "carved out N" lists the children holding it;
- the vGPU refusal names the tenant in the chain that is not entitled;
- the bundled example does not warn about the pattern its comments
  recommend (tests/test_check_cli.py::test_bundled_example)."""

from __future__ import annotations

from test_budgets_builders import classes, gpuclass, root_namespace, run_check_json, tenant, vm

from cozyrender.budgets import audit, check_write, index_state

A100 = "a100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"


def test_the_audit_names_the_tenant_object_declaring_the_key(tmp_path):
    state = [*classes(), tenant("a", quotas={ALL: 2}), vm("tenant-a", "v", [{"class": "a100", "count": 3}]),
             tenant("b", "tenant-a", quotas={"A100.gpuclass.cozystack.io/devices": 1}), tenant("c", "tenant-a", quotas={"cpu": 1})]
    code, findings = run_check_json(tmp_path, state)
    assert code == 1
    by_kind = {f["kind"]: f for f in findings}
    assert by_kind["over-committed"]["object"] == {"kind": "Tenant", "namespace": "tenant-root", "name": "a"}
    assert "of Tenant tenant-root/a is over" in by_kind["over-committed"]["message"]
    assert by_kind["invalid-declaration"]["object"] == {"kind": "Tenant", "namespace": "tenant-a", "name": "b"}
    assert by_kind["invalid-declaration"]["message"].startswith("Tenant tenant-a/b: ")
    assert by_kind["escapes-budget"]["object"] == {"kind": "Tenant", "namespace": "tenant-a", "name": "c"}
    assert by_kind["escapes-budget"]["message"].startswith("Tenant tenant-a/c declares its own quotas")
    assert "no budget of Tenant tenant-root/a (pool tenant-a)" in by_kind["escapes-budget"]["message"]


def test_carved_out_lists_the_children_holding_it():
    state = index_state([*classes(), tenant("a", quotas={ALL: 8}), tenant("b", "tenant-a", quotas={A100: 2}),
                         tenant("c", "tenant-a", quotas={ALL: 3}), tenant("d", "tenant-a", quotas={"cpu": 1})])
    decision = check_write(state, vm("tenant-a", "v", [{"class": "h100", "count": 4}]))
    assert decision.reasons[0].message.endswith(
        "(9 > 8); carved out by Tenant tenant-a/b 2, Tenant tenant-a/c 3")
    # For a class key, only the children charged to it.
    state = index_state([*classes(), tenant("a", quotas={A100: 4}), tenant("b", "tenant-a", quotas={A100: 2}),
                         tenant("c", "tenant-a", quotas={"h100.gpuclass.cozystack.io/devices": 3})])
    decision = check_write(state, tenant("e", "tenant-a", quotas={A100: 3}))
    assert decision.reasons[0].message.endswith("(available 2); carved out by Tenant tenant-a/b 2")
    # The audit lists them too.
    over = index_state([*classes(), tenant("a", quotas={A100: 1}), tenant("b", "tenant-a", quotas={A100: 2})])
    [finding] = audit(over)
    assert finding.message.endswith("carved out 2 = 2 > budget 1; carved out by Tenant tenant-a/b 2")


def test_the_vgpu_refusal_names_the_tenant_not_entitled():
    vgpu = gpuclass("a100-4c", "nvidia.com/a100-4c", mode="vgpu")
    objects = [vgpu, root_namespace("true"), tenant("a", vgpu=True), tenant("b", "tenant-a"),
               tenant("c", "tenant-a-b", vgpu=True)]
    decision = check_write(index_state(objects), vm("tenant-a-b-c", "v", [{"class": "a100-4c"}]))
    assert "not entitled to vGPU: Tenant tenant-a/b (namespace tenant-a-b) does not set spec.gpu.vgpu" in (
        decision.reasons[0].message)
    decision = check_write(index_state([vgpu, root_namespace("true"), tenant("a", vgpu=True)]),
                           vm("tenant-a-x", "v", [{"class": "a100-4c"}]))
    assert "not entitled to vGPU: namespace tenant-a-x has no Tenant in the state" in decision.reasons[0].message
    decision = check_write(index_state([vgpu, root_namespace("false"), tenant("a", vgpu=True)]),
                           vm("tenant-a", "v", [{"class": "a100-4c"}]))
    assert "not entitled to vGPU: the platform's gpu.vgpu is off" in decision.reasons[0].message
