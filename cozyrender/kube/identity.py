"""Object identity, as the API server keys objects: group, kind, namespace
and name, whatever the version. A state gathered from several files (or read
twice through overlapping paths) can hold one object more than once; every
answer must be the same whichever copy comes first.

- Identical copies are one object (the first is kept).
- Different copies are bad input: which one the cluster holds cannot be known,
  and taking either would make the answer depend on input order.
- Copies are compared type by type (`1`, `1.0` and `true` differ: the rules
  read them differently), ignoring `apiVersion` and, for a cluster-scoped kind,
  a stray `metadata.namespace`.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.kube.shape import ShapeError

# The cluster-scoped kinds cozyrender reads; every other kind is namespaced.
CLUSTER_SCOPED = frozenset({"GPUClass", "Namespace", "Node"})

Identity = tuple  # (group, kind, namespace or None, name)


def identity_of(obj: Mapping, group: str) -> Identity | None:
    """`obj`'s identity under `group`, or None when its kind, name or namespace
    is not a string (the kind's reader reports that)."""
    kind, meta = obj.get("kind"), obj.get("metadata")
    if type(kind) is not str or type(meta) is not dict:
        return None
    name, namespace = meta.get("name"), meta.get("namespace")
    if type(name) is not str or not name or (namespace is not None and type(namespace) is not str):
        return None
    return (group, kind, None if kind in CLUSTER_SCOPED else namespace, name)


class Copies:
    """The first copy of each object seen; a different later copy is a
    ShapeError naming both (`err.obj` and `err.other`)."""

    def __init__(self) -> None:
        self._seen: dict[Identity, Mapping] = {}

    def is_new(self, obj: Mapping, identity: Identity) -> bool:
        """True for the first copy of an object, False for an identical later one."""
        seen = self._seen
        before = len(seen)
        previous = seen.setdefault(identity, obj)  # one lookup for the (usual) first copy
        if len(seen) != before:
            return True
        group, kind, namespace, name = identity
        scoped = kind not in CLUSTER_SCOPED
        if _canonical(_comparable(previous, scoped)) != _canonical(_comparable(obj, scoped)):
            first, second = sorted((previous, obj), key=_version_order)
            err = ShapeError.at(
                second, "", f"two different copies of one object ({kind} {group or 'core'}, "
                f"{'namespace ' + str(namespace) + ', ' if scoped else ''}name {name}; "
                f"apiVersions {first.get('apiVersion')} and {second.get('apiVersion')})",
            )
            err.other = first  # type: ignore[attr-defined]
            raise err
        return False


def _comparable(obj: Mapping, scoped: bool) -> Mapping:
    """`obj` as copies of one object are compared: whatever the version, and
    without a stray namespace on a cluster-scoped kind."""
    rest = {key: value for key, value in obj.items() if key != "apiVersion"}
    if not scoped and isinstance(rest.get("metadata"), dict):
        rest["metadata"] = {key: value for key, value in rest["metadata"].items() if key != "namespace"}
    return rest


def _canonical(value: object) -> tuple:
    """`value` as copies are compared: type by type. Python's `==` holds
    `1`, `1.0` and `true` equal, but the rules read them differently (a
    count of `true` or `1.0` is bad input, a budget of `true` counts as 0),
    so copies equal only under `==` would make the answer depend on which
    copy came first. NaN equals NaN here (the same text, the same copy)."""
    kind = type(value)
    if kind is dict:
        return ("map", tuple(sorted((_canonical(key), _canonical(item)) for key, item in value.items())))
    if kind is list:
        return ("list", tuple(_canonical(item) for item in value))
    if kind is int:  # hex: no digit limit, linear in size
        return ("int", format(value, "x"))
    return (kind.__name__, repr(value))


def _version_order(obj: Mapping) -> tuple:
    """A fixed order for two copies in a message, whatever the input order."""
    return (str(obj.get("apiVersion")), repr(sorted(map(str, obj.items()))))
