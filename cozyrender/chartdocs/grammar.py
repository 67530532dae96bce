"""Parse the `## @` comments of a values.yaml into a `Model`.

The grammar is the one Cozystack's charts use (cozyvalues-gen), one tag per
line:

    ## @section Title
    ## @param {type} name - description        (`[name]`: optional; `name=lit`: default)
    ## @typedef {struct} Name - description    followed by its `## @field` lines
    ## @field {type} name - description        (`[name]`: optional inside the struct)
    ## @enum {string} Name - description       followed by its `## @value v [- text]` lines
    ## @immutable                              on the entry above: may not change
    ## @x-something {flow yaml}                on the entry above: a schema extension
    ## @skip ...                               ignored

Other comment lines are ignored. Every top-level key of the values must have a
`@param`. Errors name the file (and the line where there is one).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from cozyrender.chartdocs.model import (
    MISSING,
    PRIMITIVES,
    DocsError,
    Entry,
    Enum,
    Model,
    Param,
    Typedef,
    TypeRef,
)
from cozyrender.yamlio import SafeLoader, yaml_problem

_TAG = re.compile(r"^\s*##\s*@(?P<tag>[A-Za-z][\w-]*)\s*(?P<rest>.*?)\s*$")
_ENTRY = re.compile(r"^\{(?P<type>[^{}]+)\}\s+(?P<name>\[[^\]\s]+\]|[^\s=\[\]]+)"
                    r"(?:=(?P<default>\"[^\"]*\"|'[^']*'|\S+))?"
                    r"(?:\s+-\s*(?P<desc>.*)|\s*)$")
_NAMED = re.compile(r"^\{(?P<base>[^{}]+)\}\s+(?P<name>[A-Za-z_][\w]*)(?:\s+-\s*(?P<desc>.*)|\s*)$")
_IDENT = re.compile(r"^[A-Za-z_][\w]*$")
_MAP = re.compile(r"^map\[string\](?P<inner>.+)$")
_TYPEDEF_KINDS = ("struct",)
_ENUM_BASES = ("string", "int")


def parse_type(text: str) -> TypeRef:
    """A type expression; raises ValueError for one that is not well formed.
    Rule: `*T`, `[]T`, `map[string]T` nest freely around a type name."""
    text = text.strip()
    if text.startswith("*"):
        return TypeRef("pointer", inner=parse_type(text[1:]))
    if text.startswith("[]"):
        return TypeRef("list", inner=parse_type(text[2:]))
    match = _MAP.match(text)
    if match:
        return TypeRef("map", inner=parse_type(match["inner"]))
    if _IDENT.match(text):
        return TypeRef("name", name=text)
    raise ValueError(f"bad type {text!r}")


def _scalar(text: str) -> Any:
    try:
        return yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as err:
        raise ValueError(f"bad literal {text!r}: {yaml_problem(err)}") from None


def parse(text: str, values_text: str | None = None, source: str = "values.yaml") -> Model:
    """The model of a values.yaml: its comments, and its values (parsed from
    `values_text`, or from `text` itself when None)."""
    model = Model()
    section = ""
    typedef: Typedef | None = None
    enum: Enum | None = None
    last: Entry | None = None

    def fail(lineno: int, message: str) -> DocsError:
        return DocsError(f"{source}:{lineno}: {message}")

    for lineno, line in enumerate(text.splitlines(), 1):
        match = _TAG.match(line)
        if not match:
            continue
        tag, rest = match["tag"], match["rest"]
        try:
            if tag == "section":
                section, typedef, enum, last = rest, None, None, None
            elif tag in ("param", "field"):
                entry = _entry(rest, lineno)
                if tag == "param":
                    typedef = enum = None
                    param = Param(**vars(entry), section=section)
                    if any(p.name == param.name for p in model.params):
                        raise fail(lineno, f"@param {param.name} is declared twice")
                    model.params.append(param)
                    last = param
                else:
                    if typedef is None:
                        raise fail(lineno, "@field outside a @typedef")
                    if any(f.name == entry.name for f in typedef.fields):
                        raise fail(lineno, f"@field {entry.name} is declared twice in "
                                           f"{typedef.name}")
                    typedef.fields.append(entry)
                    last = entry
            elif tag == "typedef":
                named = _NAMED.match(rest)
                if not named or named["base"].strip() not in _TYPEDEF_KINDS:
                    raise fail(lineno, f"@typedef wants '{{struct}} Name - description', "
                                       f"got {rest!r}")
                typedef = Typedef(named["name"], named["desc"] or "")
                enum, last = None, None
                _declare(model, typedef.name, lineno, fail)
                model.typedefs[typedef.name] = typedef
            elif tag == "enum":
                named = _NAMED.match(rest)
                if not named or named["base"].strip() not in _ENUM_BASES:
                    raise fail(lineno, f"@enum wants '{{string}} Name - description' (or "
                                       f"{{int}}), got {rest!r}")
                enum = Enum(named["name"], named["base"].strip(), named["desc"] or "")
                typedef, last = None, None
                _declare(model, enum.name, lineno, fail)
                model.enums[enum.name] = enum
            elif tag == "value":
                if enum is None:
                    raise fail(lineno, "@value outside an @enum")
                if not rest:
                    raise fail(lineno, "@value without a value")
                value = re.split(r"\s+-\s", rest, maxsplit=1)[0].strip()  # `v - description`
                enum.values.append(int(value) if enum.base == "int" else value)
            elif tag == "immutable":
                if last is None:
                    raise fail(lineno, "@immutable does not follow a @param or @field")
                last.extensions["x-kubernetes-validations"] = [
                    {"rule": "self == oldSelf", "message": f"{last.name} is immutable"}]
            elif tag.startswith("x-"):
                if last is None:
                    raise fail(lineno, f"@{tag} does not follow a @param or @field")
                last.extensions[tag] = _scalar(rest) if rest else True
            elif tag in ("skip", "extra"):
                pass
            else:
                raise fail(lineno, f"unknown tag @{tag}")
        except ValueError as err:
            raise fail(lineno, str(err)) from None

    _resolve(model, source)
    try:
        loaded = yaml.load(text if values_text is None else values_text, Loader=SafeLoader)
    except yaml.YAMLError as err:
        raise DocsError(f"{source}: invalid YAML: {yaml_problem(err)}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise DocsError(f"{source}: values must be a mapping")
    odd = [k for k in loaded if not isinstance(k, str)]
    if odd:
        raise DocsError(f"{source}: top-level key {odd[0]!r} is not a string "
                        f"(YAML reads an unquoted no/yes/on/off/null or number so); quote it")
    undocumented = [k for k in loaded if k not in {p.name for p in model.params}]
    if undocumented:
        # Rule: every top-level value is documented, so the schema and README
        # cannot silently miss a key the chart reads (Cozystack's apps all do this).
        raise DocsError(f"{source}: values without a ## @param comment: "
                        f"{', '.join(sorted(undocumented))}")
    model.values = loaded
    return model


def _entry(rest: str, lineno: int) -> Entry:
    match = _ENTRY.match(rest)
    if not match:
        raise ValueError(f"wants '{{type}} name - description', got {rest!r}")
    name = match["name"]
    optional = name.startswith("[")
    if optional:
        name = name[1:-1]
    default = MISSING if match["default"] is None else _scalar(match["default"])
    return Entry(name=name, type=parse_type(match["type"]), optional=optional,
                 description=(match["desc"] or "").strip(), line=lineno,
                 comment_default=default)


def _declare(model: Model, name: str, lineno: int, fail: Any) -> None:
    if name in PRIMITIVES:
        raise fail(lineno, f"{name} is a built-in type and cannot be redeclared")
    if name in model.typedefs or name in model.enums:
        raise fail(lineno, f"type {name} is declared twice")


def _resolve(model: Model, source: str) -> None:
    """Every type name is known, and no struct contains itself (a schema for
    it would be infinite)."""

    def names(ref: TypeRef) -> str:
        while ref.inner is not None:
            ref = ref.inner
        return ref.name

    def check(entry: Entry) -> None:
        name = names(entry.type)
        if name not in PRIMITIVES and name not in model.typedefs and name not in model.enums:
            raise DocsError(f"{source}:{entry.line}: unknown type {name!r} for {entry.name}")

    for param in model.params:
        check(param)
    for typedef in model.typedefs.values():
        for f in typedef.fields:
            check(f)

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise DocsError(f"{source}: type {name} contains itself "
                            f"({' -> '.join((*path, name))})")
        typedef = model.typedefs.get(name)
        if typedef is None:
            return
        for f in typedef.fields:
            visit(names(f.type), (*path, name))

    for name in model.typedefs:
        visit(name, ())
