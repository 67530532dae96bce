"""The pool tree as JSON: a stable, documented schema (docs/guides/pool-tree.md)
with a version field, `schemaVersion`. A new field may be added within a
version; renaming, removing or changing the meaning of one takes a new
version.

The rule: figures as the tree model holds them. GPU figures are whole
numbers of devices (JSON numbers); ordinary figures are Kubernetes
quantities as strings (`"128Gi"`, `"500m"`), exact, as the audit's
messages write them. `tenants` is the tree in pre-order (children by
name), one object per namespace, each naming its `parent` and `children`.

Pure: returns plain data for `json.dumps`.
"""

from __future__ import annotations

from typing import Any

from cozyrender.budgets.audit import ERROR

from .model import GPU, KeyRow, Node, Tree

SCHEMA_VERSION = 1


def tree_data(tree: Tree, tenant_filter: str | None = None) -> dict[str, Any]:
    data = header_data(tree, tenant_filter)
    data["tenants"] = [node_data(node) for node in tree.shown()]
    data["findings"] = data.pop("findings")  # after the tenants, as documented
    return data


def header_data(tree: Tree, tenant_filter: str | None = None) -> dict[str, Any]:
    """Everything but `tenants`."""
    nodes = list(tree.shown())
    findings = [f for n in nodes for f in n.findings] + list(tree.findings)
    errors = sum(1 for f in findings if f.severity == ERROR)
    return {
        "schemaVersion": SCHEMA_VERSION,
        "root": tree.root,
        "platformVgpu": {"entitled": tree.platform_vgpu, "source": tree.platform_source},
        "gpuBudgetsNest": tree.gpu_budgets_nest,
        "filters": {"tenant": tenant_filter, "class": tree.gpu_class, "depth": tree.depth, "hidden": tree.hidden},
        "summary": {
            "namespaces": len(nodes),
            "poolRoots": sum(1 for n in nodes if n.budget_root or n.ordinary_root),
            "overCommitted": sum(1 for n in nodes for row in n.keys if row.over_committed),
            "errors": errors,
            "warnings": len(findings) - errors,
        },
        "findings": [finding.as_dict() for finding in tree.findings],
    }


def node_data(node: Node) -> dict[str, Any]:
    return {
        "namespace": node.namespace,
        "tenant": node.tenant,
        "createdIn": node.created_in,
        "parent": node.parent,
        "depth": node.depth,
        "children": list(node.children),
        "budgetPoolRoot": node.budget_root,
        "ordinaryPoolRoot": node.ordinary_root,
        "gpuOnly": node.gpu_only,
        "budgetPool": node.budget_pool,
        "ordinaryPool": node.ordinary_pool,
        "carvesFrom": node.carves_from,
        "ordinaryCarvesFrom": node.ordinary_carves_from,
        "chargedTo": [
            {"type": c.type, "pool": c.root, "key": c.key, "quotaKey": c.quota_key,
             "charge": _amount(c.type, c.quota_key, c.charge), "declared": _amount(c.type, c.quota_key, c.declared)}
            for c in node.charges
        ],
        "keys": [row_data(row) for row in node.keys],
        "reserved": dict(node.reserved),
        "workloads": [{"kind": w.kind, "name": w.name, "classes": dict(w.classes)} for w in node.workloads],
        "vgpu": {"requested": node.vgpu.requested, "entitled": node.vgpu.entitled,
                 "brokenBy": node.vgpu.broken_by, "label": node.vgpu.label},
        "findings": [finding.as_dict() for finding in node.findings],
        "limitsAbove": [{"class": limit.gpu_class, "pool": limit.root, "key": limit.key, "left": limit.left}
                        for limit in node.limits_above],
    }


def row_data(row: KeyRow) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": row.type,
        "key": row.key,
        "quotaKey": row.quota_key,
        "budget": _row_amount(row, row.budget),
        "used": _row_amount(row, row.used),
        "carvedOut": _row_amount(row, row.carved_out),
        "left": _row_amount(row, row.left),
        "overCommitted": row.over_committed,
        "causes": list(row.causes),
        "unusable": row.unusable,
        "carveOuts": [
            {"namespace": c.namespace, "tenant": c.tenant, "charge": _row_amount(row, c.charge),
             "declared": _row_amount(row, c.declared)}
            for c in row.carve_outs
        ],
    }
    if row.type == GPU:
        data["reservations"] = [
            {"kind": r.kind, "namespace": r.namespace, "name": r.name, "devices": r.devices, "classes": dict(r.classes)}
            for r in row.reservations
        ]
    else:
        data["usage"] = [{"namespace": u.namespace, "used": row.amount(u.used)} for u in row.usage]
    return data


def _row_amount(row: KeyRow, value) -> int | str:
    return int(value) if row.type == GPU else row.amount(value)


def _amount(kind: str, quota_key: str, value) -> int | str:
    if kind == GPU:
        return int(value)
    from fractions import Fraction

    from cozyrender.budgets.usage import format_amount

    return format_amount(quota_key, Fraction(value))


__all__ = ["SCHEMA_VERSION", "header_data", "node_data", "row_data", "tree_data"]
