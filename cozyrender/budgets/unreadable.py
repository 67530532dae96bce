"""Which decisions an object the rules cannot read bears on (issue 28 item 2).

Rule: an object the rules cannot read is left out of the index, so the
figures of the pools it belongs to are unknown; it bears on the decisions
that read those pools, and on no other. Exactly:

- a namespaced object in namespace N belongs to N's pools: the nearest
  budget pool root and the nearest ordinary pool root at or above N;
- a Tenant belongs to the pools of the namespace it is created in (its
  charge there is unknown) and, with a Namespace of the tenant tree, holds
  its own subtree (what the pools below read from it);
- a GPUClass, the tenant-root Namespace and tenant-root's
  `cozystack-values` Secret bear on every decision (they set the classes
  and the platform's vGPU entitlement; only the hoster writes them).

A write reads the pools of its namespace (a Tenant: of the namespace it is
created in) and, for a Tenant, its own subtree. It is refused when one of
those is an unreadable object's; every other write is decided as before.
Above the unreadable object's pool, the tenant heading it is charged at
least its declared values, so the pools above are decided on those.

The owner named beside the object is the Tenant owning its namespace:
the one a hoster asks to fix or delete it.

`decide_write` makes `cozyrender check`'s decision on a state holding such
objects as the webhook makes it: each found while indexing and deciding is
left out, and the write is refused when it bears on one.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cozyrender.values_secret import SECRET_NAME as VALUES_SECRET_NAME

from cozyrender.kube.shape import ShapeError, ref

from .index import BudgetState, object_identity
from cozyrender.namespaces import ROOT_NAMESPACE, is_tenant_namespace, is_within, owned_namespace, parent_namespace

# Kinds whose unreadable copy bears on every decision.
_CLUSTER_WIDE = frozenset({"GPUClass"})


@dataclass(frozen=True)
class UnreadableObject:
    """One object the rules cannot read: its kind, namespace (None when
    cluster-scoped), name, and why (the ShapeError's line)."""

    kind: str
    namespace: str | None
    name: str
    why: str

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def everywhere(self) -> bool:
        """Whether it bears on every decision (a hoster's object)."""
        if self.kind in _CLUSTER_WIDE:
            return True
        if self.kind == "Namespace":
            return self.name == ROOT_NAMESPACE
        return self.kind == "Secret" and self.namespace == ROOT_NAMESPACE and self.name == VALUES_SECRET_NAME

    @property
    def home(self) -> str | None:
        """The namespace whose pools it belongs to (a Namespace: itself)."""
        return self.name if self.kind == "Namespace" else self.namespace

    @property
    def holds(self) -> str | None:
        """The subtree it holds: a Tenant's own namespace, a tenant Namespace
        itself; None for anything else."""
        if self.kind == "Tenant" and self.namespace:
            owned = owned_namespace(self.name, self.namespace)
            return owned if is_tenant_namespace(owned) else None
        if self.kind == "Namespace" and is_tenant_namespace(self.name):
            return self.name
        return None


def owner(namespace: str | None) -> str | None:
    """The Tenant owning tenant namespace `namespace`, as messages name it
    (`Tenant tenant-root/foo`), by name; None outside the tenant tree."""
    if namespace is None or not is_tenant_namespace(namespace):
        return None
    if namespace == ROOT_NAMESPACE:
        return f"Tenant {ROOT_NAMESPACE}/root"
    parent = parent_namespace(namespace)
    name = namespace.removeprefix("tenant-") if parent == ROOT_NAMESPACE else namespace[len(parent) + 1:]
    return f"Tenant {parent}/{name}"


def described(found: UnreadableObject) -> str:
    """`Pod tenant-foo/p (in the namespace of Tenant tenant-root/foo): why`."""
    who = owner(found.home)
    return f"{found.ref}{f' (in the namespace of {who})' if who else ''}: {found.why.removeprefix(found.ref + ': ')}"


def unreadable_state_object(err: ShapeError, objects: Iterable[Mapping]) -> UnreadableObject | None:
    """The object of `objects` that ShapeError `err` is about, as an
    unreadable object, when the error is about one of its fields and its
    kind, namespace and name read (so it can be named and placed, as the
    webhook's cache places it); None when `err` is about something else:
    an object with no usable name, two different copies of one object, two
    Tenants owning one namespace (the state itself is contradictory), or
    an object not among `objects` (the write)."""
    obj = err.obj
    if obj is None or getattr(err, "other", None) is not None or not err.field or not err.field[0]:
        return None
    if not any(item is obj for item in objects):
        return None
    return _placed(err)


def _placed(err: ShapeError) -> UnreadableObject | None:
    """`err`'s object as an unreadable object, or None when it has no
    kind, namespace and name to be placed by."""
    try:
        identity = object_identity(err.obj) if err.obj is not None else None
    except ShapeError:
        return None
    if identity is None:
        return None
    _, kind, namespace, name = identity
    return UnreadableObject(kind, namespace or None, name, str(err))


def _pools(state: BudgetState, namespace: str | None) -> set[str]:
    if namespace is None or not is_tenant_namespace(namespace):
        return set()
    return {root for root in (state.budget_root(namespace), state.ordinary_root(namespace)) if root is not None}


def _write_reach(obj: Mapping) -> tuple[str | None, str | None]:
    """(the namespace whose pools the write reads, the subtree it holds)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace, name = meta.get("namespace"), meta.get("name")
    namespace = namespace if isinstance(namespace, str) else None
    if obj.get("kind") == "Tenant" and namespace and isinstance(name, str):
        owned = owned_namespace(name, namespace)
        return namespace, owned if is_tenant_namespace(owned) else None
    return namespace, None


def bearing(state: BudgetState, unreadable: Iterable[UnreadableObject], obj: Mapping) -> list[tuple[UnreadableObject, str]]:
    """The unreadable objects the decision on write `obj` would read, each
    with the pool or subtree it is found in (sorted by object)."""
    namespace, subtree = _write_reach(obj)
    reads = _pools(state, namespace)
    found = []
    for item in unreadable:
        if item.everywhere:
            found.append((item, "every decision"))
            continue
        shared = reads & _pools(state, item.home)
        if shared:
            found.append((item, f"pool {min(shared)}"))
        elif subtree is not None and item.home is not None and is_within(item.home, subtree):
            found.append((item, f"the subtree of {subtree}"))
        elif item.holds is not None and namespace is not None and is_within(namespace, item.holds):
            found.append((item, f"the subtree of {item.holds}"))
    found.sort(key=lambda pair: pair[0].ref)
    return found


def refusal_reason(state: BudgetState, unreadable: Iterable[UnreadableObject], obj: Mapping) -> str | None:
    """Why the write cannot be decided, naming each unreadable object it
    bears on (at most three) and its owner; None when it bears on none."""
    found = bearing(state, unreadable, obj)
    if not found:
        return None
    shown = "; ".join(f"{described(item)} [in {where}]" for item, where in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"{len(found)} object(s) the rules cannot read are in the pools this write is decided in, so it "
            f"cannot be shown to fit: {shown}{more}. Writes elsewhere are decided as usual; this refusal holds "
            "until the object is fixed or deleted")


# Objects the rules cannot read that a write's check leaves out before it stops
# and calls the state unusable (each one found costs one more indexing).
MAX_LEFT_OUT = 50


def decide_write(objects: list[Mapping], write: Mapping, platform_vgpu: bool | None = None):
    """`check_write`'s decision on `write`, made as the webhook makes it
    when the state holds objects the rules cannot read (issue 28 item 2):
    each is left out of the index; a write whose pools (or subtree) hold
    one is refused naming it and the Tenant owning its namespace; any other
    write is decided as usual, with a warning naming what was left out. An
    error that is not about one nameable state object (two different
    copies, two Tenants owning one namespace, the write itself) is raised:
    bad input."""
    from .checks import Decision, Reason
    from .index import index_state
    from .write import check_write

    kept, left_out = objects, []
    while True:
        try:
            state = index_state(kept)
            decision = check_write(state, write, platform_vgpu=platform_vgpu)
            break
        except ShapeError as err:
            found = unreadable_state_object(err, kept)
            if found is None:  # the write's own problem is named as it is
                raise (naming_owner(err) if any(item is err.obj for item in kept) else err) from None
            if len(left_out) == MAX_LEFT_OUT:
                named = naming_owner(err)
                raise type(named)(f"more than {MAX_LEFT_OUT} objects the rules cannot read, so the state is not "
                                  f"usable; one is {named}", err.obj) from None
            left_out.append(found)
            kept = [item for item in kept if item is not err.obj]
    if not left_out:
        return decision
    reason = refusal_reason(state, left_out, write)
    if reason is not None:  # as the webhook: nothing else is decided
        return Decision((Reason("metadata.namespace", reason),))
    shown = "; ".join(described(item) for item in sorted(left_out, key=lambda item: item.ref)[:3])
    more = f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
    note = (f"{len(left_out)} object(s) the rules cannot read are left out of the state; none is in the pools "
            f"this write is decided in, so it is decided as usual (the webhook refuses writes in theirs): "
            f"{shown}{more}")
    return Decision(decision.reasons, (*decision.warnings, note))


def naming_owner(err: ShapeError) -> ShapeError:
    """ShapeError `err`, its object named with the Tenant owning its namespace
    as the webhook names it (`Pod tenant-foo/p (in the namespace of Tenant
    tenant-root/foo): ...`); unchanged when no Tenant owns it or the object
    has no usable name."""
    obj = err.obj
    found = _placed(err)
    if found is None or not str(err).startswith(f"{ref(obj)}: ") or owner(found.home) is None:
        return err
    named = ShapeError(described(found), obj)
    named.field = err.field
    if getattr(err, "other", None) is not None:
        named.other = err.other  # type: ignore[attr-defined]
    return named


__all__ = ["MAX_LEFT_OUT", "UnreadableObject", "bearing", "decide_write", "described", "naming_owner", "owner",
           "refusal_reason", "unreadable_state_object"]
