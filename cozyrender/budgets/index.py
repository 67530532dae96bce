"""The state, indexed for the budget rules, and the functions that keep the
index's aggregates: the one implementation of the pool arithmetic, run for
every pool by `index_state` and for the touched ones by the live index
(`live.LiveIndex`, fed one watch event at a time).

`index_state(objects)` sorts the objects into dicts keyed by namespace and
computes the per-pool aggregates every check reads: devices reserved per
class in each budget pool, the charges of carving tenants to each pool
root, and ordinary usage per pool under the keys its root declares. A
single write check then reads a handful of entries (the namespace's
ancestors, one pool's aggregates) and never walks the whole state; only
the declaration gate also walks the written tenant's own subtree.

Two pool senses (see the design page):
- budget keys: a tenant declaring any key is a pool root;
- ordinary keys: only a tenant declaring a key outside the budget domain is
  one, so a GPU-only tenant stays in its parent's pool for cpu, memory...

The aggregates are kept in one canonical form, so an index built at once
and one built event by event are equal field by field: a figure of zero is
never stored (absent means zero), nor is an empty map or a zero Charge.

The helpers below (`classify`, `region`, `set_budget_pool`,
`update_budget_charge`, `set_ordinary_pool`, `update_ordinary_charge`,
`cascade_*`, `add_counts`...) are what both paths run; a BudgetState handed
to a check is read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

from cozyrender.gcpause import collector_paused
from cozyrender.gpuclass.classes import identity_group, is_gpuclass
from cozyrender.keys import BudgetKey
from cozyrender.kube.identity import CLUSTER_SCOPED, Copies, identity_of
from cozyrender.kube.shape import ShapeError, got, mapping, ref
from cozyrender.values_secret import is_values_secret

if TYPE_CHECKING:
    from cozyrender.gpuclass.conflicts import Conflict

from .model import (
    APPS_GROUP,
    TENANT,
    WORKLOAD_KINDS,
    Declaration,
    Workload,
    metadata_name_namespace,
    parse_declaration,
    parse_workload,
)
from .doors import DOOR_KINDS, Door, may_hold_devices, read_door
from .charges import ALL_CLASSES, NO_CHARGE, Charge, budget_charge, caps, physical_charge, tenant_charge
from cozyrender.namespaces import ROOT_NAMESPACE, ancestors, is_malformed_tenant_namespace, is_tenant_namespace, parent_namespace
from .usage import usage_under


@dataclass
class Contribution:
    """What one subtree adds to a pool: reserved devices per class, charges
    towards budget keys, ordinary usage and charges per key."""

    reserved: dict[str, int] = field(default_factory=dict)
    charges: Charge = field(default_factory=Charge)
    usage: dict[str, Fraction] = field(default_factory=dict)
    ordinary_charges: dict[str, Fraction] = field(default_factory=dict)


@dataclass
class BudgetState:
    """The indexed state. Build it with `index_state` (or keep one with
    `live.LiveIndex`); a check treats it as read-only.

    - `declarations`: tenant namespace -> its Tenant's Declaration
    - `workloads`: (kind, namespace, name) -> Workload
    - `reserved`: namespace -> class -> devices reserved there
    - `children`: namespace -> the known child namespaces (by name)
    - `pool_reserved`: budget pool root -> class -> devices reserved in its pool
    - `charges`: budget pool root -> the summed Charge of its carving tenants
    - `tenant_charges`: carving tenant's namespace -> its own Charge
      (`tenant_charge`: never less than what its pool holds)
    - `physical_below`: budget pool root -> class -> devices reserved in the
      subtrees of its carving tenants that count towards its keys (each
      subtree in the classes it caps, recursively: the hierarchical rule)
    - `tenant_physical`: carving tenant's namespace -> class -> what its
      subtree holds towards the keys above it (`physical_charge`)
    - `ordinary_charges`: ordinary pool root -> quota key -> charges of carving tenants
    - `ordinary_charge`: carving tenant's namespace -> quota key -> its charge:
      its declared value, or what its own pool already holds (usage plus its
      carving tenants' charges) when that is more (never less than it takes)
    - `pool_usage`: ordinary pool root -> quota key -> usage of its pool
    - `usage`: namespace -> usage under the keys its ordinary pool root declares
    - `quotas`, `pods`: namespace -> its ResourceQuotas / Pods, read again
      only for a key no pool root above the namespace declares
    - `gpuclasses`: GPUClass name -> object; `conflicts`: class name -> its
      Conflict, for the classes in conflict over their resource name;
      `class_resources`: device-plugin resource name -> the classes advertising it;
      `class_device_classes`: DRA DeviceClass name -> the classes naming it;
      `platform_vgpu`: the root's vGPU entitlement read from the state (None
      when the state holds neither the tenant-root Namespace label nor the
      platform values; False, with `platform_disagreement` saying why, when
      they disagree)
    - `namespace_vgpu`: tenant namespace (below the root) -> what the
      `namespace.cozystack.io/vgpu` label of its Namespace in the state says
      (the entitlement the platform rendered for it; a source that must agree
      with the Tenant chain)
    - `malformed_namespaces`: namespace named like a tenant's that no tenant
      can own -> the objects found there (they are in no pool)
    - `root_label_vgpu`, `values_vgpu`: the two sources of `platform_vgpu`
      (the tenant-root Namespace's label, `_cluster.gpu-vgpu` of the values
      Secret), None where absent
    - `gpu_budgets_nest`: the platform's switch making GPU budgets nest
      (`_cluster.gpu-budgets-nest` of the values Secret; off when absent):
      budget pool roots are then decided by GPU keys alone
    - `owned`: (kind, namespace, name) -> the devices an app or a door
      (Pod, VirtualMachine, VirtualMachineInstance) holds itself, by class;
      `doors`: the doors as read (`budgets.doors`); `claimants`: what each
      object is claimed by. `workloads` holds only the heads of the chains
      (`budgets.holders`), each with what it is charged with.
    """

    declarations: dict[str, Declaration] = field(default_factory=dict)
    workloads: dict[tuple[str, str, str], Workload] = field(default_factory=dict)
    reserved: dict[str, dict[str, int]] = field(default_factory=dict)
    children: dict[str, set[str]] = field(default_factory=dict)
    pool_reserved: dict[str, dict[str, int]] = field(default_factory=dict)
    charges: dict[str, Charge] = field(default_factory=dict)
    tenant_charges: dict[str, Charge] = field(default_factory=dict)
    physical_below: dict[str, dict[str, int]] = field(default_factory=dict)
    tenant_physical: dict[str, dict[str, int]] = field(default_factory=dict)
    ordinary_charges: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    pool_usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    gpuclasses: dict[str, dict] = field(default_factory=dict)
    conflicts: dict[str, Conflict] = field(default_factory=dict)
    platform_vgpu: bool | None = None
    platform_disagreement: str | None = None
    class_resources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    class_device_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    malformed_namespaces: dict[str, list[str]] = field(default_factory=dict)
    namespace_vgpu: dict[str, bool] = field(default_factory=dict)
    ordinary_charge: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    quotas: dict[str, list[Mapping]] = field(default_factory=dict)
    pods: dict[str, list[Mapping]] = field(default_factory=dict)
    root_label_vgpu: bool | None = None
    values_vgpu: bool | None = None
    gpu_budgets_nest: bool = False
    owned: dict[tuple[str, str, str], Workload] = field(default_factory=dict)
    doors: dict[tuple[str, str, str], Door] = field(default_factory=dict)
    claimants: dict[tuple[str, str, str], set] = field(default_factory=dict)

    def is_budget_root(self, declaration: Declaration | None) -> bool:
        """Whether `declaration`'s tenant heads a budget pool under this
        state's `gpu_budgets_nest` switch (`Declaration.is_budget_root`)."""
        return declaration is not None and declaration.is_budget_root(self.gpu_budgets_nest)

    # -- pool roots ---------------------------------------------------------

    def budget_root(self, namespace: str) -> str | None:
        """The nearest namespace at or above `namespace` whose tenant
        declares any key: the root of its pool for budget keys."""
        for candidate in ancestors(namespace):
            declaration = self.declarations.get(candidate)
            if declaration is not None and declaration.is_budget_root(self.gpu_budgets_nest):
                return candidate
        return None

    def ordinary_root(self, namespace: str) -> str | None:
        """The nearest namespace at or above `namespace` whose tenant
        declares a key outside the budget domain: its ordinary pool root."""
        for candidate in ancestors(namespace):
            declaration = self.declarations.get(candidate)
            if declaration is not None and declaration.is_ordinary_root:
                return candidate
        return None

    def reserved_for(self, root: str, key: BudgetKey) -> int:
        """Devices reserved in `root`'s pool for the classes `key` covers."""
        return covered(self.pool_reserved.get(root, {}), key)

    def charged_to(self, root: str, key: BudgetKey) -> int:
        return self.charges.get(root, NO_CHARGE).for_key(key)

    def held_in_subtree(self, root: str, key: BudgetKey) -> int:
        """Devices physically reserved in `root`'s subtree for the classes
        `key` covers: its pool's, and its carving tenants' subtrees' in the
        classes they cap (the hierarchical rule)."""
        return covered(self.pool_reserved.get(root, {}), key) + covered(self.physical_below.get(root, {}), key)

    def carving_tenants(self, root: str, key: BudgetKey | str, ordinary: bool = False) -> list[tuple[Declaration, object]]:
        """The carving tenants charged to `root` for `key` (a budget key, or
        with `ordinary` a quota key), with their charges, by namespace: who
        holds what the messages call "carved out". Walks `root`'s pool."""
        found = []
        for namespace in sorted(region(self, root, ordinary)[1]):
            if ordinary:
                charge = self.ordinary_charge.get(namespace, {}).get(key, Fraction(0))  # type: ignore[call-overload]
            else:
                charge = self.tenant_charges.get(namespace, NO_CHARGE).for_key(key)  # type: ignore[arg-type]
            if charge:
                found.append((self.declarations[namespace], charge))
        return found

    # -- subtrees -----------------------------------------------------------

    def subtree_contribution(self, namespace: str, root: str | None, ordinary: bool) -> Contribution:
        """What `namespace` and its subtree currently add to `root`'s pool
        (budget sense, or ordinary sense when `ordinary`; `root` None for
        the part in no pool): the part that leaves `root`'s pool when the
        tenant of `namespace` becomes a pool root of its own. Walks only
        that subtree's namespaces."""
        find_root = self.ordinary_root if ordinary else self.budget_root
        contribution = Contribution()
        own = self.declarations.get(namespace)
        is_root = own is not None and (own.is_ordinary_root if ordinary else self.is_budget_root(own))
        if is_root:
            # Already its own pool root: only its own charge is in `root`'s figures.
            if find_root(parent_namespace(namespace) or "") == root:
                self._add_charge(contribution, own, ordinary)
            return contribution
        if find_root(namespace) != root:
            return contribution
        members, boundary = region(self, namespace, ordinary)
        if ordinary:
            contribution.usage, contribution.ordinary_charges = ordinary_figures(self, members, boundary)
        else:
            contribution.reserved, contribution.charges, _ = budget_figures(self, members, boundary)
        return contribution

    def _add_charge(self, contribution: Contribution, declaration: Declaration, ordinary: bool) -> None:
        if ordinary:
            for key, value in self.ordinary_charge.get(declaration.namespace, {}).items():
                contribution.ordinary_charges[key] = contribution.ordinary_charges.get(key, Fraction(0)) + value
        else:
            contribution.charges.add(self.tenant_charges.get(declaration.namespace, NO_CHARGE))

    def usage_of(self, namespace: str, keys: Iterable[str]) -> dict[str, Fraction]:
        """`namespace`'s usage under quota keys `keys`: indexed where its
        ordinary pool root declares them, read from its quotas and pods
        otherwise."""
        known = self.usage.get(namespace, {})
        missing = [key for key in keys if key not in known]
        if not missing or (namespace not in self.quotas and namespace not in self.pods):
            return {key: known.get(key, Fraction(0)) for key in keys}
        used = usage_under(missing, self.quotas.get(namespace), self.pods.get(namespace))
        return {key: known[key] if key in known else used[key] for key in keys}

    def held_below(self, namespace: str, keys: Iterable[str]) -> dict[str, Fraction]:
        """What a pool rooted at `namespace` holds, per quota key of `keys`,
        whether or not its tenant is an ordinary pool root today: the usage
        of `namespace` and of every descendant up to the next ordinary pool
        roots, plus those roots' charges for the keys they declare. Walks
        that subtree only."""
        keys = list(keys)
        held = {key: Fraction(0) for key in keys}
        stack = [namespace]
        while stack:
            current = stack.pop()
            declaration = self.declarations.get(current)
            if current != namespace and declaration is not None and declaration.is_ordinary_root:
                for key, value in self.ordinary_charge.get(current, {}).items():
                    if key in held:
                        held[key] += value
                continue
            for key, value in self.usage_of(current, keys).items():
                held[key] += value
            stack.extend(self.children.get(current, ()))
        return held


def key_order(key: BudgetKey) -> tuple[bool, str]:
    """The one order of budget keys in answers and findings: the class-less
    key first (the pool's total), then per class by name."""
    return key.gpu_class is not None, key.gpu_class or ""


def covered(per_class: Mapping[str, int], key: BudgetKey) -> int:
    """The devices of `per_class` (class -> count) in the classes `key` covers."""
    if key.gpu_class is None:
        return sum(per_class.values())
    return per_class.get(key.gpu_class, 0)


# -- the canonical sums ------------------------------------------------------

def add_counts(target: dict, delta: Mapping, sign: int = 1) -> None:
    """`target[k] += sign * delta[k]` for every k, dropping figures that reach
    zero (the canonical form: absent means zero)."""
    for key, value in delta.items():
        total = target.get(key, 0) + sign * value
        if total:
            target[key] = total
        else:
            target.pop(key, None)


def add_to(outer: dict[str, dict], root: str, delta: Mapping, sign: int = 1) -> None:
    """`add_counts` into `outer[root]`, dropping the entry once it is empty."""
    if not delta:
        return
    inner = outer.get(root)
    if inner is None:
        inner = outer[root] = {}
    add_counts(inner, delta, sign)
    if not inner:
        del outer[root]


def add_charge_to(charges: dict[str, Charge], root: str, charge: Charge, sign: int = 1) -> None:
    """`charges[root] += sign * charge`, dropping the entry once it is zero."""
    total = charges.get(root)
    if total is None:
        total = charges[root] = Charge()
    total.add(charge if sign > 0 else NO_CHARGE.minus(charge))
    if total == NO_CHARGE:
        del charges[root]


# -- pools: regions, figures, charges ------------------------------------------

def region(state: BudgetState, top: str, ordinary: bool) -> tuple[list[str], list[str]]:
    """The namespaces of `top`'s subtree in the pool `top` heads (or is part
    of): `top` and its descendants down to the next pool roots below it
    (budget sense, or ordinary sense when `ordinary`), which are returned
    apart (`boundary`). Walks those namespaces only."""
    members: list[str] = []
    boundary: list[str] = []
    stack = [top]
    declarations, children = state.declarations, state.children
    while stack:
        current = stack.pop()
        declaration = declarations.get(current)
        if current != top and declaration is not None and (
            declaration.is_ordinary_root if ordinary else state.is_budget_root(declaration)
        ):
            boundary.append(current)
            continue
        members.append(current)
        stack.extend(children.get(current, ()))
    return members, boundary


def budget_figures(
    state: BudgetState, members: Iterable[str], boundary: Iterable[str]
) -> tuple[dict[str, int], Charge, dict[str, int]]:
    """What a region adds to the budget pool it is in: its namespaces'
    reservations per class, the charges of the carving tenants below it,
    and what their subtrees physically hold towards its keys."""
    reserved: dict[str, int] = {}
    for namespace in members:
        add_counts(reserved, state.reserved.get(namespace, {}))
    charges = Charge()
    physical: dict[str, int] = {}
    for namespace in boundary:
        charges.add(state.tenant_charges.get(namespace, NO_CHARGE))
        add_counts(physical, state.tenant_physical.get(namespace, {}))
    return reserved, charges, physical


def ordinary_figures(
    state: BudgetState, members: Iterable[str], boundary: Iterable[str]
) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    """What a region adds to the ordinary pool it is in: its namespaces'
    usage per quota key, and the charges of the carving tenants below it."""
    usage: dict[str, Fraction] = {}
    for namespace in members:
        add_counts(usage, state.usage.get(namespace, {}))
    charges: dict[str, Fraction] = {}
    for namespace in boundary:
        add_counts(charges, state.ordinary_charge.get(namespace, {}))
    return usage, charges


def set_budget_pool(state: BudgetState, root: str) -> None:
    """(Re)compute budget pool root `root`'s figures from its region:
    `pool_reserved[root]`, `charges[root]` and `physical_below[root]`."""
    reserved, charges, physical = budget_figures(state, *region(state, root, ordinary=False))
    for outer, figures in ((state.pool_reserved, reserved), (state.physical_below, physical)):
        if figures:
            outer[root] = figures
        else:
            outer.pop(root, None)
    state.charges.pop(root, None)
    add_charge_to(state.charges, root, charges)


def update_budget_charge(state: BudgetState, namespace: str) -> str | None:
    """(Re)compute the charge of `namespace`'s tenant to the budget pool root
    above it (`tenant_charge`; none when it is not a carving tenant), and
    what its subtree physically holds towards it (`physical_charge`), and
    move the differences into that root's `charges` and `physical_below`.
    Returns that root when its figures changed (the next step of a
    cascade), else None."""
    declaration = state.declarations.get(namespace)
    parent = parent_namespace(namespace)
    new = new_held = None
    if declaration is not None and declaration.budgets and parent is not None:
        reserved = state.pool_reserved.get(namespace, {})
        new = tenant_charge(declaration, reserved, state.charges.get(namespace, NO_CHARGE))
        new_held = physical_charge(declaration, reserved, state.physical_below.get(namespace, {}))
    old, old_held = state.tenant_charges.get(namespace), state.tenant_physical.get(namespace)
    charge_same = (new is None and old is None) or (new is not None and old is not None and new == old)
    if charge_same and (new_held or None) == old_held:
        return None
    if new is None:
        state.tenant_charges.pop(namespace, None)
    else:
        state.tenant_charges[namespace] = new
    if new_held:
        state.tenant_physical[namespace] = new_held
    else:
        state.tenant_physical.pop(namespace, None)
    root = state.budget_root(parent) if parent is not None else None
    if root is None:
        return None
    if old is not None:
        add_charge_to(state.charges, root, old, -1)
    if new is not None:
        add_charge_to(state.charges, root, new)
    add_to(state.physical_below, root, old_held or {}, -1)
    add_to(state.physical_below, root, new_held or {})
    return root


def cascade_budget(state: BudgetState, root: str | None) -> None:
    """After `root`'s pool figures changed: its tenant's charge, and each
    charge above it that changes in turn (at most one per ancestor)."""
    while root is not None:
        root = update_budget_charge(state, root)


def region_usage(state: BudgetState, members: Iterable[str], root: str | None) -> dict[str, dict[str, Fraction]]:
    """The usage of each namespace of `members` holding quotas or pods, under
    the quota keys ordinary pool root `root` declares (none without a root).
    Reads pods and quotas: a malformed one raises ShapeError."""
    if root is None:
        return {}
    keys = state.declarations[root].ordinary
    found = {}
    for namespace in members:
        quotas, pods = state.quotas.get(namespace), state.pods.get(namespace)
        if quotas or pods:
            found[namespace] = usage_under(keys, quotas, pods)
    return found


def set_ordinary_pool(state: BudgetState, root: str, usages: Mapping[str, dict[str, Fraction]]) -> None:
    """(Re)compute ordinary pool root `root`'s figures from its region, with
    the usage of its namespaces (`region_usage`, read beforehand so nothing
    is half-applied when a pod is malformed): `usage` of each namespace,
    `pool_usage[root]` and `ordinary_charges[root]`."""
    members, boundary = region(state, root, ordinary=True)
    for namespace in members:
        state.usage.pop(namespace, None)
    state.usage.update(usages)
    usage, charges = ordinary_figures(state, members, boundary)
    for outer, figures in ((state.pool_usage, usage), (state.ordinary_charges, charges)):
        if figures:
            outer[root] = figures
        else:
            outer.pop(root, None)


def ordinary_tenant_charge(declaration: Declaration, usage: Mapping[str, Fraction],
                           below: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """A carving tenant's charge per quota key it declares: its declared
    value, or what its own pool holds (usage plus its carving tenants'
    charges) when that is more (never less than it takes)."""
    return {
        key: max(value, usage.get(key, Fraction(0)) + below.get(key, Fraction(0)))
        for key, value in declaration.ordinary.items()
    }


def update_ordinary_charge(state: BudgetState, namespace: str) -> str | None:
    """As `update_budget_charge`, for ordinary keys: `ordinary_charge` of the
    tenant and `ordinary_charges` of the ordinary pool root above it."""
    declaration = state.declarations.get(namespace)
    parent = parent_namespace(namespace)
    new = None
    if declaration is not None and declaration.ordinary and parent is not None:
        new = ordinary_tenant_charge(
            declaration, state.pool_usage.get(namespace, {}), state.ordinary_charges.get(namespace, {}))
    old = state.ordinary_charge.get(namespace)
    if new == old:
        return None
    if new is None:
        del state.ordinary_charge[namespace]
    else:
        state.ordinary_charge[namespace] = new
    root = state.ordinary_root(parent) if parent is not None else None
    if root is None:
        return None
    add_to(state.ordinary_charges, root, old or {}, -1)
    add_to(state.ordinary_charges, root, new or {})
    return root


def cascade_ordinary(state: BudgetState, root: str | None) -> None:
    """After `root`'s ordinary pool figures changed: its tenant's charge, and
    each charge above it that changes in turn."""
    while root is not None:
        root = update_ordinary_charge(state, root)


# -- the small derived parts ----------------------------------------------------

def derive_classes(state: BudgetState) -> None:
    """`conflicts`, `class_resources` and `class_device_classes` from
    `gpuclasses` (a handful)."""
    from cozyrender.gpuclass.classes import device_class_name, resource_name
    from cozyrender.gpuclass.conflicts import find_conflicts

    state.conflicts = find_conflicts(state.gpuclasses.values()) if state.gpuclasses else {}
    for named, attribute in ((resource_name, "class_resources"), (device_class_name, "class_device_classes")):
        by_resource: dict[str, list[str]] = {}
        for class_name, gpuclass in state.gpuclasses.items():
            resource = named(gpuclass)
            if resource:
                by_resource.setdefault(resource, []).append(class_name)
        setattr(state, attribute, {resource: tuple(sorted(names)) for resource, names in by_resource.items()})


def derive_platform(state: BudgetState) -> None:
    """`platform_vgpu` from its two sources. The label is what the platform
    rendered, the values its input: both must say true."""
    from cozyrender.entitlement import agreed_entitlement

    state.platform_vgpu, state.platform_disagreement = agreed_entitlement({
        "the tenant-root Namespace label": state.root_label_vgpu,
        "_cluster.gpu-vgpu in tenant-root/cozystack-values": state.values_vgpu,
    })


# The platform value making GPU budgets nest (issue 28 item 5), beside gpu-vgpu.
GPU_BUDGETS_NEST = "gpu-budgets-nest"


def _platform_from_values(secret: Mapping) -> tuple[bool | None, bool]:
    """(`_cluster.gpu-vgpu`, `_cluster.gpu-budgets-nest`) of tenant-root's
    `cozystack-values` Secret, from `stringData` or base64 `data` of its
    `values.yaml`: the vGPU switch None when the Secret holds no values,
    the nesting switch off unless it says true."""
    from cozyrender.entitlement import flag_value
    from cozyrender.values_secret import ValuesSecretError, read_values, values_text

    for key in ("stringData", "data"):  # the reader expects maps there
        mapping(secret, key, secret)
    try:
        if values_text(secret) is None:
            return None, False
        values = read_values(secret)
    except ValuesSecretError as err:
        raise ShapeError(f"Secret tenant-root/cozystack-values: {err}", secret) from None
    cluster = values.get("_cluster")
    if not isinstance(cluster, Mapping):
        return False, False
    vgpu = bool(flag_value(cluster["gpu-vgpu"])) if "gpu-vgpu" in cluster else False  # written only when on
    nest = cluster.get(GPU_BUDGETS_NEST)
    if nest is not None and flag_value(nest) is None:
        raise ShapeError.at(secret, f"stringData.values.yaml _cluster.{GPU_BUDGETS_NEST}",
                            f"is {got(nest)}: expected true or false")
    return vgpu, bool(nest is not None and flag_value(nest))


# -- reading one object ---------------------------------------------------------

# What an object is to the index (`Indexed.what`).
TENANT_OBJECT, WORKLOAD_OBJECT, POD, QUOTA, GPUCLASS = "tenant", "workload", "pod", "quota", "gpuclass"
DOOR_OBJECT = "door"  # a VirtualMachine or VirtualMachineInstance (a pod's door is read beside its usage)
ROOT_NAMESPACE_OBJECT, TENANT_NAMESPACE_OBJECT, VALUES_SECRET, OTHER = "root-ns", "tenant-ns", "values", ""


class Indexed(NamedTuple):
    """One object as the index reads it: `what` it is (a constant above),
    the `namespace` it is filed under (a pod's or quota's namespace, a
    Namespace's name), its `value` (the Declaration, the Workload, the
    vGPU flag its label or values say, a class's name), and the malformed
    tenant namespaces it is found in (`malformed`, with `ref` naming it)."""

    what: str
    namespace: str | None
    value: object
    malformed: tuple[str, ...]
    ref: str


def object_identity(obj: Mapping) -> tuple | None:
    """The identity of an object of a kind the index reads (None for any
    other kind), after checking the metadata it is keyed by: ShapeError
    when that is unusable."""
    kind = obj.get("kind")
    if type(kind) is not str or kind not in _INDEXED_KINDS:  # (a list or map is no kind at all)
        return None
    meta = obj.get("metadata")
    if type(meta) is not dict:
        raise ShapeError.at(obj, "metadata", "is missing" if meta is None else f"is not an object (got {got(meta)})")
    api_version, namespace, name = obj.get("apiVersion"), meta.get("namespace"), meta.get("name")
    # Checked before they key a dict: every object here is read by name.
    if type(name) is not str or not name:
        raise ShapeError.at(obj, "metadata.name", "is missing" if name is None else f"is not a string (got {got(name)})")
    if namespace is not None and type(namespace) is not str:
        raise ShapeError.at(obj, "metadata.namespace", f"is not a string (got {got(namespace)})")
    if api_version is not None and type(api_version) is not str:
        raise ShapeError.at(obj, "apiVersion", f"is not a string (got {got(api_version)})")
    if kind == "GPUClass":  # the classes' own group rule (any cozystack.io version)
        return identity_of(obj, identity_group(obj))
    # identity_of's answer, from the fields checked above (a third of indexing's time was here)
    group = api_version.rpartition("/")[0] if api_version else ""
    return (group, kind, None if kind in CLUSTER_SCOPED else namespace, name)


def classify(obj: Mapping, identity: tuple | None = None) -> Indexed | None:
    """Read one object as the index does (None for a kind it ignores):
    ShapeError for an object the rules cannot read. Pure: nothing else is
    consulted, so reading an object again gives the same answer.
    (`identity`: the object's `object_identity`, when already read.)"""
    if identity is None:
        identity = object_identity(obj)
    if identity is None:
        return None
    group, kind, _, name = identity
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    malformed: list[str] = []
    if kind not in CLUSTER_SCOPED and namespace and is_malformed_tenant_namespace(namespace):
        malformed.append(namespace)
    what, filed, value = OTHER, None, None
    if kind == TENANT and group == APPS_GROUP:
        declaration = parse_declaration(obj)
        if is_malformed_tenant_namespace(declaration.namespace) and declaration.namespace != namespace:
            malformed.append(declaration.namespace)
        what, filed, value = TENANT_OBJECT, declaration.namespace, declaration
    elif kind in WORKLOAD_KINDS and group == APPS_GROUP:
        workload = parse_workload(obj)
        what, filed, value = WORKLOAD_OBJECT, workload.namespace, workload
    elif kind == "Pod" and group == "":
        if not namespace:
            metadata_name_namespace(obj)  # raises, naming the object
        what, filed = POD, namespace
    elif (group, kind) in DOOR_KINDS:
        door = read_door(obj)
        what, filed, value = DOOR_OBJECT, door.namespace, door
    elif kind == "ResourceQuota" and group == "":
        filed, _ = metadata_name_namespace(obj)
        what = QUOTA
    elif is_gpuclass(obj):
        _check_gpuclass(obj)
        what, value = GPUCLASS, name
    elif kind == "Namespace" and group == "" and (name == ROOT_NAMESPACE or is_tenant_namespace(name)):
        from cozyrender.entitlement import VGPU_LABEL, flag_value

        labels = mapping(meta, "labels", obj, "metadata")
        # anything but true is not entitled; no label: no word either way
        value = bool(flag_value(labels[VGPU_LABEL])) if VGPU_LABEL in labels else None
        what, filed = (ROOT_NAMESPACE_OBJECT if name == ROOT_NAMESPACE else TENANT_NAMESPACE_OBJECT), name
    elif kind == "Secret" and group == "" and is_values_secret(obj, ROOT_NAMESPACE):
        what, value = VALUES_SECRET, _platform_from_values(obj)
    return Indexed(what, filed, value, tuple(malformed), ref(obj) if malformed else "")


def owner_conflict(state: BudgetState, declaration: Declaration, obj: Mapping) -> None:
    """ShapeError when another Tenant already owns `declaration`'s namespace."""
    other = state.declarations.get(declaration.namespace)
    if other is not None and (other.created_in, other.tenant) != (declaration.created_in, declaration.tenant):
        raise ShapeError.at(
            obj, "", f"namespace {declaration.namespace} is also owned by Tenant {other.created_in}/{other.tenant}"
        )


def add_malformed(state: BudgetState, entry: Indexed, sign: int = 1) -> None:
    """File (or, with sign -1, unfile) the object of `entry` under the
    malformed namespaces it is found in, each list kept sorted."""
    for namespace in entry.malformed:
        found = state.malformed_namespaces.setdefault(namespace, [])
        if sign > 0:
            found.append(entry.ref)
            found.sort()
        else:
            found.remove(entry.ref)
            if not found:
                del state.malformed_namespaces[namespace]


def index_state(objects: Iterable[Mapping]) -> BudgetState:
    """Index `objects` (Tenants, VMInstances, KubernetesNodes, ResourceQuotas,
    Pods, GPUClasses, the tenant-root Namespace and its `cozystack-values`
    Secret; anything else is ignored) for the budget rules.

    Raises ShapeError for an object the rules cannot read, for two
    different copies of one object, and for two Tenants owning the same
    namespace. An object's identity is its API group, kind, namespace and
    name, whatever its version, and without a namespace for a cluster-scoped
    kind (a stray `metadata.namespace` there is ignored); identical copies,
    as from overlapping inputs, are fine, whatever their versions. The
    result does not depend on object order.
    """
    with collector_paused():
        return _index_state(objects)


def _index_state(objects: Iterable[Mapping]) -> BudgetState:
    state = BudgetState()
    copies = Copies()
    doors: list[Door] = []
    for obj in objects:
        identity = object_identity(obj)
        if identity is None or not copies.is_new(obj, identity):
            continue
        group, kind, namespace, _ = identity
        if kind == "Pod" and group == "" and namespace and not is_malformed_tenant_namespace(namespace):
            # Two thirds of a state: what `classify` gives for it, without building the entry.
            state.pods.setdefault(namespace, []).append(obj)
            if may_hold_devices(obj):
                door = pod_door(obj)
                if door.devices:
                    doors.append(door)
            continue
        entry = classify(obj, identity)
        if entry.malformed:
            add_malformed(state, entry)
        what = entry.what
        if what == TENANT_OBJECT:
            declaration: Declaration = entry.value  # type: ignore[assignment]
            owner_conflict(state, declaration, obj)
            state.declarations[declaration.namespace] = declaration
        elif what == WORKLOAD_OBJECT:
            workload: Workload = entry.value  # type: ignore[assignment]
            state.owned[workload.identity] = workload
        elif what == DOOR_OBJECT:
            doors.append(entry.value)  # type: ignore[arg-type]
        elif what == POD:
            state.pods.setdefault(entry.namespace, []).append(obj)  # type: ignore[arg-type]
            if may_hold_devices(obj):
                door = pod_door(obj)
                if door.devices:
                    doors.append(door)
        elif what == QUOTA:
            state.quotas.setdefault(entry.namespace, []).append(obj)  # type: ignore[arg-type]
        elif what == GPUCLASS:
            state.gpuclasses[entry.value] = obj  # type: ignore[index]
        elif what == ROOT_NAMESPACE_OBJECT:
            state.root_label_vgpu = entry.value  # type: ignore[assignment]
        elif what == TENANT_NAMESPACE_OBJECT:
            if entry.value is not None:
                state.namespace_vgpu[entry.namespace] = entry.value  # type: ignore[index,assignment]
        elif what == VALUES_SECRET:
            state.values_vgpu, state.gpu_budgets_nest = entry.value  # type: ignore[misc]
    derive_classes(state)
    derive_platform(state)
    charge_holders(state, doors)

    known = set(state.declarations) | set(state.reserved) | set(state.quotas) | set(state.pods)
    for namespace in known:
        child = namespace
        for parent in ancestors(parent_namespace(namespace) or ""):
            siblings = state.children.setdefault(parent, set())
            if child in siblings:
                break
            siblings.add(child)
            child = parent

    # Pools, deepest root first: a tenant's charge depends on what its own
    # pool holds, its carving tenants' charges included.
    roots = sorted(
        ((namespace.count("-"), namespace) for namespace in state.declarations if is_tenant_namespace(namespace)),
        reverse=True,
    )
    for _, root in roots:
        declaration = state.declarations[root]
        if state.is_budget_root(declaration):
            set_budget_pool(state, root)
            update_budget_charge(state, root)
        if declaration.is_ordinary_root:
            set_ordinary_pool(state, root, region_usage(state, region(state, root, ordinary=True)[0], root))
            update_ordinary_charge(state, root)
    return state


def pod_door(pod: Mapping) -> Door:
    """A pod's door (`budgets.doors`): a finished pod holds no device. (A
    pod holding none is not filed as a door: only a pod holds a device
    nothing else claims from it.)"""
    from cozyrender.kube.pods import is_terminated

    door = read_door(pod)
    return door._replace(devices=()) if door.devices and is_terminated(pod) else door


def charge_holders(state: BudgetState, doors: Iterable[Door]) -> None:
    """File `doors` with their devices resolved to classes, then charge the
    head of every chain (`budgets.holders`): `workloads` and `reserved`."""
    from .holders import charged, file_owned, resolve

    for door in doors:
        file_owned(state, door.identity, resolve(state, door), door)
    for identity in state.owned:
        workload = charged(state, identity)
        if workload is None:
            continue
        state.workloads[identity] = workload
        if workload.reservations:
            add_to(state.reserved, workload.namespace, workload.reservations)


def _check_gpuclass(obj: Mapping) -> None:
    """Read every field a write check reads from a state's class now, so a
    malformed class is reported as bad input whatever the write names."""
    from cozyrender.gpuclass.classes import device_class_name, mode, resource_name, tolerations
    from cozyrender.gpuclass.conflicts import creation_time

    resource_name(obj), device_class_name(obj), mode(obj), tolerations(obj), creation_time(obj)


_INDEXED_KINDS = frozenset({
    TENANT, *WORKLOAD_KINDS, "ResourceQuota", "Pod", "GPUClass", "Namespace", "Secret",
    *(kind for _, kind in DOOR_KINDS),
})

__all__ = [
    "ALL_CLASSES", "NO_CHARGE", "BudgetState", "Charge", "Contribution", "budget_charge", "caps", "covered",
    "index_state", "key_order", "tenant_charge",
]
