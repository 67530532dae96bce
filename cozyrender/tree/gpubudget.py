"""A tenant namespace's GPUBudget (`cozystack.io/v1alpha1`, namespaced,
one per tenant namespace, named `gpu-budget`): what a tenant's users may
read of their own budget without any cluster-wide read.

Rules:
- `status.keys[]` is the tree's rows of the namespace (`cozyrender tree -o
  json`'s `tenants[].keys[]`), each cut to `type`, `key`, `budget`,
  `carvedOut`, `used`, `left` and `overCommitted`, with the same values:
  GPU figures whole numbers of devices, ordinary figures quantity strings
  (`jsonout.row_data`, never recomputed here); `status.tenant` and
  `status.budgetPool` are the node's `tenant` and `budgetPool`;
- `status.summary` holds the same figures comma-joined in the keys' order
  (`key`, `budget`, `carvedOut`, `used`, `left`), for the printer columns:
  the API server prints only the first value a column's JSONPath finds
  (apiextensions-apiserver's tableconvertor), so `.status.keys[*].used`
  would show the first key alone;
- `status.conditions` holds `Ready`: True (`Computed`) with the figures;
  False (`Unreadable`) with no keys when an object the rules cannot read
  bears on them (the message names it); False (`TreeError`) with no keys
  when no tree can be computed at all (the message says why). A condition
  whose status did not change keeps its lastTransitionTime, so an
  unchanged namespace yields an identical status and nothing is written;
- `desired(...)` is the status of every tenant namespace of the tree.

Pure: no I/O, no clock (the caller passes `now`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cozyrender.gpuclass.status import _condition
from cozyrender.tree.jsonout import row_data
from cozyrender.tree.model import Node, Tree

GROUP, VERSION, KIND, PLURAL = "cozystack.io", "v1alpha1", "GPUBudget", "gpubudgets"
NAME = "gpu-budget"
MANAGED_BY = "cozyrender-controller"  # its app.kubernetes.io/managed-by label
READY = "Ready"
KEY_FIELDS = ("type", "key", "budget", "carvedOut", "used", "left", "overCommitted")
SUMMARY_FIELDS = ("key", "budget", "carvedOut", "used", "left")


def key_status(row) -> dict:
    """One row of `status.keys[]`: the tree's JSON row, cut to KEY_FIELDS."""
    data = row_data(row)
    return {name: data[name] for name in KEY_FIELDS}


def summary(keys: list[dict]) -> dict:
    """`status.summary`: each of SUMMARY_FIELDS of `keys`, comma-joined in order."""
    return {name: ",".join(str(row[name]) for row in keys) for name in SUMMARY_FIELDS}


def _generation(current: Mapping | None) -> int:
    """The stored GPUBudget's generation; 1 for one not created yet (the API
    server starts at 1, and a GPUBudget has no spec to move it)."""
    return ((current or {}).get("metadata") or {}).get("generation") or 1


def node_status(node: Node, problem: str | None, now: str, current: Mapping | None = None) -> dict:
    """The status of `node`'s GPUBudget; `problem` (why its figures cannot be
    computed) leaves the keys out; `current` is the GPUBudget as stored."""
    generation = _generation(current)
    previous = (current or {}).get("status")
    status: dict = {"tenant": node.tenant, "budgetPool": node.budget_pool}
    if problem is not None:
        status["keys"] = []
        status["summary"] = summary([])
        status["conditions"] = [_condition(READY, False, "Unreadable", problem, generation, now, previous)]
        return status
    status["keys"] = [key_status(row) for row in node.keys]
    status["summary"] = summary(status["keys"])
    declared = f"{len(node.keys)} budget key(s) declared" if node.keys else "no budget key declared here"
    pool = f"; its workloads count in the pool of {node.budget_pool}" if node.budget_pool else ""
    status["conditions"] = [_condition(READY, True, "Computed", f"{declared}{pool}", generation, now, previous)]
    return status


def error_status(error: str, now: str, current: Mapping | None = None) -> dict:
    """The status when no tree can be computed: no keys, Ready False naming why."""
    previous = (current or {}).get("status") or {}
    return {"tenant": previous.get("tenant"), "budgetPool": previous.get("budgetPool"), "keys": [],
            "summary": summary([]),
            "conditions": [_condition(READY, False, "TreeError", f"no pool tree can be computed: {error}",
                                      _generation(current), now, previous)]}


def desired(tree: Tree, problem: Callable[[str], str | None], now: str,
            current: Callable[[str], Mapping | None]) -> dict[str, dict]:
    """namespace -> the status of its GPUBudget, for every namespace of `tree`;
    `current(namespace)` is its stored GPUBudget (or None)."""
    return {node.namespace: node_status(node, problem(node.namespace), now, current(node.namespace))
            for node in tree.shown()}


def changed(stored: Mapping | None, status: Mapping) -> bool:
    """Whether writing `status` to the GPUBudget `stored` changes anything
    (a missing GPUBudget always does)."""
    return stored is None or dict(stored.get("status") or {}) != dict(status)


def new_object(namespace: str) -> dict:
    """The GPUBudget created in `namespace` (its status is written next)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": NAME, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}}}


__all__ = ["GROUP", "KEY_FIELDS", "KIND", "MANAGED_BY", "NAME", "PLURAL", "READY", "SUMMARY_FIELDS", "VERSION",
           "changed", "desired", "error_status", "key_status", "new_object", "node_status", "summary"]
