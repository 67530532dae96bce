"""The budget index of a changing state: what the admission webhook keeps
from its list+watch cache (and its reservation ledger), fed one object at a
time.

    live = LiveIndex(objects)        # the first list
    live.upsert(obj)                 # ADDED / MODIFIED: add or replace by identity
    live.remove(obj)                 # DELETED: by identity
    check_write(live.state, write)   # the same answer `check` gives for live.objects()

Contract: `live.state` always equals `index_state(live.objects())`, and the
objects are keyed by identity (`cozyrender.kube.identity`): group, kind,
namespace and name, whatever the version.

The first implementation re-indexes the whole state when it is read after a
change; the incremental one replaces it behind the same interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from cozyrender.gpuclass.classes import identity_group
from cozyrender.kube.identity import identity_of
from cozyrender.kube.shape import ShapeError

from .index import BudgetState, index_state


class LiveIndex:
    def __init__(self, objects: Iterable[Mapping] = ()) -> None:
        self._objects: dict[tuple, Mapping] = {}
        for obj in objects:
            self.upsert(obj)
        self._state: BudgetState | None = None

    def upsert(self, obj: Mapping) -> None:
        """Add `obj`, or replace the object of the same identity."""
        self._objects[_identity(obj)] = obj
        self._state = None

    def remove(self, obj: Mapping) -> None:
        """Remove the object of `obj`'s identity (absent: nothing to do)."""
        if self._objects.pop(_identity(obj), None) is not None:
            self._state = None

    def get(self, obj: Mapping) -> Mapping | None:
        """The stored object of `obj`'s identity."""
        return self._objects.get(_identity(obj))

    def objects(self) -> Iterator[Mapping]:
        return iter(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)

    @property
    def state(self) -> BudgetState:
        if self._state is None:
            self._state = index_state(self._objects.values())
        return self._state


def _identity(obj: Mapping) -> tuple:
    identity = identity_of(obj, identity_group(obj))
    if identity is None:
        raise ShapeError.at(obj, "metadata", "has no usable kind, name or namespace")
    return identity
