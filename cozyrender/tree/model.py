"""The pool tree: an indexed budget state as a tree of tenants with, per
tenant and declared key, the budget, what its sub-tenants carve out of it
(per sub-tenant), what its pool's VMs and worker pools reserve (per object)
or its pods use, what is left, and any over-commit with its cause; per
tenant, what it is charged towards the pool root above it, whether it is a
pool root (in either sense) or GPU-only, its vGPU entitlement along the
chain and the first link that breaks it, and the audit's findings about it.

The rule: no figure is computed here that `check` does not compute. Every
number is read from the `BudgetState` aggregates the write checks and the
audit read (`reserved_for`, `charged_to`, `tenant_charges`, `pool_usage`,
`ordinary_charges`, `ordinary_charge`, `usage`, `reserved`, `workloads`),
through the library's own functions (`covered`, `caps`, `budget_charge`,
`budget_root`, `ordinary_root`, `entitlement.is_entitled`); over-commits are
the audit's `over-committed` findings, matched to their rows. This module
only groups, sums per row for the breakdowns (a row's carve-outs add up to
its `carved_out`, its reservations to its `used`: the tests hold it to
that) and filters.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from cozyrender.budgets.audit import Finding
from cozyrender.budgets.charges import ALL_CLASSES, NO_CHARGE, budget_charge, caps
from cozyrender.budgets.checks import room_above
from cozyrender.budgets.index import BudgetState, covered, key_order
from cozyrender.budgets.model import quota_field
from cozyrender.namespaces import ROOT_NAMESPACE, ancestors, parent_namespace
from cozyrender.budgets.usage import format_amount
from cozyrender.entitlement import is_entitled

GPU, ORDINARY = "gpu", "ordinary"
MAX_NAMED = 5  # sub-tenants named in one cause; the row's carve-outs list them all
PLATFORM = "platform"  # what `Vgpu.broken_by` names when the platform's switch is off

Amount = int | Fraction


class TreeError(ValueError):
    """A filter that names nothing in the state (a tenant that is not there,
    a class name that is no class name): bad input for the command."""


@dataclass(frozen=True)
class Reservation:
    """A VM or worker pool in a pool reserving devices a key covers."""

    kind: str
    namespace: str
    name: str
    devices: int  # of the classes the key covers
    classes: tuple[tuple[str, int], ...]  # everything it reserves, per class


@dataclass(frozen=True)
class CarveOut:
    """A sub-tenant's charge towards one key of the pool root it carves from,
    beside what its declaration alone would be charged (`declared`): the
    charge is more when its own pool already holds more."""

    namespace: str
    tenant: str
    charge: Amount
    declared: Amount


@dataclass(frozen=True)
class Usage:
    """An ordinary pool member's usage under a quota key."""

    namespace: str
    used: Fraction


@dataclass
class KeyRow:
    """One key a tenant declares. `type` is GPU or ORDINARY; `key` is the
    key as declared, `quota_key` the quota key an ordinary key renders to
    (figures are read under it). `used` is what the pool reserves (GPU:
    VMs and worker pools, for the classes the key covers) or uses
    (ordinary: its member namespaces' usage); `left` may be negative."""

    type: str
    key: str
    quota_key: str
    budget: Amount
    used: Amount
    carved_out: Amount
    left: Amount
    carve_outs: list[CarveOut] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    unusable: str | None = None
    over_committed: bool = False
    causes: list[str] = field(default_factory=list)
    finding: Finding | None = None

    @property
    def field(self) -> str:
        return quota_field(self.key)

    def covers(self, gpu_class: str) -> bool:
        if self.type != GPU:
            return False
        return self.key == ALL_CLASSES.key or self.key.split(".", 1)[0] == gpu_class

    def amount(self, value: Amount) -> str:
        """A figure of this row as people and the JSON read it."""
        if self.type == GPU:
            return str(value)
        return format_amount(self.quota_key, Fraction(value))


@dataclass(frozen=True)
class ChargeUp:
    """What a tenant is charged towards one key of the pool root it carves
    from (`root`), and what its declaration alone would be charged."""

    type: str
    root: str
    key: str
    quota_key: str
    charge: Amount
    declared: Amount


@dataclass(frozen=True)
class Vgpu:
    """The vGPU entitlement at a namespace: asked for by its Tenant
    (`requested`), in effect (`entitled`: asked for all the way from the
    platform down), and when not, the first link from the top that breaks
    it (`broken_by`: PLATFORM, or the namespace of the tenant that does not
    ask); `label` is its Namespace's `namespace.cozystack.io/vgpu` label in
    the state (None when the state holds none)."""

    requested: bool
    entitled: bool
    broken_by: str | None
    label: bool | None


@dataclass(frozen=True)
class AboveLimit:
    """The tightest budget above a pool root for one class (the hierarchical
    rule): growth of `gpu_class` in this pool may take at most `left` more,
    because key `key` of pool `root` has that much left in its subtree."""

    gpu_class: str
    root: str
    key: str
    left: int


@dataclass
class Node:
    """One namespace of the tenant tree (with or without a Tenant object)."""

    namespace: str
    tenant: str | None
    created_in: str | None
    parent: str | None
    depth: int
    children: list[str] = field(default_factory=list)
    budget_root: bool = False
    ordinary_root: bool = False
    gpu_only: bool = False
    budget_pool: str | None = None  # the budget pool its workloads count in
    ordinary_pool: str | None = None  # the ordinary pool its pods count in
    carves_from: str | None = None  # budget pool root above it that it is charged to
    ordinary_carves_from: str | None = None
    charges: list[ChargeUp] = field(default_factory=list)
    keys: list[KeyRow] = field(default_factory=list)
    reserved: dict[str, int] = field(default_factory=dict)  # in this namespace, per class
    workloads: list[Reservation] = field(default_factory=list)  # in this namespace, reserving devices
    vgpu: Vgpu = Vgpu(False, False, None, None)
    findings: list[Finding] = field(default_factory=list)
    limits_above: list[AboveLimit] = field(default_factory=list)

    @property
    def over_committed(self) -> bool:
        return any(row.over_committed for row in self.keys)

    @property
    def label(self) -> str:
        """How the tree names it: the tenant's name, or the namespace."""
        return self.tenant if self.tenant is not None else self.namespace


@dataclass
class Tree:
    """The tree in pre-order (children by name). `root` is the namespace
    shown at the top (tenant-root, or the --tenant subtree's root);
    `hidden` counts the nodes of that subtree the filters left out;
    `findings` holds the audit's findings about namespaces not in the tree
    (malformed namespaces); `platform_vgpu` is the entitlement the chain
    starts from and `platform_source` where it was read."""

    nodes: dict[str, Node]
    root: str
    platform_vgpu: bool
    platform_source: str
    findings: list[Finding] = field(default_factory=list)
    gpu_class: str | None = None
    depth: int | None = None
    hidden: int = 0
    gpu_budgets_nest: bool = False  # the platform's switch, read from the state as the rules read it

    def shown(self) -> Iterable[Node]:
        return self.nodes.values()


# ---------------------------------------------------------------- building

def build_tree(
    state: BudgetState,
    findings: Sequence[Finding],
    *,
    tenant: str | None = None,
    gpu_class: str | None = None,
    depth: int | None = None,
    platform_vgpu: bool | None = None,
) -> Tree:
    """The pool tree of `state`, with `findings` (the audit's of the same
    state) attached to their namespaces and rows. Filters only hide: every
    figure is the whole state's. `tenant` (a namespace, or a Tenant's name
    when only one Tenant has it) shows its subtree; `gpu_class` only the
    GPU keys covering that class and the tenants holding or capping it
    (with their ancestors); `depth` the levels below the shown root.
    `platform_vgpu` overrides the platform's entitlement read from the state."""
    if depth is not None and depth < 0:
        raise TreeError(f"--depth must be 0 or more (got {depth})")
    if gpu_class is not None:
        from cozyrender.keys import is_class_name

        if not is_class_name(gpu_class):
            raise TreeError(f"{gpu_class!r} is not a GPU class name (a DNS-1123 label: lower-case letters, "
                            "digits and '-', at most 63 characters)")
    platform, source = _platform(state, platform_vgpu)
    top = _resolve_tenant(state, tenant) if tenant is not None else ROOT_NAMESPACE

    context = _Context(state)
    nodes: dict[str, Node] = {}
    # Depth-first from the root (children by name), so the chain's entitlement
    # is known before its children's; only the shown subtree is built.
    chain_top = list(ancestors(top))[::-1]  # tenant-root .. top
    entitled, broken = platform, (None if platform else PLATFORM)
    for namespace in chain_top[1:-1] if top != ROOT_NAMESPACE else ():
        entitled, broken = _entitlement_below(state, namespace, entitled, broken)
    stack: list[tuple[str, bool, str | None]] = [(top, entitled, broken)]
    while stack:
        namespace, parent_entitled, parent_broken = stack.pop()
        node = context.node(namespace)
        if namespace == ROOT_NAMESPACE:
            node.vgpu = Vgpu(_requested(state, namespace), platform, None if platform else PLATFORM,
                             state.namespace_vgpu.get(namespace))
        else:
            own, broken_by = _entitlement_below(state, namespace, parent_entitled, parent_broken)
            node.vgpu = Vgpu(_requested(state, namespace), own, broken_by, state.namespace_vgpu.get(namespace))
        nodes[namespace] = node
        for child in reversed(node.children):
            stack.append((child, node.vgpu.entitled, node.vgpu.broken_by))

    unattached = []
    for finding in findings:
        node = nodes.get(finding.namespace)
        if node is None:  # outside the tree (a malformed namespace), or outside the shown subtree
            if top == ROOT_NAMESPACE:
                unattached.append(finding)
            continue
        node.findings.append(finding)
        if finding.kind == "over-committed":
            for row in node.keys:
                if row.field == finding.field:
                    row.finding = finding

    tree = Tree(nodes, top, platform, source, unattached, gpu_class, depth,
                gpu_budgets_nest=state.gpu_budgets_nest)
    _filter(tree, gpu_class, depth)
    return tree


def _platform(state: BudgetState, override: bool | None) -> tuple[bool, str]:
    if override is not None:
        return override, "--platform-vgpu"
    if state.platform_vgpu is None:
        return False, "not in the state (treated as off)"
    if state.platform_disagreement:
        return False, state.platform_disagreement
    return state.platform_vgpu, "the state"


def _requested(state: BudgetState, namespace: str) -> bool:
    declaration = state.declarations.get(namespace)
    return declaration.requests_vgpu if declaration is not None else False


def _entitlement_below(state: BudgetState, namespace: str, parent_entitled: bool,
                       parent_broken: str | None) -> tuple[bool, str | None]:
    """One link of the chain (`entitlement.is_entitled`), and the first
    link from the top that breaks it."""
    entitled = is_entitled(_requested(state, namespace), parent_entitled)
    if entitled:
        return True, None
    return False, parent_broken if not parent_entitled else namespace


def _resolve_tenant(state: BudgetState, name: str) -> str:
    """A namespace of the tree, or the namespace of the one Tenant named so."""
    parent = parent_namespace(name)
    if name == ROOT_NAMESPACE or name in state.children or (parent is not None and name in state.children.get(parent, ())):
        return name
    owners = sorted(ns for ns, declaration in state.declarations.items() if declaration.tenant == name)
    if len(owners) == 1:
        return owners[0]
    if owners:
        raise TreeError(f"{len(owners)} tenants are named {name!r} ({', '.join(owners)}): "
                        "give the namespace instead")
    raise TreeError(f"no tenant {name!r} in the state (give a tenant namespace, e.g. tenant-{name}, "
                    "or a Tenant's name)")


class _Context:
    """The groupings the rows need, made once per tree: the carving tenants
    of each pool root, the pool members of each root, workloads by
    namespace (each from the same library calls the index makes)."""

    def __init__(self, state: BudgetState) -> None:
        self.state = state
        self._budget_roots: dict[str, str | None] = {}
        self._ordinary_roots: dict[str, str | None] = {}
        self.carving: dict[str, list[str]] = {}
        self.ordinary_carving: dict[str, list[str]] = {}
        for namespace, declaration in state.declarations.items():
            parent = parent_namespace(namespace)
            if parent is None:
                continue
            if declaration.budgets:
                root = self.budget_root(parent)
                if root is not None:
                    self.carving.setdefault(root, []).append(namespace)
            if declaration.ordinary:
                root = self.ordinary_root(parent)
                if root is not None:
                    self.ordinary_carving.setdefault(root, []).append(namespace)
        self.workloads: dict[str, list[Reservation]] = {}
        for (kind, namespace, name), workload in state.workloads.items():
            if workload.reservations:
                self.workloads.setdefault(namespace, []).append(Reservation(
                    kind, namespace, name, sum(workload.reservations.values()),
                    tuple(sorted(workload.reservations.items()))))
        for group in self.workloads.values():
            group.sort(key=lambda reservation: (reservation.kind, reservation.name))
        self.members: dict[str, list[str]] = {}  # budget pool root -> namespaces reserving in its pool
        for namespace in sorted(state.reserved):
            root = self.budget_root(namespace)
            if root is not None:
                self.members.setdefault(root, []).append(namespace)
        self.ordinary_members: dict[str, list[str]] = {}
        for namespace in sorted(state.usage):
            root = self.ordinary_root(namespace)
            if root is not None:
                self.ordinary_members.setdefault(root, []).append(namespace)
        for group in (*self.carving.values(), *self.ordinary_carving.values()):
            group.sort()

    def budget_root(self, namespace: str) -> str | None:
        """`BudgetState.budget_root`, asked once per namespace."""
        if namespace not in self._budget_roots:
            self._budget_roots[namespace] = self.state.budget_root(namespace)
        return self._budget_roots[namespace]

    def ordinary_root(self, namespace: str) -> str | None:
        """`BudgetState.ordinary_root`, asked once per namespace."""
        if namespace not in self._ordinary_roots:
            self._ordinary_roots[namespace] = self.state.ordinary_root(namespace)
        return self._ordinary_roots[namespace]

    def node(self, namespace: str) -> Node:
        state = self.state
        declaration = state.declarations.get(namespace)
        parent = parent_namespace(namespace)
        node = Node(
            namespace=namespace,
            tenant=declaration.tenant if declaration is not None else None,
            created_in=declaration.created_in if declaration is not None else None,
            parent=parent,
            depth=sum(1 for _ in ancestors(namespace)) - 1,
            children=sorted(state.children.get(namespace, ())),
            budget_pool=self.budget_root(namespace),
            ordinary_pool=self.ordinary_root(namespace),
            reserved=dict(sorted(state.reserved.get(namespace, {}).items())),
            workloads=self.workloads.get(namespace, []),
        )
        if declaration is None:
            return node
        node.budget_root = state.is_budget_root(declaration)
        node.ordinary_root = declaration.is_ordinary_root
        node.gpu_only = bool(declaration.budgets) and not declaration.is_ordinary_root
        for key in sorted(declaration.budgets, key=key_order):
            node.keys.append(self._gpu_row(namespace, key))
        if state.is_budget_root(declaration):
            for gpu_class in sorted(state.gpuclasses):
                limits = room_above(state, namespace, gpu_class)
                if limits:
                    root, key, left = min(limits, key=lambda limit: limit[2])
                    node.limits_above.append(AboveLimit(gpu_class, root, key.key, left))
        for quota_key in declaration.ordinary:
            node.keys.append(self._ordinary_row(namespace, quota_key))
        if parent is not None:
            self._charges(node, parent)
        return node

    def _gpu_row(self, root: str, key) -> KeyRow:
        state = self.state
        declaration = state.declarations[root]
        budget = declaration.budgets[key]
        used = state.reserved_for(root, key)
        carved = state.charged_to(root, key)
        row = KeyRow(GPU, key.key, key.key, budget, used, carved, budget - used - carved,
                     unusable=declaration.unusable.get(key))
        for child in self.carving.get(root, ()):
            child_declaration = state.declarations[child]
            if not caps(child_declaration, key):
                continue
            charge = state.tenant_charges.get(child, NO_CHARGE).for_key(key)
            row.carve_outs.append(CarveOut(child, child_declaration.tenant, charge,
                                           budget_charge(child_declaration, key)))
        for member in self.members.get(root, ()):
            for workload in self.workloads.get(member, ()):
                devices = covered(dict(workload.classes), key)
                if devices:
                    row.reservations.append(Reservation(workload.kind, workload.namespace, workload.name,
                                                        devices, workload.classes))
        return _judged(row)

    def _ordinary_row(self, root: str, quota_key: str) -> KeyRow:
        state = self.state
        declaration = state.declarations[root]
        budget = declaration.ordinary[quota_key]
        used = state.pool_usage.get(root, {}).get(quota_key, Fraction(0))
        carved = state.ordinary_charges.get(root, {}).get(quota_key, Fraction(0))
        row = KeyRow(ORDINARY, declaration.declared_as[quota_key], quota_key, budget, used, carved,
                     budget - used - carved, unusable=declaration.unusable.get(quota_key))
        for child in self.ordinary_carving.get(root, ()):
            charges = state.ordinary_charge.get(child, {})
            if quota_key in charges:
                child_declaration = state.declarations[child]
                row.carve_outs.append(CarveOut(child, child_declaration.tenant, charges[quota_key],
                                               child_declaration.ordinary[quota_key]))
        for member in self.ordinary_members.get(root, ()):
            value = state.usage[member].get(quota_key, Fraction(0))
            if value:
                row.usage.append(Usage(member, value))
        return _judged(row)

    def _charges(self, node: Node, parent: str) -> None:
        state = self.state
        declaration = state.declarations[node.namespace]
        if declaration.budgets:
            root = self.budget_root(parent)
            if root is not None:
                node.carves_from = root
                charge = state.tenant_charges.get(node.namespace, NO_CHARGE)
                for key in sorted(state.declarations[root].budgets, key=key_order):
                    if caps(declaration, key):
                        node.charges.append(ChargeUp(GPU, root, key.key, key.key, charge.for_key(key),
                                                     budget_charge(declaration, key)))
        if declaration.ordinary:
            root = self.ordinary_root(parent)
            if root is not None:
                node.ordinary_carves_from = root
                limits = state.declarations[root]
                charges = state.ordinary_charge.get(node.namespace, {})
                for quota_key in declaration.ordinary:
                    if quota_key in limits.ordinary:
                        node.charges.append(ChargeUp(
                            ORDINARY, root, limits.declared_as[quota_key], quota_key,
                            charges.get(quota_key, Fraction(0)), declaration.ordinary[quota_key]))


def _judged(row: KeyRow) -> KeyRow:
    """`row` with its verdict: over-committed when what it holds and carves
    out passes its budget, and then why."""
    row.over_committed = row.used + row.carved_out > row.budget
    if row.over_committed:
        row.causes = _causes(row)
    return row


def _causes(row: KeyRow) -> list[str]:
    """Why a row is over its budget, from its own figures."""
    causes = []
    if row.unusable:
        causes.append(f"its value is counted as 0 until fixed: {row.unusable}")
    beyond = [carve for carve in row.carve_outs if carve.charge > carve.declared]
    if len(beyond) == 1:
        carve = beyond[0]
        causes.append(f"{carve.namespace} is charged {row.amount(carve.charge)}, more than the "
                      f"{row.amount(carve.declared)} it declares: its own pool already holds that much")
    elif beyond:
        beyond.sort(key=lambda carve: (-(Fraction(carve.charge) - Fraction(carve.declared)), carve.namespace))
        named = ", ".join(f"{c.namespace} ({row.amount(c.charge)} for {row.amount(c.declared)})" for c in beyond[:MAX_NAMED])
        more = f" and {len(beyond) - MAX_NAMED} more" if len(beyond) > MAX_NAMED else ""
        causes.append(f"{len(beyond)} sub-tenants are charged more than they declare, their own pools already "
                      f"holding that much: {named}{more}")
    what = "reserved" if row.type == GPU else "used"
    if row.used > row.budget:
        causes.append(f"its own pool alone has {what} {row.amount(row.used)}, more than the budget "
                      f"{row.amount(row.budget)}")
    if not causes:
        causes.append(f"{what} {row.amount(row.used)} + carved out {row.amount(row.carved_out)} is more than "
                      f"the budget {row.amount(row.budget)}: it is below what was already committed "
                      "(lowered afterwards, or written past the gate)")
    return causes


# ---------------------------------------------------------------- filters

def _filter(tree: Tree, gpu_class: str | None, depth: int | None) -> None:
    """Hide what the filters leave out (figures are untouched)."""
    nodes = tree.nodes
    before = len(nodes)
    top_depth = nodes[tree.root].depth
    keep = set(nodes)
    if depth is not None:
        keep = {ns for ns in keep if nodes[ns].depth - top_depth <= depth}
    if gpu_class is not None:
        for node in nodes.values():
            node.keys = [row for row in node.keys if row.covers(gpu_class)]
            node.charges = [charge for charge in node.charges
                            if charge.type == GPU and (charge.key == ALL_CLASSES.key
                                                       or charge.key.split(".", 1)[0] == gpu_class)]
        related = {ns for ns, node in nodes.items() if node.keys or gpu_class in node.reserved}
        with_ancestors = set()
        for namespace in related:
            current: str | None = namespace
            while current is not None and current not in with_ancestors and current in nodes:
                with_ancestors.add(current)
                current = nodes[current].parent
        with_ancestors.add(tree.root)
        keep &= with_ancestors
    if len(keep) == before:
        return
    tree.nodes = {ns: node for ns, node in nodes.items() if ns in keep}
    for node in tree.nodes.values():
        node.children = [child for child in node.children if child in keep]
    tree.hidden = before - len(tree.nodes)


__all__ = [
    "GPU", "ORDINARY", "PLATFORM", "CarveOut", "ChargeUp", "KeyRow", "Node", "Reservation", "Tree", "TreeError",
    "Usage", "Vgpu", "build_tree",
]
