"""The pool tree as one self-contained HTML page (`templates/pool-tree.html`):
inline CSS, SVG and JavaScript, no network. The page draws the tree as an
icicle of nested boxes, each box's width among its siblings sized by the
tenant's GPU budget (its all-classes budget, or the sum of its class
budgets, at least what its subtree's boxes need), with a usage bar per key
(reserved or used, each carve-out, what is left; over-commits in red),
hover details and a search box. Deep levels are drawn when zoomed into, so
a state of ten thousand tenants stays a page of a few megabytes that opens
at once.

The rule: the page shows the figures of the tree model in the same words
and spelling as the JSON (`jsonout`) and the terminal (`text`): numbers as
strings from `KeyRow.amount`, sentences from `text`'s details; floats are
used only to size boxes and bar segments.

Pure: returns the page's text.
"""

from __future__ import annotations

import json
from fractions import Fraction
from importlib import resources
from typing import Any

from cozyrender.budgets.audit import ERROR
from cozyrender.budgets.charges import ALL_CLASSES

from .jsonout import SCHEMA_VERSION, header_data
from .model import GPU, KeyRow, Node, Tree
from .text import node_details, row_details

MAX_SEGMENTS = 12  # carve-out segments drawn per bar; the rest are one "others" segment

# bits of a node's `f`
BUDGET_ROOT, ORDINARY_ROOT, GPU_ONLY, OVER, TENANT, WARNING, ERRORED = 1, 2, 4, 8, 16, 32, 64


def render_html(tree: Tree, tenant_filter: str | None = None) -> str:
    template = resources.files("cozyrender.tree").joinpath("templates/pool-tree.html").read_text("utf-8")
    data = page_data(tree, tenant_filter)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    # Inside <script>: no '</script>' or '<!--' can end or confuse the element.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return template.replace("__TREE_DATA__", text)


def page_data(tree: Tree, tenant_filter: str | None = None) -> dict[str, Any]:
    nodes = list(tree.shown())
    index = {node.namespace: i for i, node in enumerate(nodes)}
    weights = _weights(tree, nodes)
    return {
        "schemaVersion": SCHEMA_VERSION,
        **header_data(tree, tenant_filter),
        "n": [_node(tree, node, index, weights[node.namespace]) for node in nodes],
    }


def _weights(tree: Tree, nodes: list[Node]) -> dict[str, float]:
    """Box sizes: a tenant's GPU budget (its all-classes budget, else the sum
    of its class budgets), at least the sum of its children's sizes and what
    its namespace reserves; 1 for a tenant with none of these."""
    weights: dict[str, float] = {}
    for node in reversed(nodes):  # pre-order reversed: children first
        gpu_rows = [row for row in node.keys if row.type == GPU]
        all_classes = [row for row in gpu_rows if row.key == ALL_CLASSES.key]
        own = float(all_classes[0].budget) if all_classes else float(sum(row.budget for row in gpu_rows))
        children = sum(weights[child] for child in node.children if child in weights)
        weights[node.namespace] = max(own, children, float(sum(node.reserved.values())), 1.0)
    return weights


def _number(value) -> float:
    return float(Fraction(value))


def _row(row: KeyRow) -> dict[str, Any]:
    carves = sorted(row.carve_outs, key=lambda c: (-Fraction(c.charge), c.namespace))
    shown = carves[:MAX_SEGMENTS]
    rest = carves[MAX_SEGMENTS:]
    data: dict[str, Any] = {
        "t": row.type,
        "k": row.key,
        "b": row.amount(row.budget),
        "u": row.amount(row.used),
        "c": row.amount(row.carved_out),
        "l": row.amount(row.left),
        "bn": _number(row.budget),
        "un": _number(row.used),
        "cn": _number(row.carved_out),
        "o": 1 if row.over_committed else 0,
        "s": [[c.tenant, c.namespace, row.amount(c.charge), _number(c.charge)] for c in shown],
        "d": [text for text, _ in row_details(row)],
    }
    if rest:
        data["so"] = [len(rest), _number(sum(Fraction(c.charge) for c in rest))]
    return data


def _node(tree: Tree, node: Node, index: dict[str, int], weight: float) -> dict[str, Any]:
    flags = 0
    flags |= BUDGET_ROOT if node.budget_root else 0
    flags |= ORDINARY_ROOT if node.ordinary_root else 0
    flags |= GPU_ONLY if node.gpu_only else 0
    flags |= OVER if node.over_committed else 0
    flags |= TENANT if node.tenant is not None else 0
    if any(f.severity == ERROR for f in node.findings):
        flags |= ERRORED
    elif node.findings:
        flags |= WARNING
    return {
        "ns": node.namespace,
        "name": node.label,
        "p": index.get(node.parent or "", -1),
        "dp": node.depth,
        "ch": [index[child] for child in node.children if child in index],
        "f": flags,
        "w": round(weight, 3),
        "rows": [_row(row) for row in node.keys],
        "notes": [[text, " ".join(styles)] for text, styles in node_details(tree, node)],
    }


__all__ = ["page_data", "render_html"]
