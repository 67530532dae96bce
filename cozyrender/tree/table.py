"""The pool tree as a table: `cozyrender tree -o table|wide`, the columns
`check` and `catalog` print (`cozyrender.columns`), for people who
sort, grep or paste rows rather than read a drawing.

The rule: one row per key a tenant declares, in the tree's order (pre-order,
children by name), and one row for a tenant declaring none, so every tenant
shown in the tree is a row. The figures are the tree's (`cozyrender.tree.model`),
written as `-o tree` and the JSON write them. STATUS is `OVER by N` for an
over-committed key (`(unusable value)` added when the declared value is one
no quota can hold, counted as 0), `full` when nothing is left, else `ok`.
`-o wide` adds, in their place: how many workloads reserve (or namespaces
use) under the key, what the tenant is charged towards the pool root above
it for the key, the hierarchical rule's limit above it (the least any
ancestor leaves for a class the key covers), and its vGPU entitlement.
"""

from __future__ import annotations

from cozyrender.columns import Column, render

from .model import GPU, KeyRow, Node, Tree

COLUMNS = (
    Column("NAMESPACE"), Column("TENANT"), Column("KEY"),
    Column("BUDGET", right=True), Column("USED", right=True), Column("CARVED OUT", right=True),
    Column("LEFT", right=True), Column("STATUS"),
    Column("HOLDERS", right=True, wide=True), Column("CHARGED TO", wide=True),
    Column("LIMIT ABOVE", wide=True), Column("VGPU", wide=True),
)


def render_table(tree: Tree, wide: bool = False) -> str:
    """The table of `tree` (the rows `table_rows` gives)."""
    return render(COLUMNS, table_rows(tree), wide=wide)


def table_rows(tree: Tree) -> list[tuple[str, ...]]:
    """One row of COLUMNS' cells per key of every tenant shown, or one for a
    tenant declaring none."""
    rows: list[tuple[str, ...]] = []
    for node in tree.shown():
        tenant = f"{node.created_in}/{node.tenant}" if node.tenant is not None else "-"
        vgpu = "entitled" if node.vgpu.entitled else "not entitled"
        if not node.keys:
            rows.append((node.namespace, tenant, "-", "-", "-", "-", "-", "-", "-", "-", "-", vgpu))
        for row in node.keys:
            figures = [row.amount(value) for value in (row.budget, row.used, row.carved_out, row.left)]
            rows.append((node.namespace, tenant, row.key, *figures, _status(row),
                         str(len(row.reservations) if row.type == GPU else len(row.usage)),
                         _charged(node, row), _limit_above(node, row), vgpu))
    return rows


def _status(row: KeyRow) -> str:
    over = f"OVER by {row.amount(-row.left)}" if row.over_committed else ""
    if row.unusable:  # a value no quota can hold counts as 0 (the audit says why)
        return f"{over} (unusable value)" if over else "unusable value"
    return over or ("full" if row.left == 0 else "ok")


def _charged(node: Node, row: KeyRow) -> str:
    """What `node` is charged towards the pool root above for `row`'s key
    (`4 to tenant-acme`), or `-`."""
    charges = [charge for charge in node.charges if charge.type == row.type and charge.key == row.key]
    return ", ".join(f"{row.amount(charge.charge)} to {charge.root}" for charge in charges) or "-"


def _limit_above(node: Node, row: KeyRow) -> str:
    """The least the hierarchical rule leaves above `node` for a class `row`
    covers (`4 at tenant-acme`), or `-` (an ordinary key, or no limit above)."""
    limits = [limit for limit in node.limits_above if row.covers(limit.gpu_class)]
    if not limits:
        return "-"
    least = min(limits, key=lambda limit: limit.left)
    return f"{least.left} at {least.root}"
