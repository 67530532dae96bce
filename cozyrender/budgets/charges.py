"""What a carving tenant is charged towards the budget keys of the pool
root above it (issue 11 items 1 and 2): the rule, and the `Charge` value
that sums charges per key.

The rule: a tenant is charged, for every class it caps, the larger of what
it may hold of that class and what its own pool already holds; see
`tenant_charge` for the details and the reasons. Beside the charge, what
its subtree physically holds in the classes it caps (`physical_charge`),
which the hierarchical rule counts for every ancestor.

Pure functions, no I/O. Depends on `model` (the declarations it charges),
never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.keys import BudgetKey

from .model import ALL_CLASSES, Declaration


class Charge:
    """Devices charged towards budget keys: `total` towards the all-classes
    key, `classes[c]` towards the key of class `c`, and `default` towards the
    key of any class not in `classes`. One tenant's charge, or the sum of
    several (`add`). Mutable while it is being summed; read-only after."""

    __slots__ = ("total", "default", "classes")

    def __init__(self, total: int = 0, default: int = 0, classes: dict[str, int] | None = None) -> None:
        self.total = total
        self.default = default
        self.classes = classes if classes is not None else {}

    def for_class(self, gpu_class: str) -> int:
        return self.classes.get(gpu_class, self.default)

    def for_key(self, key: BudgetKey) -> int:
        return self.total if key.gpu_class is None else self.classes.get(key.gpu_class, self.default)

    def add(self, other: Charge) -> None:
        for gpu_class in other.classes.keys() - self.classes.keys():
            self.classes[gpu_class] = self.default
        for gpu_class in self.classes:
            self.classes[gpu_class] += other.for_class(gpu_class)
        self.total += other.total
        self.default += other.default

    def minus(self, other: Charge) -> Charge:
        classes = {c: self.for_class(c) - other.for_class(c) for c in self.classes.keys() | other.classes.keys()}
        return Charge(self.total - other.total, self.default - other.default, classes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Charge):
            return NotImplemented
        classes = self.classes.keys() | other.classes.keys()
        return (self.total, self.default) == (other.total, other.default) and all(
            self.for_class(c) == other.for_class(c) for c in classes)

    def __repr__(self) -> str:
        return f"Charge(total={self.total}, default={self.default}, classes={self.classes})"


NO_CHARGE = Charge()


def tenant_charge(declaration: Declaration, reserved: Mapping[str, int], below: Charge) -> Charge:
    """What a carving tenant is charged towards the budget keys of the pool
    root above it, given what its own pool reserves (`reserved`, per class)
    and its own carving tenants' charges (`below`).

    The rule: a tenant is charged, for every class it caps, the larger of
    what it may hold of that class (the smallest of its keys covering the
    class) and what its pool already holds (reservations plus the charges
    below it). Why the larger: a charge below what the pool holds would let
    a parent lower a child's budget and hand the devices the child still
    holds to someone else (issue 11 item 1). A tenant declaring the
    all-classes key caps every class: it may spend that budget on any class,
    so it is charged that amount towards every class key above it (item 2),
    and towards the all-classes key the larger of its value and everything
    its pool holds. A tenant declaring only class keys caps those classes
    only: towards the all-classes key it is charged the sum of its per-class
    charges, and its pool's devices of other classes are charged to no key
    above it (the escape the audit reports)."""
    budgets = declaration.budgets
    if not budgets:
        return Charge()
    all_classes = budgets.get(ALL_CLASSES)
    declared = {key.gpu_class: value for key, value in budgets.items() if key.gpu_class is not None}
    if all_classes is None:
        classes = {c: max(value, reserved.get(c, 0) + below.for_class(c)) for c, value in declared.items()}
        return Charge(sum(classes.values()), 0, classes)
    classes = {
        c: max(min(declared.get(c, all_classes), all_classes), reserved.get(c, 0) + below.for_class(c))
        for c in declared.keys() | reserved.keys() | below.classes.keys()
    }
    total = max(all_classes, sum(reserved.values()) + below.total)
    return Charge(total, max(all_classes, below.default), classes)


def caps_class(declaration: Declaration, gpu_class: str) -> bool:
    """Whether a tenant's own keys cap `gpu_class`: its all-classes key, or
    its key of that class. Devices of a class it does not cap escape every
    budget above it (by design: it declares its own quotas)."""
    budgets = declaration.budgets
    return ALL_CLASSES in budgets or BudgetKey(gpu_class) in budgets


def physical_charge(declaration: Declaration, reserved: Mapping[str, int], below: Mapping[str, int]) -> dict[str, int]:
    """What a carving tenant's subtree physically holds towards the budget
    keys above it (the hierarchical rule, issue 19 item 5b), per class: the
    devices its own pool reserves (`reserved`) plus what its carving
    tenants' subtrees hold towards its keys (`below`), for the classes it
    caps (`caps_class`); nothing for the others."""
    held: dict[str, int] = {}
    for per_class in (reserved, below):
        for gpu_class, count in per_class.items():
            if count and caps_class(declaration, gpu_class):
                held[gpu_class] = held.get(gpu_class, 0) + count
    return held


def caps(declaration: Declaration, key: BudgetKey) -> bool:
    """Whether a carving tenant is charged towards a pool root's `key`: any
    budget counts towards the all-classes key; a class key counts the
    tenant's key of that class, or its all-classes key."""
    if not declaration.budgets:
        return False
    return key.gpu_class is None or key in declaration.budgets or ALL_CLASSES in declaration.budgets


def budget_charge(declaration: Declaration, key: BudgetKey) -> int:
    """What a tenant's declaration alone (its pool holding nothing) charges
    towards a pool root's `key` (see `tenant_charge`)."""
    return tenant_charge(declaration, {}, NO_CHARGE).for_key(key) if caps(declaration, key) else 0


__all__ = ["ALL_CLASSES", "NO_CHARGE", "Charge", "budget_charge", "caps", "caps_class", "physical_charge", "tenant_charge"]
