"""The write checks: a VMInstance, KubernetesNodes or Kubernetes write
against the GPU budgets of its pool, and the declaration gate for a Tenant write.

Each returns a Decision: allowed or not, one Reason per violated key naming
the field and the numbers, as an admission webhook would answer. A check
reads only the written object's ancestors and one pool's aggregates from
the indexed state (plus, for a Tenant, its own subtree).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from cozyrender.keys import BudgetKey

from .charges import ALL_CLASSES, NO_CHARGE, Charge, caps, caps_class, physical_charge, tenant_charge
from .index import BudgetState, add_counts, budget_figures, covered, key_order, region
from .model import (
    Declaration,
    Workload,
    parse_declaration,
    quota_field,
)
from cozyrender.namespaces import parent_namespace
from .usage import format_amount


@dataclass(frozen=True)
class Reason:
    """One violation: the field it concerns and a message with the numbers."""

    field: str
    message: str

    def as_dict(self) -> dict:
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True)
class Decision:
    """The answer to a write: `allowed` is True exactly when `reasons` is empty."""

    reasons: tuple[Reason, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict:
        return {
            "allowed": self.allowed,
            "reasons": [reason.as_dict() for reason in self.reasons],
            "warnings": list(self.warnings),
        }


@dataclass
class _Answer:
    reasons: list[Reason] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def decision(self) -> Decision:
        return Decision(tuple(self.reasons), tuple(self.warnings))


def carvers_note(state: BudgetState, root: str, key: BudgetKey | str, ordinary: bool = False,
                 leaving: str | None = None) -> str:
    """"; carved out by Tenant tenant-a/b 2, ..." for a message whose
    "carved out" figure is not zero (issue 19 item 10): the children holding
    it (the tenant of namespace `leaving`, and its subtree, left out: the
    figure excludes them). Empty when none does."""
    from cozyrender.namespaces import is_within

    found = [
        (declaration, charge) for declaration, charge in state.carving_tenants(root, key, ordinary)
        if leaving is None or not is_within(declaration.namespace, leaving)
    ]
    if not found:
        return ""
    shown = [f"{declaration.ref} {format_amount(key, charge) if ordinary else charge}"  # type: ignore[arg-type]
             for declaration, charge in found[:5]]
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return f"; carved out by {', '.join(shown)}{more}"


def growth(new: Workload, old: Workload | None) -> dict[str, int]:
    """Per class, how many more devices the write reserves than the object
    it replaces (classes that do not grow are left out)."""
    before = old.reservations if old is not None else {}
    return {
        gpu_class: count - before.get(gpu_class, 0)
        for gpu_class, count in new.reservations.items()
        if count > before.get(gpu_class, 0)
    }


def _growth_field(new: Workload, old: Workload | None, classes: set[str]) -> str:
    """The field that grew for `classes`: a worker pool's (or node group's)
    maxReplicas when only that changed there, otherwise the first entry's
    count for those classes."""
    if old is not None:
        for entry in new.entries:
            where = entry.replicas_path
            if entry.gpu_class not in classes or where is None:
                continue
            before = [e for e in old.entries if e.replicas_path == where]
            if before and entry.replicas > before[0].replicas and all(
                sum(e.count for e in new.entries if e.replicas_path == where and e.gpu_class == c)
                <= sum(e.count for e in before if e.gpu_class == c)
                for c in classes
            ):
                return where
    for entry in new.entries:
        if entry.gpu_class in classes:
            return f"{entry.path}.count" if entry.count_given else entry.path
    return "spec.gpus"


def check_workload_budget(state: BudgetState, new: Workload) -> Decision:
    """The GPU budget check for a VMInstance, KubernetesNodes or Kubernetes write.

    The write replaces the object of the same kind, namespace and name in
    `state` when there is one (an update), else it is a create. Only growth
    is checked: a write that reserves no more devices of any class than
    before is admitted even when its pool is over budget. Otherwise, for
    every budget key the namespace's pool root declares that covers a
    growing class: devices reserved in the pool for the classes the key
    covers (this workload at its new size) plus the charges of carving
    tenants must stay within the declared value. No pool root, or no key
    covering the class: no budget applies. Then the hierarchical rule
    (`_check_ancestors`): every pool root above, with a key covering a
    growing class, must still hold the devices reserved in its subtree.
    """
    old = state.workloads.get(new.identity)
    grown = growth(new, old)
    answer = _Answer()
    if not grown:
        return answer.decision()
    root = state.budget_root(new.namespace)
    if root is None:
        return answer.decision()
    _check_pool(state, new, old, grown, root, answer)
    _check_ancestors(state, new, old, grown, root, answer)
    return answer.decision()


def _check_pool(state: BudgetState, new: Workload, old: Workload | None, grown: dict[str, int], root: str,
                answer: _Answer) -> None:
    """The write's own pool: reservations plus carving tenants' charges
    within each key of its root covering a growing class."""
    declaration = state.declarations[root]
    for key in sorted(declaration.budgets, key=key_order):
        growing = {c for c in grown if key.covers(c)}
        if not growing:
            continue
        budget = declaration.budgets[key]
        requested = covered(new.reservations, key)
        previously = covered(old.reservations, key) if old else 0
        reserved = state.reserved_for(root, key) - previously
        carved = state.charged_to(root, key)
        if requested + reserved + carved > budget:
            answer.reasons.append(Reason(
                _growth_field(new, old, growing),
                f"Forbidden: exceeded GPU budget {key.key!r} of pool {root}: "
                f"requested {requested}, reserved {reserved}, carved out {carved}, budget {budget} "
                f"({requested + reserved + carved} > {budget}){declaration.unusable_note(key)}"
                f"{carvers_note(state, root, key) if carved else ''}",
            ))


def _check_ancestors(state: BudgetState, new: Workload, old: Workload | None, grown: dict[str, int], root: str,
                     answer: _Answer) -> None:
    """The hierarchical rule (issue 19 item 5b, as HNC's hierarchical
    quotas) for a workload write in `root`'s pool (see `_hierarchical`)."""
    _hierarchical(state, root, old.reservations if old is not None else {}, new.reservations,
                  lambda classes: _growth_field(new, old, classes), answer)


def _hierarchical(state: BudgetState, root: str, before: Mapping[str, int], after: Mapping[str, int],
                  field_of, answer: _Answer) -> None:
    """The hierarchical rule (issue 19 item 5b, as HNC's hierarchical
    quotas): a write changing what `root`'s pool holds, per class, from
    `before` to `after` must fit, for every pool root above `root` reached
    through the chain of tenants capping the classes (a class a tenant on
    the way does not cap escaped every budget above it, by design), the
    devices physically reserved in that root's subtree, counted with the
    write, for each of its keys covering a class that grows. `root` itself
    needs no such check: its charges are never less than what is reserved
    below it. O(depth): the subtree figures are indexed. `field_of(classes)`
    names the field that grew for those classes."""
    grown = {c for c, count in after.items() if count > before.get(c, 0)}
    passing = set(after) | set(before)  # the write's classes still counted at this level
    current = root
    while True:
        declaration = state.declarations[current]
        passing = {c for c in passing if caps_class(declaration, c)}
        parent = parent_namespace(current)
        if not passing.intersection(grown) or parent is None:
            return
        current = state.budget_root(parent)
        if current is None:
            return
        above = state.declarations[current]
        for key in sorted(above.budgets, key=key_order):
            classes = {c for c in passing if key.covers(c)}
            if not classes.intersection(grown):
                continue
            budget = above.budgets[key]
            requested = sum(after.get(c, 0) for c in classes)
            held = state.held_in_subtree(current, key) - sum(before.get(c, 0) for c in classes)
            if requested + held > budget:
                answer.reasons.append(Reason(
                    field_of(classes.intersection(grown)),
                    f"Forbidden: exceeded GPU budget {key.key!r} of {above.ref} "
                    f"(pool {current}), counting every device reserved in its subtree: requested {requested}, "
                    f"reserved in the subtree {held}, budget {budget} ({requested + held} > {budget})"
                    f"{above.unusable_note(key)}",
                ))


def room_above(state: BudgetState, root: str, gpu_class: str) -> list[tuple[str, BudgetKey, int]]:
    """What the hierarchical rule leaves for growth of `gpu_class` in `root`'s
    pool: for each pool root above that the rule consults (as
    `_check_hierarchical` walks them), each of its keys covering the class
    and the devices that key has left in its subtree (budget minus what the
    subtree physically holds; negative when over). Empty when no budget
    above caps the class on the way up. O(depth)."""
    found: list[tuple[str, BudgetKey, int]] = []
    current = root
    while True:
        declaration = state.declarations[current]
        parent = parent_namespace(current)
        if not caps_class(declaration, gpu_class) or parent is None:
            return found
        current = state.budget_root(parent)
        if current is None:
            return found
        above = state.declarations[current]
        for key in sorted(above.budgets, key=key_order):
            if key.covers(gpu_class):
                found.append((current, key, above.budgets[key] - state.held_in_subtree(current, key)))


def _gate_hierarchical(state: BudgetState, child: Declaration, before: Declaration | None, parent: str,
                       answer: _Answer) -> None:
    """The hierarchical rule for a Tenant write: what the tenant's subtree
    counts towards the pool above it (everything, while it is no pool root
    of its own; the classes it caps, once it is) may change with its keys,
    a sub-tenant that escaped starting to count among them. That change must
    fit every pool root above as a workload's growth must (the pool root
    right above is the charge gate's)."""
    root = state.budget_root(parent)
    if root is None:
        return
    if state.is_budget_root(before):  # its pool's figures are indexed
        reserved = state.pool_reserved.get(child.namespace, {})
        below = state.physical_below.get(child.namespace, {})
    else:
        reserved, _, below = budget_figures(state, *region(state, child.namespace, ordinary=False))
    everything = dict(reserved)
    add_counts(everything, below)
    if state.is_budget_root(before):
        was = state.tenant_physical.get(child.namespace, {})
    else:
        was = everything
    will = physical_charge(child, reserved, below) if state.is_budget_root(child) else everything
    if not any(count > was.get(c, 0) for c, count in will.items()):
        return

    def field_of(classes: set[str]) -> str:
        for key in sorted(child.budgets, key=key_order):
            if any(key.covers(c) for c in classes):
                return quota_field(key.key)
        return "spec.resourceQuotas"

    # `will` is what reaches `root`'s pool: pass it through as held there.
    _hierarchical(state, root, was, will, field_of, answer)


def escaped_keys(state: BudgetState, declaration: Declaration) -> list[tuple[BudgetKey, str]]:
    """The budget keys of the nearest pool root above the tenant's namespace
    that the tenant, a budget pool root itself, does not cap, each with the
    sentence saying so: its pool's devices of those classes count against
    no budget of that root (the seed's rule: a tenant declaring its own
    quotas leaves its parent's pool for every key it does not declare; the
    platform's `gpu-budgets-nest` switch keeps a tenant declaring no GPU key
    in its parent's GPU pool). The audit's `escapes-budget` findings and the
    declaration gate's warnings."""
    parent = parent_namespace(declaration.namespace)
    if not state.is_budget_root(declaration) or parent is None:
        return []
    root = state.budget_root(parent)
    if root is None or ALL_CLASSES in declaration.budgets:
        return []  # an all-classes key is charged towards every key above it (`tenant_charge`)
    above = state.declarations[root]
    found = []
    for key in sorted(above.budgets, key=key_order):
        if key in declaration.budgets:
            continue
        if key.gpu_class is None:
            uncapped = "classes it declares no budget for" if declaration.budgets else "any class"
        else:
            uncapped = f"class {key.gpu_class}"
        found.append((key, f"{declaration.ref} declares its own quotas but not {key.key!r}: devices of {uncapped} "
                           f"reserved in its pool count against no budget of {above.ref} (pool {root})"))
    return found


def _escape_warnings(state: BudgetState, child: Declaration) -> list[str]:
    """One warning for a Tenant write whose subtree leaves GPU budgets above
    it (issue 28 item 5), naming the keys it escapes and how to close it."""
    escaped = escaped_keys(state, child)
    if not escaped:
        return []
    keys = ", ".join(repr(key.key) for key, _ in escaped)
    root = state.budget_root(parent_namespace(child.namespace) or "")
    if not child.budgets and not state.gpu_budgets_nest:
        fix = (f"declare GPU keys for it, or have the platform make GPU budgets nest (_cluster.gpu-budgets-nest: "
               f"true), which keeps a tenant declaring no GPU key in its parent's GPU pool")
    else:
        fix = "declare those keys for it, or the all-classes key gpuclass.cozystack.io/devices"
    them = "them" if len(escaped) > 1 else "it"
    return [f"{child.ref} leaves the GPU budget{'s' if len(escaped) > 1 else ''} {keys} of "
            f"{state.declarations[root].ref} (pool {root}): it declares its own quotas but not {keys}, so the devices "
            f"its pool reserves of the classes {'they cover' if len(escaped) > 1 else 'it covers'} count against "
            f"no budget above it; to keep {them} counting, {fix}"]


def check_tenant_declaration(state: BudgetState, tenant: Mapping) -> Decision:
    """The declaration gate for a Tenant write (create, or update of the
    Tenant with the same namespace and name in `state`).

    A name outside Cozystack's grammar is bad input (`parse_declaration`
    raises). Malformed keys in the budget domain (with or without '/'),
    invalid budget values, ordinary values that are not non-negative
    quantities and two ordinary keys rendering to one quota key are
    refused. Then:

    - its own pool, for every tenant (the root included): a budget key it
      newly declares must hold what its pool already holds (reservations
      plus sub-tenants' carve-outs); an ordinary key it newly declares or
      lowers must hold what its subtree already uses (usage plus
      sub-tenants' carve-outs, keys compared by the quota key they render to;
      a kept or raised value is judged by the gate above alone, item 9);
    - the pool above, per key of the pool root R of the namespace it is
      created in (budget or ordinary sense) that the tenant caps (`caps`: a
      key it declares, or for a class key of R its all-classes key too): its
      charge (`tenant_charge`: the larger of its value and what its pool
      holds) must fit what R has left: R's value minus the other carving
      tenants' charges minus what R's pool uses (reserved devices, or
      ordinary usage), the tenant's own subtree excluded. Keys of R it does
      not cap constrain nothing;
    - an update that stops the tenant being a pool root (in either sense)
      puts its pool's reservations, usage and carve-outs back into R's pool:
      they must fit there, for every key of R they add to.
    """
    child = parse_declaration(tenant)
    answer = _Answer()
    for key, problem in child.problems:
        answer.reasons.append(Reason(quota_field(key), f"Invalid: {problem}"))
    before = state.declarations.get(child.namespace)
    if before is not None and (before.created_in, before.tenant) != (child.created_in, child.tenant):
        before = None
    parent = parent_namespace(child.namespace)
    if child.budgets:
        _gate_own_pool(state, child, before, parent, answer)
    held = _gate_own_usage(state, child, before, answer) if child.ordinary else {}
    if parent is None:
        return answer.decision()  # the root tenant: no pool above it
    answer.warnings.extend(_escape_warnings(state, child))
    if child.budgets:
        _gate_budget_keys(state, child, before, parent, answer)
    _gate_hierarchical(state, child, before, parent, answer)
    if child.ordinary:
        _gate_ordinary_keys(state, child, parent, held, answer)
    if before is not None:
        _gate_rejoin(state, child, before, parent, answer)
    return answer.decision()


def _gate_own_pool(
    state: BudgetState, child: Declaration, before: Declaration | None, parent: str | None, answer: _Answer
) -> None:
    """A budget key the tenant newly declares must hold what its own pool
    already holds: devices reserved in its subtree's namespaces that join
    its pool, plus the charges of sub-tenants that will carve from it.
    (Keys it already declared are not re-checked here: lowering a budget is
    the parent's call, and its workloads then only cannot grow.)"""
    new_keys = [key for key in child.budgets if before is None or key not in before.budgets]
    if not new_keys:
        return
    reserved, charges = _budget_holdings(state, child, before, parent)
    for key in sorted(new_keys, key=key_order):
        held = covered(reserved, key)
        carved = charges.for_key(key)
        if held + carved > child.budgets[key]:
            answer.reasons.append(Reason(
                quota_field(key.key),
                f"Forbidden: below what the tenant's own pool already holds of {key.key!r}: "
                f"requested {child.budgets[key]}, reserved {held}, carved out {carved}"
                f"{carvers_note(state, child.namespace, key) if carved else ''}",
            ))


def _budget_holdings(
    state: BudgetState, child: Declaration, before: Declaration | None, parent: str | None
) -> tuple[dict[str, int], Charge]:
    """What the tenant's own budget pool holds (or will hold once it is a
    pool root): devices reserved per class, and its carving tenants' charges."""
    if state.is_budget_root(before):
        return state.pool_reserved.get(child.namespace, {}), state.charges.get(child.namespace, NO_CHARGE)
    above = state.budget_root(parent) if parent is not None else None
    contribution = state.subtree_contribution(child.namespace, above, ordinary=False)
    return contribution.reserved, contribution.charges


def _held_by_own_pool(state: BudgetState, child: Declaration, before: Declaration | None) -> dict[str, Fraction]:
    """Per quota key the tenant declares, what its pool holds (or would hold
    once it is an ordinary pool root): usage plus sub-tenants' charges. Read
    from the index where its pool already tracks the key, else by walking
    its subtree."""
    held: dict[str, Fraction] = {}
    missing = []
    if before is not None and before.is_ordinary_root:
        usage = state.pool_usage.get(child.namespace, {})
        below = state.ordinary_charges.get(child.namespace, {})
        for key in child.ordinary:
            if key in before.ordinary:
                held[key] = usage.get(key, Fraction(0)) + below.get(key, Fraction(0))
            else:
                missing.append(key)
    else:
        missing = list(child.ordinary)
    if missing:
        held.update(state.held_below(child.namespace, missing))
    return held


def _gate_own_usage(state: BudgetState, child: Declaration, before: Declaration | None, answer: _Answer) -> dict[str, Fraction]:
    """An ordinary key the tenant newly declares, or whose value it lowers,
    must hold what its own subtree already uses (its pool's usage plus its
    sub-tenants' charges), as a newly declared budget key must hold what its
    pool already reserves. Returns what its pool holds per quota key."""
    held = _held_by_own_pool(state, child, before)
    for key in sorted(child.ordinary):
        value = child.ordinary[key]
        if before is not None and key in before.ordinary and value >= before.ordinary[key]:
            # Kept or raised: raising never makes things worse than keeping
            # (issue 11 item 9); only the gate against the pool root applies.
            continue
        if held[key] > value:
            answer.reasons.append(Reason(
                quota_field(child.declared_as[key]),
                f"Forbidden: below what the tenant's own subtree already uses of {child.declared_as[key]!r}: "
                f"requested {format_amount(key, value)}, used and carved out {format_amount(key, held[key])} ({key})"
                f"{carvers_note(state, child.namespace, key, ordinary=True)}",
            ))
    return held


def _gate_budget_keys(
    state: BudgetState, child: Declaration, before: Declaration | None, parent: str, answer: _Answer
) -> None:
    """The tenant's charge (`tenant_charge`: its declared value, or what its
    pool holds when that is more) towards each key of the pool root R above
    it that it caps must fit what R has left."""
    root = state.budget_root(parent)
    if root is None:
        return
    limits = state.declarations[root].budgets
    targets = [key for key in limits if caps(child, key)]
    if not targets:
        return
    leaving = state.subtree_contribution(child.namespace, root, ordinary=False)
    reserved, below = _budget_holdings(state, child, before, parent)
    charge = tenant_charge(child, reserved, below)
    for target in sorted(targets, key=key_order):
        charged = charge.for_key(target)
        others = state.charged_to(root, target) - leaving.charges.for_key(target)
        used = state.reserved_for(root, target) - covered(leaving.reserved, target)
        available = limits[target] - others - used
        if charged > available:
            answer.reasons.append(Reason(
                quota_field(_charged_key(child, target).key),
                f"Forbidden: exceeds what pool {root} has left of {target.key!r}: "
                f"requested {charged}{_charge_note(child, target, charged)}, budget {limits[target]}, "
                f"carved out {others}, reserved {used} (available {max(available, 0)})"
                f"{state.declarations[root].unusable_note(target)}"
                f"{carvers_note(state, root, target, leaving=child.namespace) if others else ''}",
            ))


def _charged_key(child: Declaration, target: BudgetKey) -> BudgetKey:
    """The child's key a charge to `target` comes from, for the message's field."""
    if target in child.budgets:
        return target
    if ALL_CLASSES in child.budgets:
        return ALL_CLASSES
    return min(child.budgets, key=key_order)


def _charge_note(child: Declaration, target: BudgetKey, charged: int) -> str:
    declared = tenant_charge(child, {}, NO_CHARGE).for_key(target)
    notes = []
    if target.gpu_class is None and target not in child.budgets and len(child.budgets) > 1:
        notes.append("the sum of its class-scoped budgets")
    if target.gpu_class is not None and target not in child.budgets:
        notes.append("its all-classes budget, which it may spend on this class")
    if charged > declared:
        notes.append(f"its pool already holds {charged}, more than the {declared} it declares")
    return f" ({'; '.join(notes)})" if notes else ""


def _gate_ordinary_keys(
    state: BudgetState, child: Declaration, parent: str, held: dict[str, Fraction], answer: _Answer
) -> None:
    """Ordinary keys are compared by the quota key they render to. The
    tenant's charge is its value, or what its own pool holds when that is
    more (as the index charges carving tenants)."""
    root = state.ordinary_root(parent)
    if root is None:
        return
    limits = state.declarations[root].ordinary
    keys = sorted(key for key in child.ordinary if key in limits)
    if not keys:
        return
    leaving = state.subtree_contribution(child.namespace, root, ordinary=True)
    pool_usage = state.pool_usage.get(root, {})
    pool_charges = state.ordinary_charges.get(root, {})
    for key in keys:
        charge = max(child.ordinary[key], held.get(key, Fraction(0)))
        others = pool_charges.get(key, Fraction(0)) - leaving.ordinary_charges.get(key, Fraction(0))
        used = pool_usage.get(key, Fraction(0)) - leaving.usage.get(key, Fraction(0))
        available = limits[key] - others - used
        if charge > available:
            note = "" if charge == child.ordinary[key] else f" (its subtree already holds {format_amount(key, charge)})"
            answer.reasons.append(Reason(
                quota_field(child.declared_as[key]),
                f"Forbidden: exceeds what pool {root} has left of {_named(child, key, state.declarations[root])}: "
                f"requested {format_amount(key, child.ordinary[key])}{note}, budget {format_amount(key, limits[key])}, "
                f"carved out {format_amount(key, others)}, used {format_amount(key, used)} ({key}) "
                f"(available {format_amount(key, max(available, Fraction(0)))})"
                f"{state.declarations[root].unusable_note(key)}"
                f"{carvers_note(state, root, key, ordinary=True, leaving=child.namespace) if others else ''}",
            ))


def _named(child: Declaration, key: str, root: Declaration) -> str:
    """The key as both sides wrote it: `'cpu'`, or `'limits.cpu' (as 'cpu' there)`."""
    mine, theirs = child.declared_as[key], root.declared_as[key]
    return repr(mine) if mine == theirs else f"{mine!r} ({key}, declared as {theirs!r} there)"


def _gate_rejoin(state: BudgetState, child: Declaration, before: Declaration, parent: str, answer: _Answer) -> None:
    """An update that stops the tenant being a pool root returns its pool to
    the pool above: for every key of that pool root R the tenant's pool adds
    to (more than the tenant was charged to it), R's pool must still fit."""
    if state.is_budget_root(before) and not state.is_budget_root(child):
        root = state.budget_root(parent)
        if root is not None:
            reserved = state.pool_reserved.get(child.namespace, {})
            carved_below = state.charges.get(child.namespace, NO_CHARGE)
            charged = state.tenant_charges.get(child.namespace, NO_CHARGE)
            limits = state.declarations[root].budgets
            for key in sorted(limits, key=key_order):
                rejoining = covered(reserved, key) + carved_below.for_key(key)
                was_charged = charged.for_key(key) if caps(before, key) else 0
                if rejoining <= was_charged:
                    continue
                used = state.reserved_for(root, key)
                others = state.charged_to(root, key) - was_charged
                if used + others + rejoining > limits[key]:
                    answer.reasons.append(Reason(
                        "spec.resourceQuotas",
                        f"Forbidden: declaring no quotas returns the tenant's pool to pool {root}, which it "
                        f"would take over its GPU budget {key.key!r}: rejoining {rejoining} (reserved and "
                        f"carved out below), budget {limits[key]}, reserved {used}, carved out {others} "
                        f"({used + others + rejoining} > {limits[key]})"
                        f"{carvers_note(state, root, key, leaving=child.namespace) if others else ''}",
                    ))
    if before.is_ordinary_root and not child.is_ordinary_root:
        root = state.ordinary_root(parent)
        if root is not None:
            limits = state.declarations[root].ordinary
            keys = sorted(limits)
            charged = state.ordinary_charge.get(child.namespace, {})
            rejoining = state.held_below(child.namespace, keys) if keys else {}
            usage = state.pool_usage.get(root, {})
            pool_charges = state.ordinary_charges.get(root, {})
            for key in keys:
                was_charged = charged.get(key, Fraction(0))
                if rejoining[key] <= was_charged:
                    continue
                used = usage.get(key, Fraction(0))
                others = pool_charges.get(key, Fraction(0)) - was_charged
                if used + others + rejoining[key] > limits[key]:
                    answer.reasons.append(Reason(
                        "spec.resourceQuotas",
                        f"Forbidden: declaring no ordinary quotas returns the tenant's subtree to pool {root}, which "
                        f"it would take over {_root_key_name(state, root, key)}: rejoining "
                        f"{format_amount(key, rejoining[key])} ({key}, used and carved out below), "
                        f"budget {format_amount(key, limits[key])}, used {format_amount(key, used)}, "
                        f"carved out {format_amount(key, others)} "
                        f"({format_amount(key, used + others + rejoining[key])} > {format_amount(key, limits[key])})"
                        f"{carvers_note(state, root, key, ordinary=True, leaving=child.namespace) if others else ''}",
                    ))


def _root_key_name(state: BudgetState, root: str, key: str) -> str:
    return repr(state.declarations[root].declared_as[key])
