"""Property tests: the pool tree's JSON says what the audit and the write
checks say, for random states (the budget property tests' generators, with
pods for ordinary usage and random vGPU requests):

- every declared key has a row with the declaration's value; a row is over
  budget exactly when the audit reports it over-committed, with the same
  budget, reserved/used and carved-out figures; `left` is what remains;
- a row's carve-outs add up to its carved-out figure and its reservations
  (or usages) to its used figure: the breakdowns hide nothing;
- what is left is what `check` admits: in every GPU pool root, a new VM of
  `left` devices of a class (the least over the keys covering it) is
  admitted and one more is refused; a new sub-tenant asking `left` of an
  ordinary key is admitted and one more is refused;
- the vGPU entitlement is the one the class check applies, and it is broken
  by the first link from the top that does not ask;
- the tree holds every namespace of the state's tenant tree once."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st
from test_budgets_builders import pod, tenant, vm
from test_budgets_properties import GPUCLASSES, SETTINGS, _identity, _materialize, namespace_of, paths, writes

from cozyrender.budgets import audit, check_write, index_state
from cozyrender.budgets.classes import namespace_entitled
from cozyrender.namespaces import ROOT_NAMESPACE
from cozyrender.kube.quantity import parse_quantity
from cozyrender.tree import build_tree
from cozyrender.tree.jsonout import tree_data
from cozyrender.tree.model import PLATFORM

CLASSES = ("a100", "h100")

pods = st.lists(st.tuples(st.one_of(st.just(()), paths), st.integers(0, 3)), max_size=4)
vgpu_requests = st.dictionaries(st.one_of(st.just(()), paths), st.booleans(), max_size=4)


@st.composite
def states(draw):
    ops = draw(st.lists(writes, max_size=14))
    objects = {}
    for op in ops:
        obj = _materialize(op, {})
        objects[_identity(obj)] = obj
    for path, requested in draw(vgpu_requests).items():  # spec.gpu.vgpu on some tenants
        for key, obj in objects.items():
            if obj["kind"] == "Tenant" and _namespace_of_tenant(obj) == namespace_of(path):
                objects[key] = dict(obj, spec=dict(obj["spec"], gpu={"vgpu": requested}))
    result = list(objects.values())
    for index, (path, cpu) in enumerate(draw(pods)):
        result.append(pod(namespace_of(path), f"p{index}", {"cpu": str(cpu)}))
    platform = draw(st.sampled_from(["true", "false", None]))
    if platform is not None:
        result.append({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": ROOT_NAMESPACE, "labels": {"namespace.cozystack.io/vgpu": platform}}})
    return GPUCLASSES + result


def _namespace_of_tenant(obj: dict) -> str:
    from cozyrender.budgets import parse_declaration

    return parse_declaration(obj).namespace


def _value(figure) -> Fraction:
    return Fraction(figure) if isinstance(figure, int) else parse_quantity(figure)


@SETTINGS
@given(states())
def test_rows_are_what_the_audit_reports(objects):
    state = index_state(objects)
    findings = audit(state)
    data = tree_data(build_tree(state, findings))
    over = {(f.namespace, f.field): f for f in findings if f.kind == "over-committed"}
    rows_seen = set()
    for node in data["tenants"]:
        declaration = state.declarations.get(node["namespace"])
        declared = 0 if declaration is None else len(declaration.budgets) + len(declaration.ordinary)
        assert len(node["keys"]) == declared
        for row in node["keys"]:
            field = f'spec.resourceQuotas["{row["key"]}"]'
            rows_seen.add((node["namespace"], field))
            budget, used, carved, left = (_value(row[k]) for k in ("budget", "used", "carvedOut", "left"))
            assert left == budget - used - carved
            finding = over.get((node["namespace"], field))
            assert row["overCommitted"] == (finding is not None) == (used + carved > budget)
            if finding is not None:
                numbers = dict(finding.numbers)
                assert _value(numbers["budget"]) == budget
                assert _value(numbers["reserved" if row["type"] == "gpu" else "used"]) == used
                assert _value(numbers["carvedOut"]) == carved
                assert row["causes"]
            # the breakdowns add up
            assert sum((_value(c["charge"]) for c in row["carveOuts"]), Fraction(0)) == carved
            if row["type"] == "gpu":
                assert sum(r["devices"] for r in row["reservations"]) == used
            else:
                assert sum((_value(u["used"]) for u in row["usage"]), Fraction(0)) == used
    assert set(over) <= rows_seen  # every over-commit the audit reports is on a row
    namespaces = [node["namespace"] for node in data["tenants"]]
    assert len(namespaces) == len(set(namespaces))
    assert set(namespaces) == {ROOT_NAMESPACE} | {ns for ns in state.children} | {
        child for children in state.children.values() for child in children}


@SETTINGS
@given(states(), st.sampled_from(CLASSES))
def test_what_is_left_is_what_check_admits(objects, gpu_class):
    state = index_state(objects)
    data = tree_data(build_tree(state, audit(state)))
    for node in data["tenants"]:
        namespace = node["namespace"]
        gpu_rows = [row for row in node["keys"] if row["type"] == "gpu"
                    and row["key"] in ("gpuclass.cozystack.io/devices", f"{gpu_class}.gpuclass.cozystack.io/devices")]
        if gpu_rows:
            room = min(row["left"] for row in gpu_rows)
            # the hierarchical rule: budgets above may leave less
            room = min([room] + [limit["left"] for limit in node["limitsAbove"] if limit["class"] == gpu_class])
            fits = vm(namespace, "newcomer", [{"class": gpu_class, "count": max(room, 0)}])
            beyond = vm(namespace, "newcomer", [{"class": gpu_class, "count": max(room, 0) + 1}])
            assert check_write(state, fits).allowed, (namespace, room)
            refused = check_write(state, beyond)
            pools = {namespace} | {limit["pool"] for limit in node["limitsAbove"] if limit["class"] == gpu_class}
            assert not refused.allowed and any(f"pool {pool}" in r.message for r in refused.reasons for pool in pools)
        cpu = [row for row in node["keys"] if row["type"] == "ordinary" and row["quotaKey"] == "limits.cpu"]
        if cpu:
            room = _value(cpu[0]["left"])
            beyond = tenant("zq", namespace, quotas={"cpu": str(max(room, Fraction(0)) + 1)})
            assert not check_write(state, beyond).allowed
            if room >= 0:
                assert check_write(state, tenant("zq", namespace, quotas={"cpu": str(room)})).allowed, (namespace, room)
            else:  # over already: nothing more fits, not even 0
                assert not check_write(state, tenant("zq", namespace, quotas={"cpu": "0"})).allowed


@SETTINGS
@given(states(), st.sampled_from([None, True, False]))
def test_the_vgpu_chain_is_the_class_checks(objects, override):
    state = index_state(objects)
    tree = build_tree(state, audit(state), platform_vgpu=override)
    platform = override if override is not None else bool(state.platform_vgpu) and not state.platform_disagreement
    for node in tree.shown():
        if node.namespace == ROOT_NAMESPACE:
            assert node.vgpu.entitled == platform
            continue
        assert node.vgpu.entitled == namespace_entitled(state, node.namespace, platform)
        if node.vgpu.entitled:
            assert node.vgpu.broken_by is None
            continue
        # the first link from the top that breaks it
        chain = []
        current = node.namespace
        while current != ROOT_NAMESPACE:
            chain.append(current)
            current = tree.nodes[current].parent
        chain.reverse()
        if not platform:
            assert node.vgpu.broken_by == PLATFORM
        else:
            first = next(ns for ns in chain if not namespace_entitled(state, ns, platform))
            assert node.vgpu.broken_by == first


@SETTINGS
@given(states(), st.data())
def test_filters_only_hide(objects, data):
    """--tenant, --class and --depth leave every figure as the whole tree
    has it; they hide namespaces (counted in `hidden`) and rows, never
    change one; --class keeps exactly the GPU rows covering the class and
    every tenant that has one or reserves the class."""
    from cozyrender.namespaces import is_within

    state = index_state(objects)
    findings = audit(state)
    whole = {node["namespace"]: node for node in tree_data(build_tree(state, findings))["tenants"]}
    top = data.draw(st.sampled_from(sorted(whole)))
    gpu_class = data.draw(st.sampled_from([None, *CLASSES]))
    depth = data.draw(st.one_of(st.none(), st.integers(0, 3)))
    shown = tree_data(build_tree(state, findings, tenant=top, gpu_class=gpu_class, depth=depth))
    assert shown["root"] == top
    subtree = [ns for ns in whole if is_within(ns, top)]
    assert len(shown["tenants"]) + shown["filters"]["hidden"] == len(subtree)

    def covers(row):
        return row["type"] == "gpu" and row["key"] in (
            "gpuclass.cozystack.io/devices", f"{gpu_class}.gpuclass.cozystack.io/devices")

    seen = set()
    for node in shown["tenants"]:
        full = whole[node["namespace"]]
        seen.add(node["namespace"])
        assert is_within(node["namespace"], top)
        assert depth is None or node["depth"] - whole[top]["depth"] <= depth
        assert set(node["children"]) <= set(full["children"])
        expected_rows = full["keys"] if gpu_class is None else [row for row in full["keys"] if covers(row)]
        assert node["keys"] == expected_rows
        unchanged = {k: v for k, v in full.items() if k not in ("keys", "children", "chargedTo")}
        assert {k: v for k, v in node.items() if k not in ("keys", "children", "chargedTo")} == unchanged
    for namespace in subtree:
        full = whole[namespace]
        if depth is not None and full["depth"] - whole[top]["depth"] > depth:
            assert namespace not in seen
            continue
        if gpu_class is None:
            assert namespace in seen
        elif any(covers(row) for row in full["keys"]) or gpu_class in full["reserved"]:
            assert namespace in seen
