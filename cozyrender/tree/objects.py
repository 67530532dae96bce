"""The pool tree of the objects a controller holds (its list+watch stores),
with each object the rules cannot read left out, as the webhook leaves it
out (`budgets.unreadable`), and which namespaces' figures it leaves unknown.

Rules:
- the state is indexed by the one library `check` and `cozyrender tree`
  use (`budgets.index_state`, `budgets.audit`, `tree.build_tree`); nothing
  is computed here;
- an object whose ShapeError names it (`unreadable_state_object`) is left
  out and the state indexed again, at most `MAX_LEFT_OUT` times; an error
  that names no object (two copies of one object, two Tenants owning one
  namespace) raises it, as `check` does: no tree at all;
- a namespace's figures are unknown when an object left out bears on what
  a write in it would read (its pools, a Tenant or Namespace holding its
  subtree, a hoster's object for every namespace): `problem(namespace)`
  says which objects, named with the Tenant owning their namespace.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cozyrender.tree.model import Tree


@dataclass
class Computed:
    """A tree, the indexed state it was built from, the objects left out, and the audit's
    findings the tree was built with."""

    tree: Tree
    state: object
    left_out: list = field(default_factory=list)
    findings: list = field(default_factory=list)

    def problem(self, namespace: str) -> str | None:
        """Why the figures of `namespace` cannot be computed, naming each
        object left out that bears on them (at most three); None when none does."""
        if not self.left_out:
            return None
        from cozyrender.budgets.unreadable import bearing, described

        found = bearing(self.state, self.left_out, {"kind": "Pod", "metadata": {"namespace": namespace}})
        if not found:
            return None
        shown = "; ".join(f"{described(item)} [in {where}]" for item, where in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        return (f"{len(found)} object(s) the rules cannot read bear on these figures, so they cannot be "
                f"computed until the object is fixed or deleted: {shown}{more}")


def computed_tree(objects: Sequence[Mapping], platform_vgpu: bool | None = None) -> Computed:
    """The pool tree of `objects` (the rule above). Raises the ShapeError of a
    state that stays unreadable."""
    from cozyrender.budgets import audit, index_state
    from cozyrender.budgets.unreadable import MAX_LEFT_OUT, unreadable_state_object
    from cozyrender.kube.shape import ShapeError
    from cozyrender.tree import build_tree

    kept, left_out = list(objects), []
    while True:
        try:
            state = index_state(kept)
            break
        except ShapeError as err:
            found = unreadable_state_object(err, kept)
            if found is None or len(left_out) == MAX_LEFT_OUT:
                raise
            left_out.append(found)
            kept = [item for item in kept if item is not err.obj]
    findings = audit(state)
    return Computed(build_tree(state, findings, platform_vgpu=platform_vgpu), state, left_out, findings)


__all__ = ["Computed", "computed_tree"]
