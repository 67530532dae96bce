"""Aligned columns for people: the one formatter behind every command's
`-o table` and `-o wide` (`check`, `catalog` and `tree`).

The rule: a table is a header row and one row per item, columns three spaces
apart as kubectl prints them, numbers right-aligned, no trailing spaces; the
columns marked `wide` appear only with `-o wide`, in their place among the
others, so `-o wide` is the same table with more columns, never extra lines.
A cell is one line: line breaks in a value are shown as spaces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # right-aligned (numbers)
    wide: bool = False   # only with -o wide


def render(columns: Sequence[Column], rows: Iterable[Sequence[object]], wide: bool = False) -> str:
    """The table of `rows` (one cell per column, in `columns`' order), with
    the wide columns when `wide`."""
    shown = [i for i, column in enumerate(columns) if wide or not column.wide]
    lines = [[columns[i].header for i in shown]]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells for {len(columns)} columns")
        lines.append([" ".join(str(row[i]).split()) if row[i] is not None else "" for i in shown])
    widths = [max(len(line[j]) for line in lines) for j in range(len(shown))]
    out = []
    for line in lines:
        cells = [cell.rjust(width) if columns[i].right else cell.ljust(width)
                 for cell, width, i in zip(line, widths, shown)]
        out.append("   ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[str] = ()) -> str:
    """`render` for plain headers (`right`: the right-aligned ones)."""
    aligned = set(right)
    return render([Column(header, right=header in aligned) for header in headers], rows)
