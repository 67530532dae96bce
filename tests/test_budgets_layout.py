"""The budget library's modules import each other in one direction only: no
import cycle, counting imports inside functions too (a cycle hidden in a
function still ties two concerns together and breaks on reordering)."""

from __future__ import annotations

import ast
from pathlib import Path

import cozyrender.budgets

PACKAGE = Path(cozyrender.budgets.__file__).parent


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith("cozyrender.budgets."):
                found.add(node.module.split(".")[2])
            elif node.level == 1 and node.module is None:
                found.update(alias.name for alias in node.names)
    return found


def test_no_import_cycle_in_the_budget_library():
    graph = {path.stem: _imports(path) - {path.stem} for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert graph["charges"] >= {"model"}  # the direction kept: charges reads declarations

    def cycle_from(start: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        for nxt in sorted(graph.get(start, ())):
            if nxt in seen:
                return seen[seen.index(nxt):] + (nxt,)
            found = cycle_from(nxt, seen + (nxt,))
            if found:
                return found
        return None

    cycles = {cycle for module in graph if (cycle := cycle_from(module, (module,)))}
    assert cycles == set()
