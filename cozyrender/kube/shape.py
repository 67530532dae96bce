"""Shape checks for objects read from YAML or JSON: the one place that says
"this field must be an object / a list / a string / a quantity".

Every reader of cluster objects (budgets, GPU classes, nodes, pods) reads
fields through these helpers, so a structurally wrong object is one
`ShapeError` naming the object (`Kind namespace/name`) and the field path,
never an AttributeError deep inside a rule, and never silently read as empty.
An absent field (or an explicit null) is empty, as the API server treats it.

Hand-written checks rather than a JSON schema: they run on hundreds of
thousands of objects, so the success path is one type test per field and
the message is only built on failure.

    spec = mapping(obj, "spec", obj)                       # {} when absent
    used = mapping(status, "used", quota, "status")        # names status.used
    for i, c in enumerate(sequence(spec, "containers", pod, "spec")): ...
    as_mapping(c, pod, f"spec.containers[{i}]")

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from cozyrender.kube.quantity import InvalidQuantity, parse_quantity

# Returned for an absent map: read-only, so no caller can fill a shared default.
EMPTY: Mapping = MappingProxyType({})
_NOTHING: tuple = ()


class ShapeError(ValueError):
    """An object the rules cannot read. str() is one line naming the object
    and the field; `obj` is the object (so a command can say which file holds
    it), `field` the (path, problem) pair when the error is about one field."""

    def __init__(self, message: str, obj: Mapping | None = None) -> None:
        super().__init__(message)
        self.obj = obj
        self.field: tuple[str, str] | None = None

    @classmethod
    def at(cls, obj: object, path: str, problem: str) -> ShapeError:
        """`Kind namespace/name: path problem`."""
        err = cls(f"{ref(obj)}: {path} {problem}" if path else f"{ref(obj)}: {problem}",
                  obj if isinstance(obj, Mapping) else None)
        err.field = (path, problem)
        return err

    def about(self, obj: Mapping) -> ShapeError:
        """The same field error, naming `obj` (for an error found on a copy or
        a projection of `obj`, whose paths are the same)."""
        return self if self.field is None else type(self).at(obj, *self.field)


def ref(obj: object) -> str:
    """`Kind namespace/name` (`Kind name` when cluster-scoped); never raises,
    whatever the object holds."""
    if not isinstance(obj, Mapping):
        return "object"
    kind = obj.get("kind")
    kind = kind if isinstance(kind, str) and kind else "object"
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return kind
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) and name else "<unnamed>"
    return f"{kind} {namespace}/{name}" if isinstance(namespace, str) and namespace else f"{kind} {name}"


def got(value: object) -> str:
    """A short spelling of a wrong value for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def join(at: str, key: object) -> str:
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else str(key)


def as_mapping(value: object, owner: Mapping, path: str) -> Mapping:
    """`value` when it is a map; EMPTY for None; ShapeError otherwise."""
    if isinstance(value, dict):
        return value
    if value is None:
        return EMPTY
    raise ShapeError.at(owner, path, f"is not an object (got {got(value)})")


def as_sequence(value: object, owner: Mapping, path: str) -> list | tuple:
    """`value` when it is a list; () for None; ShapeError otherwise."""
    if isinstance(value, (list, tuple)):
        return value
    if value is None:
        return _NOTHING
    raise ShapeError.at(owner, path, f"is not a list (got {got(value)})")


def as_string(value: object, owner: Mapping, path: str) -> str | None:
    """`value` when it is a string; None for None; ShapeError otherwise."""
    if isinstance(value, str) or value is None:
        return value
    raise ShapeError.at(owner, path, f"is not a string (got {got(value)})")


def mapping(parent: Mapping, key: str, owner: Mapping, at: str = "") -> Mapping:
    """`parent[key]` as a map (EMPTY when absent); the error names `at.key`."""
    value = parent.get(key)
    if isinstance(value, dict):  # the common case first: one test
        return value
    return as_mapping(value, owner, join(at, key))


def sequence(parent: Mapping, key: str, owner: Mapping, at: str = "") -> list | tuple:
    """`parent[key]` as a list (() when absent)."""
    value = parent.get(key)
    if isinstance(value, list):
        return value
    return as_sequence(value, owner, join(at, key))


def mappings(parent: Mapping, key: str, owner: Mapping, at: str = "") -> list | tuple:
    """`parent[key]` as a list whose every item is a map."""
    items = sequence(parent, key, owner, at)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ShapeError.at(owner, f"{join(at, key)}[{index}]", f"is not an object (got {got(item)})")
    return items


def string(parent: Mapping, key: str, owner: Mapping, at: str = "") -> str | None:
    """`parent[key]` as a string (None when absent)."""
    value = parent.get(key)
    if isinstance(value, str) or value is None:
        return value
    return as_string(value, owner, join(at, key))


def quantity(value: object, owner: Mapping, path: str) -> Fraction:
    """A Kubernetes quantity in a decoded object, read as the API server's
    JSON decoding reads it (surrounding white space trimmed, see
    `quantity.parse_quantity`); the error names the object and the field."""
    try:
        return parse_quantity(value)
    except InvalidQuantity:
        raise ShapeError.at(owner, path, f"is not a Kubernetes quantity (got {got(value)})") from None


def name_of(obj: Mapping) -> str:
    """`metadata.name`, required: a non-empty string."""
    name = string(mapping(obj, "metadata", obj), "name", obj, "metadata")
    if not name:
        raise ShapeError.at(obj, "metadata.name", "is missing")
    return name
