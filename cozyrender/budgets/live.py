"""The budget index of a changing state: what the admission webhook keeps
from its list+watch cache (and its reservation ledger), fed one object at a
time.

    live = LiveIndex(objects)        # the first list
    live.upsert(obj)                 # ADDED / MODIFIED: add or replace by identity
    live.remove(obj)                 # DELETED: by identity
    check_write(live.state, write)   # the same answer `check` gives for live.objects()

Contract: `live.state` always equals `index_state(live.objects())`, field by
field, and the objects are keyed by identity (`cozyrender.kube.identity`):
group, kind, namespace and name, whatever the version; an upsert replaces
the object of its identity (old and new versions are never "two copies").

An event updates the index in time proportional to what it touches, never
by re-indexing, through the same functions `index_state` runs for every
pool (`index`: one implementation of the arithmetic):
- a workload: its namespace's reservations, its pool's figures, then the
  charges up the chain of pool roots above it (at most one per ancestor);
- a pod or quota: its namespace's usage (its pods and quotas read again),
  its ordinary pool's figures, the charges above;
- a Tenant: the pools of its own subtree re-derived (the namespaces down to
  the next pool roots below it), then the charges above;
- a GPUClass, the tenant-root Namespace or values Secret, a tenant
  Namespace's label: their small derived parts (class conflicts, the
  platform's vGPU entitlement, the label).

An object the rules cannot read raises the ShapeError `index_state` would
raise for the resulting objects (the caller decides what to do), and then
changes nothing: everything that can fail is read before anything changes.

`state` is the live object, changed in place by each event: the caller runs
events and checks one at a time (one event loop, or a lock), never a check
during an event.

Compact pods (`LiveIndex(compact_pods=True)`, what the webhook's cache
uses): a pod is kept as its name and what the usage rules read of it
(`usage.compact_pod`): one shared reading for every pod of the same
figures, its own copy only for a pod the rules refuse or read field by
field. `state.pods` then lists those readings, so every figure, decision
and error is the same as for the whole pods (a property test holds it),
but the lists are not the pod objects: `objects()` gives each pod back as
its name and reading, and the contract above holds for every other field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from cozyrender.gcpause import collector_paused
from cozyrender.gpuclass.classes import identity_group
from cozyrender.kube.identity import identity_of
from cozyrender.kube.shape import ShapeError
from cozyrender.gpuclass.conflicts import find_conflicts

from . import index as ix
from .index import BudgetState, Indexed, index_state
from cozyrender.namespaces import ancestors, is_malformed_tenant_namespace, is_tenant_namespace, parent_namespace
from . import holders
from .doors import may_hold_devices
from .holders import resolve
from .usage import compact_pod, usage_under


class LiveIndex:
    def __init__(self, objects: Iterable[Mapping] = (), compact_pods: bool = False) -> None:
        self._objects: dict[tuple, Mapping] = {}
        self._compact = compact_pods
        # Compact pods: namespace -> pod name -> its reading (pods are then not in `_objects`).
        self._pods: dict[str, dict] = {}
        self._pod_count = 0
        self._add(objects)
        self._build()

    @property
    def compact_pods(self) -> bool:
        return self._compact

    def _add(self, objects: Iterable[Mapping]) -> None:
        for obj in objects:
            identity = _identity(obj)
            if self._compact and identity[:2] == _POD:
                self._store_pod(*self.pod_entry(obj))
            else:
                self._objects[identity] = obj

    def _store_pod(self, identity: tuple, reading: Mapping | None) -> None:
        namespace, name = identity[2], identity[3]
        by_name = self._pods.get(namespace)
        if reading is None:
            if by_name is not None and by_name.pop(name, None) is not None:
                self._pod_count -= 1
                if not by_name:
                    del self._pods[namespace]
            return
        if by_name is None:
            by_name = self._pods[namespace] = {}
        if name not in by_name:
            self._pod_count += 1
        by_name[name] = reading

    def use_compact_pods(self) -> None:
        """Keep pods compact from now on (see the module's notes)."""
        if self._compact:
            return
        pods = [obj for identity, obj in self._objects.items() if identity[:2] == _POD]
        self._objects = {identity: obj for identity, obj in self._objects.items() if identity[:2] != _POD}
        self._compact = True
        self._add(pods)
        self._build()

    @staticmethod
    def pod_entry(obj: Mapping) -> tuple[tuple, Mapping]:
        """A pod's identity and reading for `extend` (ShapeError: metadata
        the index cannot key it by)."""
        identity = _identity(obj)
        ix.classify(obj, identity)  # a pod with no namespace raises here, as in index_state
        return identity, compact_pod(obj)[0]

    def extend(self, objects: Iterable[Mapping] = (), pods: Iterable[tuple[tuple, Mapping]] = ()) -> list[Mapping]:
        """Add many objects (and compact pods as `pod_entry` gives them) at
        once, and index everything again: a first list, one index instead of
        an event per object. When anything cannot be read this way, nothing
        changes and every object given comes back, to be upserted one at a
        time (which names the one the rules cannot read); else []."""
        added: list[tuple[tuple, Mapping | None]] = []
        added_pods: list[tuple[tuple, Mapping | None]] = []
        refused: list[Mapping] = []
        more_pods: list[tuple[tuple, Mapping]] = []
        for obj in objects:
            try:
                identity = _identity(obj)
                if self._compact and identity[:2] == _POD:
                    more_pods.append(self.pod_entry(obj))
                    continue
            except ShapeError:
                refused.append(obj)
                continue
            added.append((identity, self._objects.get(identity)))
            self._objects[identity] = obj
        for identity, reading in chain(pods, more_pods):
            added_pods.append((identity, self._pods.get(identity[2], {}).get(identity[3])))
            self._store_pod(identity, reading)
        if not added and not added_pods:
            return refused
        try:
            self._build()
        except ShapeError:
            back = [obj for identity, _ in added for obj in (self._objects[identity],)]
            back += [_named(identity, self._pods[identity[2]][identity[3]]) for identity, _ in added_pods]
            for identity, previous in reversed(added):
                if previous is None:
                    del self._objects[identity]
                else:
                    self._objects[identity] = previous
            for identity, previous in reversed(added_pods):
                self._store_pod(identity, previous)
            self._build()
            return back + refused
        return refused

    def _named_pods(self) -> Iterator[Mapping]:
        """The compact pods as objects: name, namespace and reading."""
        for namespace, by_name in self._pods.items():
            for name, reading in by_name.items():
                yield _named(("", "Pod", namespace, name), reading)

    def _build(self) -> None:
        """Index every object at once (the first list, or after the platform's
        nesting switch flipped: every pool's membership may change). Compact
        pods are added afterwards, a namespace at a time, as their events
        would be (`_usage_object`): never as objects, never all at once."""
        saved = self.__dict__.copy()
        # Compact pods holding devices are their own copies, named: indexed with the rest for their doors.
        doors = {(namespace, name): reading for namespace, by_name in self._pods.items()
                 for name, reading in by_name.items()
                 if "metadata" in reading and may_hold_devices(reading)} if self._compact else {}
        self._state: BudgetState = index_state(chain(self._objects.values(), doors.values()))
        if not self._compact:
            self._pods = {}
        # Pods and quotas per namespace, by identity (the state's lists are
        # their values, in the order `objects()` gives them); compact pods by name.
        self._quotas: dict[str, dict[tuple, Mapping]] = {}
        # Namespaces the tree holds (a Tenant, reservations, quotas or pods
        # there), and per namespace how many of them its subtree holds: a
        # child is linked to its parent while its count is above zero.
        self._known: set[str] = set()
        self._below: dict[str, int] = {}
        with collector_paused():
            listings = [(self._quotas, self._state.quotas)]
            if not self._compact:
                listings.append((self._pods, self._state.pods))
            for by_namespace, listing in listings:
                for namespace, found in listing.items():
                    by_namespace[namespace] = {_identity(obj): obj for obj in found}
            for namespace in self._state.declarations.keys() | self._state.reserved.keys() \
                    | self._state.quotas.keys() | self._state.pods.keys():
                self._relink(namespace)
            if self._compact:
                pods, self._pods, self._pod_count = self._pods, {}, 0
                try:
                    for namespace, by_name in pods.items():
                        if namespace and is_malformed_tenant_namespace(namespace):
                            for name in by_name:
                                if (namespace, name) not in doors:  # (those were indexed with the rest)
                                    ix.add_malformed(self._state, ix.classify(_stand_in(("", "Pod", namespace, name))))
                        self._usage_object(ix.POD, namespace, None, None, whole=by_name)
                except Exception:
                    self.__dict__.update(saved)
                    raise

    # -- the interface ----------------------------------------------------------

    def upsert(self, obj: Mapping) -> None:
        """Add `obj`, or replace the object of the same identity."""
        identity = _identity(obj)
        if self._compact and identity[:2] == _POD:
            self._upsert_pod(identity, obj)
            return
        new = ix.classify(obj)
        door = _pod_door(obj) if identity[:2] == _POD else None
        old_obj = self._objects.get(identity)
        old = ix.classify(old_obj) if old_obj is not None else None
        self._apply(identity, old_obj, old, obj, new)
        self._objects[identity] = obj
        if identity[:2] == _POD:
            self._pod_door(identity, door)

    def _upsert_pod(self, identity: tuple, obj: Mapping) -> None:
        new = ix.classify(obj)  # checks its metadata, files it under a malformed namespace
        reading, shared = compact_pod(obj)
        stored = self._pods.get(identity[2], {}).get(identity[3])
        if shared and stored is reading:
            return  # the same figures as before: nothing to do
        door = _pod_door(obj)  # may raise: before anything changes
        old = ix.classify(_stand_in(identity)) if stored is not None else None
        self._apply(identity, None, old, reading, new)
        self._pod_door(identity, door)

    def _pod_door(self, identity: tuple, door) -> None:
        """A pod's devices (`budgets.doors`), beside its usage."""
        key = identity[1:]
        if door is None and key not in self._state.doors:
            return
        self._holder(key, resolve(self._state, door) if door is not None else None, door)

    def remove(self, obj: Mapping) -> None:
        """Remove the object of `obj`'s identity (absent: nothing to do)."""
        identity = _identity(obj)
        if self._compact and identity[:2] == _POD:
            if self._pods.get(identity[2], {}).get(identity[3]) is not None:
                self._apply(identity, None, ix.classify(_stand_in(identity)), None, None)
                self._pod_door(identity, None)
            return
        old_obj = self._objects.get(identity)
        if old_obj is None:
            return
        self._apply(identity, old_obj, ix.classify(old_obj), None, None)
        self._objects.pop(identity, None)  # (already gone when the event re-indexed everything)
        if identity[:2] == _POD:
            self._pod_door(identity, None)

    def get(self, obj: Mapping) -> Mapping | None:
        """The stored object of `obj`'s identity (a compact pod: its reading)."""
        identity = _identity(obj)
        if self._compact and identity[:2] == _POD:
            return self._pods.get(identity[2], {}).get(identity[3])
        return self._objects.get(identity)

    def identities(self, group: str, kind: str) -> list[tuple]:
        """The identities of the stored objects of one kind (a relist's difference)."""
        if self._compact and (group, kind) == _POD:
            return [(group, kind, namespace, name) for namespace, by_name in self._pods.items() for name in by_name]
        return [identity for identity in self._objects if identity[0] == group and identity[1] == kind]

    def objects(self) -> Iterator[Mapping]:
        if self._compact:
            return chain(self._objects.values(), self._named_pods())
        return iter(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects) + self._pod_count

    @property
    def state(self) -> BudgetState:
        return self._state

    # -- one event ----------------------------------------------------------------

    def _apply(self, identity: tuple, old_obj: Mapping | None, old: Indexed | None,
               new_obj: Mapping | None, new: Indexed | None) -> None:
        """Replace `old` (None: absent) by `new` (None: removed). Same
        identity, so the same kind: one of them decides what is touched."""
        entry = new if new is not None else old
        if entry is None:
            return  # a kind the index does not read
        what = entry.what
        if old is not None and new is not None and old.what != new.what:  # cannot happen for one identity
            raise ShapeError.at(new_obj, "", "changes what the object is to the budget index")
        state = self._state
        if what == ix.TENANT_OBJECT:
            self._tenant(old.value if old else None, new.value if new else None, new_obj)
        elif what == ix.WORKLOAD_OBJECT:
            self._holder(identity[1:], new.value if new else None, None)
        elif what == ix.DOOR_OBJECT:
            door = new.value if new else None
            self._holder(identity[1:], resolve(state, door) if door is not None else None, door)
        elif what == ix.POD and self._compact:
            self._usage_object(what, entry.namespace, identity[3], new_obj)
        elif what in (ix.POD, ix.QUOTA):
            self._usage_object(what, entry.namespace, identity, new_obj)
        elif what == ix.GPUCLASS:
            classes = dict(state.gpuclasses)
            if old is not None:
                del classes[old.value]
            if new is not None:
                classes[new.value] = new_obj
            find_conflicts(classes.values())  # may raise: before anything changes
            before = (state.class_resources, state.class_device_classes, state.conflicts)
            state.gpuclasses = classes
            ix.derive_classes(state)
            if state.doors and (state.class_resources, state.class_device_classes, state.conflicts) != before:
                # Which devices are GPUs of which class changed (rare: a hoster's write): re-index.
                self._rebuild_with(identity, new_obj)
                return
        elif what == ix.ROOT_NAMESPACE_OBJECT:
            state.root_label_vgpu = new.value if new else None
            ix.derive_platform(state)
        elif what == ix.VALUES_SECRET:
            vgpu, nest = new.value if new else (None, False)
            if nest != state.gpu_budgets_nest:  # rare (a platform setting): re-index, in time to the state
                self._rebuild_with(identity, new_obj)
                return
            state.values_vgpu = vgpu
            ix.derive_platform(state)
        elif what == ix.TENANT_NAMESPACE_OBJECT:
            if new is not None and new.value is not None:
                state.namespace_vgpu[entry.namespace] = new.value
            else:
                state.namespace_vgpu.pop(entry.namespace, None)
        # Everything that can fail has been read: file it under malformed namespaces.
        if old is not None and old.malformed:
            ix.add_malformed(state, old, -1)
        if new is not None and new.malformed:
            ix.add_malformed(state, new)

    def _rebuild_with(self, identity: tuple, obj: Mapping | None) -> None:
        """Index everything again with `obj` (None: removed) in place."""
        if obj is None:
            self._objects.pop(identity, None)
        else:
            self._objects[identity] = obj
        self._build()

    def _holder(self, key: tuple, workload, door) -> None:
        """An app's or a door's own devices changed (None: gone): the heads
        of the chains it is in are charged again (`budgets.holders`)."""
        state = self._state
        touched = holders.family(state, key)
        touched |= {holders.head_of(state, member) for member in touched}
        holders.file_owned(state, key, workload, door)
        after = holders.family(state, key)
        touched |= after | {holders.head_of(state, member) for member in after}
        for head in sorted(touched):
            old, new = state.workloads.get(head), holders.charged(state, head)
            if old != new:
                self._workload(old, new)

    def _workload(self, old, new) -> None:
        state = self._state
        workload = new if new is not None else old
        namespace = workload.namespace
        if old is not None:
            del state.workloads[old.identity]
            ix.add_to(state.reserved, namespace, old.reservations, -1)
        if new is not None:
            state.workloads[new.identity] = new
            ix.add_to(state.reserved, namespace, new.reservations)
        root = state.budget_root(namespace)
        if root is not None:
            if old is not None:
                ix.add_to(state.pool_reserved, root, old.reservations, -1)
            if new is not None:
                ix.add_to(state.pool_reserved, root, new.reservations)
            ix.cascade_budget(state, root)
        self._relink(namespace)

    def _usage_object(self, what: str, namespace: str, identity, obj: Mapping | None,
                      whole: dict | None = None) -> None:
        """A pod or quota: its namespace's usage read again (first: a
        malformed pod raises before anything changes), then the pool above.
        (`identity`: a compact pod's name; `whole`: all of the namespace's
        compact pods at once.)"""
        state = self._state
        if whole is not None:
            objects = whole
        else:
            objects = dict(self._by_namespace(what).get(namespace, {}))
            if obj is None:
                objects.pop(identity, None)
            else:
                objects[identity] = obj
        listed = list(objects.values())
        quotas = listed if what == ix.QUOTA else state.quotas.get(namespace)
        pods = listed if what == ix.POD else state.pods.get(namespace)
        root = state.ordinary_root(namespace) if is_tenant_namespace(namespace) else None
        used = None
        if root is not None and (quotas or pods):
            used = usage_under(state.declarations[root].ordinary, quotas, pods)
        # Read; now change.
        by_namespace, listing = (self._quotas, state.quotas) if what == ix.QUOTA else (self._pods, state.pods)
        if what == ix.POD and self._compact:
            self._pod_count += len(objects) - len(by_namespace.get(namespace, ()))
        if objects:
            by_namespace[namespace] = objects
            listing[namespace] = listed
        else:
            by_namespace.pop(namespace, None)
            listing.pop(namespace, None)
        if root is not None:
            old_used = state.usage.pop(namespace, None)
            if old_used:
                ix.add_to(state.pool_usage, root, old_used, -1)
            if used is not None:
                state.usage[namespace] = used
                ix.add_to(state.pool_usage, root, used)
            ix.cascade_ordinary(state, root)
        self._relink(namespace)

    def _tenant(self, old, new, obj: Mapping | None) -> None:
        """A Tenant: its subtree's pools re-derived in both senses, then the
        charges above. Reads first (another owner of its namespace, the
        usage of its subtree under the keys that now apply)."""
        state = self._state
        declaration = new if new is not None else old
        namespace = declaration.namespace
        if new is not None:
            ix.owner_conflict(state, new, obj)
        in_tree = is_tenant_namespace(namespace)
        parent = parent_namespace(namespace)
        # The pools' membership follows root status (and, for ordinary keys,
        # which keys the usage is read under); a value alone moves only the
        # tenant's own charge.
        budget_changed = in_tree and state.is_budget_root(old) != state.is_budget_root(new)
        ordinary_changed = in_tree and _ordinary_keys(old) != _ordinary_keys(new)
        ordinary_above = state.ordinary_root(parent) if ordinary_changed and parent is not None else None
        usages: dict = {}
        if ordinary_changed:
            members, boundary = ix.region(state, namespace, ordinary=True)
            if new is not None and new.is_ordinary_root:
                # Read under the new keys, through a stand-in state that differs only there.
                probe = BudgetState(declarations={namespace: new}, quotas=state.quotas, pods=state.pods)
                usages = ix.region_usage(probe, members, namespace)
            else:
                usages = ix.region_usage(state, members, ordinary_above)
        # Read; now change. Take the subtree out of the pools it was in ...
        budget_above = state.budget_root(parent) if budget_changed and parent is not None else None
        if budget_changed:
            if state.is_budget_root(old):
                state.pool_reserved.pop(namespace, None)
                state.charges.pop(namespace, None)
                state.physical_below.pop(namespace, None)
            elif budget_above is not None:
                reserved, charges, physical = ix.budget_figures(state, *ix.region(state, namespace, ordinary=False))
                ix.add_to(state.pool_reserved, budget_above, reserved, -1)
                ix.add_charge_to(state.charges, budget_above, charges, -1)
                ix.add_to(state.physical_below, budget_above, physical, -1)
        if ordinary_changed:
            if old is not None and old.is_ordinary_root:
                state.pool_usage.pop(namespace, None)
                state.ordinary_charges.pop(namespace, None)
            elif ordinary_above is not None:
                usage, charges = ix.ordinary_figures(state, members, boundary)
                ix.add_to(state.pool_usage, ordinary_above, usage, -1)
                ix.add_to(state.ordinary_charges, ordinary_above, charges, -1)
            for member in members:
                state.usage.pop(member, None)
        if new is None:
            del state.declarations[namespace]
        else:
            state.declarations[namespace] = new
        # ... and into the pools it is in now.
        if budget_changed:
            if state.is_budget_root(new):
                ix.set_budget_pool(state, namespace)
            elif budget_above is not None:
                reserved, charges, physical = ix.budget_figures(state, *ix.region(state, namespace, ordinary=False))
                ix.add_to(state.pool_reserved, budget_above, reserved)
                ix.add_charge_to(state.charges, budget_above, charges)
                ix.add_to(state.physical_below, budget_above, physical)
            ix.cascade_budget(state, budget_above)
        if ordinary_changed:
            if new is not None and new.is_ordinary_root:
                ix.set_ordinary_pool(state, namespace, usages)
            else:
                state.usage.update(usages)
                if ordinary_above is not None:
                    usage, charges = ix.ordinary_figures(state, members, boundary)
                    ix.add_to(state.pool_usage, ordinary_above, usage)
                    ix.add_to(state.ordinary_charges, ordinary_above, charges)
            ix.cascade_ordinary(state, ordinary_above)
        if in_tree:  # its own charges (its values), and up the chain when they changed
            ix.cascade_budget(state, namespace)
            ix.cascade_ordinary(state, namespace)
        self._relink(namespace)

    # -- bookkeeping ----------------------------------------------------------------

    def _by_namespace(self, what: str) -> dict[str, dict[tuple, Mapping]]:
        return self._quotas if what == ix.QUOTA else self._pods

    def _relink(self, namespace: str) -> None:
        """Keep `children` as `index_state` links it: a namespace holding a
        Tenant, reservations, quotas or pods is linked to its ancestors."""
        state = self._state
        known = (namespace in state.declarations or namespace in state.reserved
                 or namespace in state.quotas or namespace in state.pods)
        if known == (namespace in self._known):
            return
        step = 1 if known else -1
        if known:
            self._known.add(namespace)
        else:
            self._known.discard(namespace)
        for current in ancestors(namespace):
            count = self._below.get(current, 0) + step
            if count:
                self._below[current] = count
            else:
                del self._below[current]
            parent = parent_namespace(current)
            if parent is None:
                continue
            if count == 1 and step > 0:
                state.children.setdefault(parent, set()).add(current)
            elif count == 0:
                siblings = state.children[parent]
                siblings.discard(current)
                if not siblings:
                    del state.children[parent]


_POD = ("", "Pod")


def _pod_door(pod: Mapping):
    """A pod's door when it holds devices, else None (`index.pod_door`)."""
    if not may_hold_devices(pod):
        return None
    door = ix.pod_door(pod)
    return door if door.devices else None


def _named(identity: tuple, reading: Mapping) -> Mapping:
    """A compact pod as an object (its own copy is named already)."""
    if "metadata" in reading:
        return reading
    return {**reading, "apiVersion": "v1", "metadata": {"name": identity[3], "namespace": identity[2]}}


def _stand_in(identity: tuple) -> dict:
    """A compact pod's name as an object, for what the index reads of its metadata."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": identity[3], "namespace": identity[2]}}


def _ordinary_keys(declaration) -> frozenset:
    """The quota keys a tenant's pool reads usage under (none: not an
    ordinary pool root)."""
    return frozenset(declaration.ordinary) if declaration is not None else frozenset()


def _identity(obj: Mapping) -> tuple:
    identity = identity_of(obj, identity_group(obj))
    if identity is None:
        raise ShapeError.at(obj, "metadata", "has no usable kind, name or namespace")
    return identity
