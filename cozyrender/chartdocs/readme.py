"""Model -> the `## Parameters` section of a chart's README.md: one table per
`@section` (Name, Description, Type, Value), struct fields as dotted rows,
rendered with a jinja2 template shipped in this package."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cozyrender.chartdocs.model import MISSING, Entry, Model, TypeRef

HEADING = "## Parameters"
COLUMNS = ("Name", "Description", "Type", "Value")


@dataclass(frozen=True)
class Row:
    name: str
    description: str
    type: str
    value: str

    def cells(self) -> tuple[str, str, str, str]:
        return (f"`{self.name}`", _escape(self.description), f"`{self.type}`",
                f"`{self.value}`")


def _escape(text: str) -> str:
    """A table cell stays one cell: pipes escaped, line breaks flattened."""
    return " ".join(text.split()).replace("|", "\\|")


def type_label(model: Model, ref: TypeRef) -> str:
    """The Type column. Rule: struct typedefs read as `object` and enums as their
    base type, so readers see the shape, not our internal names."""
    if ref.form != "name":
        assert ref.inner is not None
        prefix = {"pointer": "*", "list": "[]", "map": "map[string]"}[ref.form]
        return prefix + type_label(model, ref.inner)
    if ref.name in model.typedefs:
        return "object"
    if ref.name in model.enums:
        return model.enums[ref.name].base
    return ref.name


def _zero(model: Model, ref: TypeRef) -> Any:
    """What an unset key shows: the type's zero value (a pointer's is null)."""
    if ref.form == "pointer":
        return None
    if ref.form == "list":
        return []
    if ref.form == "map" or ref.name in model.typedefs or ref.name == "object":
        return {}
    if ref.name == "bool":
        return False
    if ref.name in ("int", "float", "number"):
        return 0
    if ref.name == "any":
        return None
    if ref.name in model.enums and model.enums[ref.name].base == "int":
        return 0
    return ""


def value_label(value: Any) -> str:
    """The Value column: strings bare (empty as `""`), everything else as JSON."""
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _rows(model: Model, entry: Entry, path: str, value: Any, out: list[Row]) -> None:
    struct = _struct(model, entry.type)
    shown = value if value is not MISSING else entry.comment_default
    if shown is MISSING and entry.type.form == "pointer":
        shown = None  # an unset pointer is null, struct or not
    elif shown is MISSING or struct is not None:
        shown = {} if struct is not None else _zero(model, entry.type)
    out.append(Row(path, entry.description, type_label(model, entry.type), value_label(shown)))
    if struct is not None:
        nested = value if isinstance(value, Mapping) else {}
        for f in model.typedefs[struct].fields:
            _rows(model, f, f"{path}.{f.name}", nested.get(f.name, MISSING), out)
        return
    element = _element_struct(model, entry.type)
    if element is not None:
        suffix, typedef = element
        for f in model.typedefs[typedef].fields:
            _rows(model, f, f"{path}{suffix}.{f.name}", MISSING, out)


def _struct(model: Model, ref: TypeRef) -> str | None:
    while ref.form == "pointer" and ref.inner is not None:
        ref = ref.inner
    return ref.name if ref.form == "name" and ref.name in model.typedefs else None


def _element_struct(model: Model, ref: TypeRef) -> tuple[str, str] | None:
    """For `[]Struct` and `map[string]Struct`: the row suffix and the struct."""
    while ref.form == "pointer" and ref.inner is not None:
        ref = ref.inner
    if ref.form in ("list", "map") and ref.inner is not None:
        inner = _struct(model, ref.inner)
        if inner is not None:
            return ("[i]" if ref.form == "list" else "[name]", inner)
    return None


def tables(model: Model) -> list[tuple[str, list[Row]]]:
    """[(section title, rows)] in file order."""
    out: list[tuple[str, list[Row]]] = []
    for section in model.sections():
        rows: list[Row] = []
        for param in (p for p in model.params if p.section == section):
            _rows(model, param, param.name, model.values.get(param.name, MISSING), rows)
        out.append((section, rows))
    return out


@functools.cache
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("cozyrender.chartdocs", "templates"),
                             autoescape=False, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("parameters.md.j2")


def render_section(model: Model) -> str:
    """The `## Parameters` section, heading included, ending in one newline.
    Columns are padded to their widest cell so the source reads as a table."""
    rendered = []
    for title, rows in tables(model):
        cells = [COLUMNS, *(row.cells() for row in rows)]
        widths = [max(_width(c[i]) for c in cells) for i in range(len(COLUMNS))]

        def pad(line: tuple[str, ...], widths: list[int] = widths) -> list[str]:
            return [cell + " " * (w - _width(cell)) for cell, w in zip(line, widths, strict=True)]

        rendered.append({"title": title, "header": pad(COLUMNS),
                         "rule": ["-" * w for w in widths],
                         "rows": [pad(line) for line in cells[1:]]})
    return _template().render(heading=HEADING, tables=rendered)


def _width(cell: str) -> int:
    """A cell's width as cozyvalues-gen counts it: UTF-8 bytes (so a line
    holding non-ASCII text is padded as Cozystack's READMEs are)."""
    return len(cell.encode("utf-8"))


def splice(readme: str, section: str, title: str) -> str:
    """README text with its `## Parameters` section replaced by `section`.
    Rule: the section runs from the heading to the next level-2 heading (or
    the end); a README without one gets it appended; a missing README is
    created with the chart's title."""
    if not readme:
        return f"# {title}\n\n{section}"
    lines = readme.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == HEADING), None)
    if start is None:
        return readme.rstrip("\n") + "\n\n" + section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + tail if tail else "")
