"""The model of a chart's `## @` values comments: sections, parameters, named
struct types (`@typedef`), named enums (`@enum`) and type expressions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class DocsError(Exception):
    """A values.yaml whose comments cannot be turned into a schema; one line,
    naming the file and line."""


class _Missing:
    """No value: the key is absent (distinct from an explicit null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

# Built-in type names. `any` is ours (no constraint): for platform keys a chart
# passes through without reading their type.
PRIMITIVES = ("string", "bool", "int", "float", "number", "quantity", "intOrString",
              "object", "any")


@dataclass(frozen=True)
class TypeRef:
    """A type expression: `name`, `*T` (pointer), `[]T` (list), `map[string]T`."""

    form: str  # "name" | "pointer" | "list" | "map"
    name: str = ""
    inner: TypeRef | None = None

    def __str__(self) -> str:
        if self.form == "name":
            return self.name
        prefix = {"pointer": "*", "list": "[]", "map": "map[string]"}[self.form]
        return f"{prefix}{self.inner}"


@dataclass
class Entry:
    """A `@param` (top-level key) or a `@field` (key of a struct typedef)."""

    name: str
    type: TypeRef
    optional: bool
    description: str
    line: int
    comment_default: Any = MISSING  # `name=literal` in the comment
    extensions: dict[str, Any] = field(default_factory=dict)  # @immutable, @x-...


@dataclass
class Param(Entry):
    section: str = ""


@dataclass
class Typedef:
    name: str
    description: str
    fields: list[Entry] = field(default_factory=list)


@dataclass
class Enum:
    name: str
    base: str
    description: str
    values: list[Any] = field(default_factory=list)


@dataclass
class Model:
    params: list[Param] = field(default_factory=list)
    typedefs: dict[str, Typedef] = field(default_factory=dict)
    enums: dict[str, Enum] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # values.yaml, parsed

    def sections(self) -> list[str]:
        """Section titles in first-use order."""
        seen: list[str] = []
        for param in self.params:
            if param.section not in seen:
                seen.append(param.section)
        return seen
