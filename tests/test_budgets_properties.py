"""Property tests over random tenant trees and write sequences:
- no pool holds more devices than the budgets above it allow, counting every
  path above (sub-pools included, through the keys that cap them), after
  every admitted write of any sequence, the attacker's moves included:
  lowering a child's budget and then growing the parent's pool, children
  declaring only the all-classes key, device-plugin names; only a pool whose
  own value was lowered may hold more than that value (issue 11);
- the hierarchical rule (issue 19 item 5b): no admitted write raises what a pool root's subtree physically holds (sub-pools counted in
  the classes they cap) past any of its budgets, lowered or not;
- a workload write with no growth is always admitted;
- a Tenant write that stops a tenant being a pool root (dropping all its
  keys, or all its ordinary keys) never breaks the invariant either;
- answers do not depend on the order of objects in the state.

The invariant is checked by a naive oracle that recomputes every pool from
scratch, independently of the index's aggregates."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_budgets_builders import gpuclass, kubernetes, node_group, nodes, pod, tenant, vm

from cozyrender.budgets import BudgetInputError, audit, check_write, index_state, parse_declaration, parse_workload
from cozyrender.namespaces import ROOT_NAMESPACE, ancestors, parent_namespace

CLASSES = ("a100", "h100")
BUDGET_KEYS = ("gpuclass.cozystack.io/devices", "a100.gpuclass.cozystack.io/devices", "h100.gpuclass.cozystack.io/devices")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

paths = st.lists(st.sampled_from("ab"), min_size=1, max_size=3).map(tuple)
workload_paths = st.one_of(st.just(()), paths)
tenant_paths = workload_paths  # () is the root tenant, `root` in tenant-root
quotas = st.dictionaries(st.sampled_from(BUDGET_KEYS + ("cpu",)), st.integers(0, 4), max_size=3)
class_entries = st.fixed_dictionaries({"class": st.sampled_from(CLASSES), "count": st.integers(0, 3)})
# Device-plugin names: a class's resource, or another device (issue 11 item 3).
raw_entries = st.fixed_dictionaries({"name": st.sampled_from(["nvidia.com/a100", "vendor.example/fpga"]),
                                     "count": st.integers(0, 50)})
gpus = st.lists(st.one_of(class_entries, class_entries, class_entries, raw_entries), min_size=1, max_size=2)
# A Kubernetes cluster's node groups: each a worker pool of its own.
node_groups = st.dictionaries(st.sampled_from(["md0", "md1"]),
                              st.builds(node_group, gpus, st.integers(0, 3)), min_size=1, max_size=2)


def namespace_of(path: tuple[str, ...]) -> str:
    namespace = ROOT_NAMESPACE
    for name in path:
        namespace = "tenant-" + name if namespace == ROOT_NAMESPACE else f"{namespace}-{name}"
    return namespace


def tenant_at(path: tuple[str, ...], quota_map: dict) -> dict:
    if not path:
        return tenant("root", ROOT_NAMESPACE, quotas=quota_map)
    return tenant(path[-1], namespace_of(path[:-1]), quotas=quota_map)


# The classes the workloads name exist: a class refusal would hide the budget rules.
GPUCLASSES = [gpuclass(name, f"nvidia.com/{name}") for name in CLASSES]

writes = st.one_of(
    st.tuples(st.just("tenant"), tenant_paths, quotas),
    st.tuples(st.just("drop"), tenant_paths, st.booleans()),
    st.tuples(st.just("vm"), workload_paths, st.integers(0, 1), gpus),
    st.tuples(st.just("pool"), workload_paths, st.integers(0, 1), gpus, st.integers(0, 3)),
    st.tuples(st.just("k8s"), workload_paths, st.integers(0, 1), node_groups),
    # The attacker lowering a child (then growing elsewhere): one key, to a smaller value.
    st.tuples(st.just("lower"), tenant_paths, st.sampled_from(BUDGET_KEYS + ("cpu",)), st.integers(0, 3)),
)


def _identity(obj: dict) -> tuple:
    return (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])


def _materialize(write: tuple, objects: dict) -> dict:
    """The object a write op stands for; a Tenant update never lowers or removes a key."""
    if write[0] == "tenant":
        _, path, quota_map = write
        obj = tenant_at(path, quota_map)
        old = objects.get(_identity(obj))
        if old is not None:
            merged = dict(old["spec"].get("resourceQuotas") or {})
            for key, value in quota_map.items():
                merged[key] = max(value, merged.get(key, 0))
            obj = tenant_at(path, merged)
        return obj
    if write[0] == "lower":
        _, path, key, value = write
        old = objects.get(_identity(tenant_at(path, {})))
        merged = dict((old["spec"].get("resourceQuotas") or {}) if old is not None else {})
        merged[key] = min(value, merged.get(key, value))
        return tenant_at(path, merged)
    if write[0] == "drop":  # all its keys, or all its ordinary keys: it stops being a pool root
        _, path, everything = write
        old = objects.get(_identity(tenant_at(path, {})))
        kept = {} if everything or old is None else {
            key: value for key, value in (old["spec"].get("resourceQuotas") or {}).items() if key in BUDGET_KEYS
        }
        return tenant_at(path, kept)
    if write[0] == "vm":
        _, path, index, entries = write
        return vm(namespace_of(path), f"vm{index}", entries)
    if write[0] == "k8s":
        _, path, index, groups = write
        return kubernetes(namespace_of(path), f"k{index}", groups)
    _, path, index, entries, replicas = write
    return nodes(namespace_of(path), f"pool{index}", entries, max_replicas=replicas)


def naive_held(objects: list[dict], nest: bool = False) -> dict[tuple[str, str], tuple[int, int]]:
    """(pool root, budget key) -> (devices physically held in its subtree for
    the classes the key covers, its value): `naive_violations`' holdings."""
    held: dict[tuple[str, str], tuple[int, int]] = {}
    naive_violations(objects, held=held, nest=nest)
    return held


def naive_violations(objects: list[dict], lowered: set = frozenset(), held: dict | None = None,
                     nest: bool = False) -> list[str]:
    """Every (pool root, key) whose pool holds more devices of the classes
    the key covers than the key allows, counting every path below it: the
    pool's own reservations, and what each carving sub-pool holds of those
    classes through the keys that cap it (a sub-pool declaring only class
    keys caps those classes; one declaring the all-classes key caps every
    class). Computed from scratch, apart from the index and its charges.
    (root, key) pairs in `lowered` may hold more than their own value.
    Also every ordinary pool whose carve-outs exceed its value. With `nest`
    (the platform's gpu-budgets-nest switch), a GPU pool root is a tenant
    declaring a key in the GPU budget domain; otherwise one declaring any key."""
    from cozyrender.keys import declared_in_budget_domain
    declarations = {}
    for obj in objects:
        if obj["kind"] == "Tenant":
            declaration = parse_declaration(obj)
            declarations[declaration.namespace] = declaration
    workloads = [parse_workload(obj) for obj in objects if obj["kind"] in ("VMInstance", "KubernetesNodes", "Kubernetes")]

    def root_of(namespace):
        for candidate in ancestors(namespace):
            keys = declarations[candidate].declared_keys if candidate in declarations else ()
            if any(declared_in_budget_domain(key) for key in keys) if nest else keys:
                return candidate
        return None

    def capped(declaration):
        if any(key.gpu_class is None for key in declaration.budgets):
            return None  # every class
        return {key.gpu_class for key in declaration.budgets}

    def within(gpu_class, classes):
        return classes is None or gpu_class in classes

    def meet(one, other):
        if one is None:
            return other
        if other is None:
            return one
        return one & other

    def holds(root, classes):
        """Devices of `classes` (None: all) in root's pool and, through the
        keys that cap them, in the sub-pools carving from it."""
        total = sum(n for w in workloads if root_of(w.namespace) == root
                    for c, n in w.reservations.items() if within(c, classes))
        for namespace, child in declarations.items():
            parent = parent_namespace(namespace)
            if child.budgets and parent is not None and root_of(parent) == root:
                total += holds(namespace, meet(classes, capped(child)))
        return total

    violations = []
    for root, declaration in declarations.items():
        for key, budget in declaration.budgets.items():
            holding = holds(root, None if key.gpu_class is None else {key.gpu_class})
            if held is not None:
                held[(root, key.key)] = (holding, budget)
            if (root, key.key) in lowered:
                continue
            if holding > budget:
                violations.append(f"{root} {key.key}: holds {holding} > {budget}")

    def ordinary_root_of(namespace):
        for candidate in ancestors(namespace):
            if candidate in declarations and declarations[candidate].is_ordinary_root:
                return candidate
        return None

    for root, declaration in declarations.items():  # no pods here: ordinary pools hold only carve-outs
        for key, value in declaration.ordinary.items():
            if (root, "cpu") in lowered:
                continue
            charges = sum(
                child.ordinary.get(key, 0)
                for ns, child in declarations.items()
                if parent_namespace(ns) and ordinary_root_of(parent_namespace(ns)) == root
            )
            if charges > value:
                violations.append(f"{root} {key}: carved out {charges} > {value}")
    return violations


A100 = "a100.gpuclass.cozystack.io/devices"
ALL = "gpuclass.cozystack.io/devices"


@SETTINGS
@given(st.lists(writes, min_size=1, max_size=14))
# The reviewer's cases, rare for random draws: the root tenant newly declaring
# a budget below its pool; a cpu-only sub-tenant dropping its keys so its
# devices rejoin its parent's pool.
@example([("vm", (), 0, [{"class": "a100", "count": 3}]), ("tenant", (), {A100: 2})])
@example([("tenant", ("a",), {A100: 1}), ("tenant", ("a", "b"), {"cpu": 1}),
          ("vm", ("a", "b"), 0, [{"class": "a100", "count": 3}]), ("drop", ("a", "b"), True)])
# Issue 11 item 1: lower a child below what it holds, then grow the parent's pool.
@example([("tenant", ("a",), {A100: 4}), ("tenant", ("a", "b"), {A100: 4}),
          ("vm", ("a", "b"), 0, [{"class": "a100", "count": 3}]), ("lower", ("a", "b"), A100, 0),
          ("vm", ("a",), 0, [{"class": "a100", "count": 3}])])
# Issue 11 item 2: a grandchild declaring only the all-classes key under a class-only child.
@example([("tenant", ("a",), {ALL: 4}), ("tenant", ("a", "b"), {A100: 2}), ("tenant", ("a", "b", "a"), {ALL: 2}),
          ("vm", ("a", "b", "a"), 0, [{"class": "a100", "count": 2}]), ("vm", ("a",), 0, [{"class": "h100", "count": 2}]),
          ("vm", ("a", "b"), 1, [{"class": "a100", "count": 1}])])
# Issue 19 item 5b: the parent lowers `a`, then grows `b`'s pool below it.
@example([("tenant", ("a",), {ALL: 5}), ("vm", ("a",), 0, [{"class": "a100", "count": 2}]),
          ("tenant", ("a", "b"), {A100: 1}), ("lower", ("a",), ALL, 1), ("vm", ("a", "b"), 0, [{"class": "a100", "count": 1}])])
# The same through a Tenant write: an escaped subtree declaring a key under a lowered grandparent.
@example([("tenant", (), {ALL: 5}), ("tenant", ("a",), {ALL: 5}), ("tenant", ("a", "b"), {"cpu": 1}),
          ("vm", ("a", "b"), 0, [{"class": "a100", "count": 3}]), ("lower", (), ALL, 1),
          ("tenant", ("a", "b"), {A100: 3})])
def test_invariant_holds_after_every_admitted_write(sequence):
    """The charge invariant for every pool never lowered, and the physical
    one (the hierarchical rule) for every pool root, lowered or not: no
    admitted write (a workload, or a Tenant making an escaped subtree count)
    raises what a subtree holds past its budget."""
    _check_invariant(sequence, nest=False)


# The platform's gpu-budgets-nest switch on (issue 28 item 5): a tenant declaring only cpu
# stays in its parent's GPU pool, so attack 5's VM is refused and the invariant counts it there.
NESTING = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": "tenant-root"},
            "stringData": {"values.yaml": "_cluster:\n  gpu-budgets-nest: true\n"}}]


@SETTINGS
@given(st.lists(writes, min_size=1, max_size=14))
@example([("tenant", ("a",), {A100: 2}), ("tenant", ("a", "b"), {"cpu": 1}),
          ("vm", ("a", "b"), 0, [{"class": "a100", "count": 3}])])
@example([("tenant", ("a",), {A100: 2}), ("vm", ("a", "b"), 0, [{"class": "a100", "count": 2}]),
          ("tenant", ("a", "b"), {"cpu": 1}), ("tenant", ("a", "b"), {"cpu": 1, A100: 2}), ("drop", ("a", "b"), False),
          ("vm", ("a",), 1, [{"class": "a100", "count": 1}])])
def test_invariant_holds_after_every_admitted_write_when_gpu_budgets_nest(sequence):
    """The same invariants with GPU pool roots decided by GPU keys alone."""
    _check_invariant(sequence, nest=True)


def _check_invariant(sequence, nest: bool) -> None:
    objects: dict[tuple, dict] = {}
    lowered: set[tuple[str, str]] = set()
    platform = GPUCLASSES + (NESTING if nest else [])
    for write in sequence:
        obj = _materialize(write, objects)
        decision = check_write(index_state(platform + list(objects.values())), obj)
        if decision.allowed:
            before = naive_held(list(objects.values()), nest)
            after = naive_held([*(o for k, o in objects.items() if k != _identity(obj)), obj], nest)
            assert [
                (pair, before.get(pair, (0, 0))[0], held, budget) for pair, (held, budget) in after.items()
                if held > budget and held > before.get(pair, (0, 0))[0]
            ] == [], (obj, decision)
        if decision.allowed:
            old = objects.get(_identity(obj))
            if obj["kind"] == "Tenant" and old is not None:
                before = old["spec"].get("resourceQuotas") or {}
                after = obj["spec"].get("resourceQuotas") or {}
                namespace = parse_declaration(obj).namespace
                lowered |= {(namespace, key) for key, value in after.items() if key in before and value < before[key]}
            objects[_identity(obj)] = obj
            assert naive_violations(list(objects.values()), lowered, nest=nest) == [], (obj, decision)


random_state = st.lists(writes, max_size=14).map(
    lambda ops: list({_identity(o): o for o in (_materialize(op, {}) for op in ops)}.values())
)


@SETTINGS
@given(random_state, st.data())
def test_a_write_with_no_growth_is_always_admitted(objects, data):
    # (device-plugin names are refused where classes or budgets apply, growth or not)
    def pools(obj):  # the spec or node groups holding gpus and maxReplicas
        return list(obj["spec"]["nodeGroups"].values()) if obj["kind"] == "Kubernetes" else [obj["spec"]]

    workloads = [o for o in objects if o["kind"] in ("VMInstance", "KubernetesNodes", "Kubernetes")
                 and all("class" in entry for pool in pools(o) for entry in pool["gpus"])]
    if not workloads:
        return
    old = data.draw(st.sampled_from(workloads))

    def shrink(pool: dict) -> dict:
        shrunk = [dict(entry, count=data.draw(st.integers(0, entry["count"]))) for entry in pool["gpus"]]
        new = dict(pool, gpus=data.draw(st.permutations(shrunk)), instanceType="u1.large")  # a change that is not a GPU
        if "maxReplicas" in pool:
            new["maxReplicas"] = data.draw(st.integers(0, pool["maxReplicas"]))
        return new

    if old["kind"] == "Kubernetes":
        new = dict(old, spec={"nodeGroups": {name: shrink(group) for name, group in old["spec"]["nodeGroups"].items()}})
    else:
        new = dict(old, spec=shrink(old["spec"]))
    assert check_write(index_state(GPUCLASSES + objects), new).allowed


@SETTINGS
@given(random_state, writes, st.randoms(use_true_random=False))
def test_answers_do_not_depend_on_object_order(objects, write, rnd):
    obj = _materialize(write, {_identity(o): o for o in objects})
    shuffled = list(objects)
    rnd.shuffle(shuffled)
    first, second = index_state(objects), index_state(shuffled)
    assert check_write(first, obj).as_dict() == check_write(second, obj).as_dict()
    assert [f.as_dict() for f in audit(first)] == [f.as_dict() for f in audit(second)]


def _other_version(obj: dict) -> dict:
    return dict(obj, apiVersion=obj["apiVersion"].rpartition("/")[0] + "/v1beta1" if "/" in obj["apiVersion"]
                else obj["apiVersion"])


def _answer(objects: list[dict], write: dict) -> tuple:
    """A check's and the audit's answers, or the kind of bad input."""
    try:
        state = index_state(objects)
        return check_write(state, write).as_dict(), [f.as_dict() for f in audit(state)]
    except BudgetInputError:
        return ("bad input",)


@SETTINGS
@given(random_state, writes, st.randoms(use_true_random=False), st.data())
def test_the_same_object_under_two_versions_in_any_order_is_one_object(objects, write, rnd, data):
    """Issue 11 item 7: an identical copy under another version changes no
    answer, wherever it is; a different copy is bad input in every order."""
    if not objects:
        return
    obj = _materialize(write, {_identity(o): o for o in objects})
    copy_of = data.draw(st.sampled_from(objects))
    with_copy = objects + [_other_version(copy_of)]
    rnd.shuffle(with_copy)
    assert _answer(GPUCLASSES + with_copy, obj) == _answer(GPUCLASSES + objects, obj)
    changed = _other_version(copy_of)
    changed["metadata"] = dict(changed["metadata"], labels={"changed": "yes"})
    different = objects + [changed]
    rnd.shuffle(different)
    assert _answer(GPUCLASSES + different, obj) == ("bad input",)


HOSTILE = ["9" * 5000, "1e9999999", "1e5000", 10**400, "0." + "0" * 3000 + "1", "9" * 40 + "Ei"]


def _poison(obj: dict, value: object, data) -> dict:
    """`obj` with one number replaced by `value`."""
    obj = json.loads(json.dumps(obj))
    if obj["kind"] == "Tenant":
        quotas = obj["spec"].setdefault("resourceQuotas", {})
        quotas[data.draw(st.sampled_from(sorted(quotas) or list(BUDGET_KEYS + ("cpu",))))] = value
    elif obj["kind"] == "Pod":
        obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] = value
    else:
        spec = obj["spec"] if obj["kind"] != "Kubernetes" else next(iter(obj["spec"]["nodeGroups"].values()))
        field = data.draw(st.sampled_from(["count", "maxReplicas"] if obj["kind"] != "VMInstance" else ["count"]))
        if field == "count":
            spec["gpus"][0]["count"] = value
        else:
            spec["maxReplicas"] = value
    return obj


@SETTINGS
@given(random_state, st.sampled_from(HOSTILE), st.randoms(use_true_random=False), st.data())
def test_a_hostile_number_anywhere_in_the_state_is_bad_input_in_any_order(objects, value, rnd, data):
    """Issue 11 item 8: wherever one hostile number sits (a budget, an
    ordinary value, a count, maxReplicas, a pod's limit), indexing the state
    is bad input, never a traceback, a refusal or a long computation."""
    objects = objects + [pod("tenant-a", "p", {"cpu": "1"})]
    target = data.draw(st.sampled_from([o for o in objects if o["kind"] != "VMInstance" or o["spec"].get("gpus")]))
    if target["kind"] in ("VMInstance", "KubernetesNodes") and "count" not in target["spec"]["gpus"][0]:
        return
    if target["kind"] == "Kubernetes" and "count" not in next(iter(target["spec"]["nodeGroups"].values()))["gpus"][0]:
        return
    poisoned = [_poison(o, value, data) if o is target else o for o in objects]
    rnd.shuffle(poisoned)
    state_of = [*GPUCLASSES, tenant("a", quotas={"cpu": 4}), *poisoned] if target["kind"] == "Pod" else GPUCLASSES + poisoned
    with pytest.raises(BudgetInputError):
        index_state(state_of)
