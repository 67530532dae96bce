"""Node eligibility and toleration matching, by Kubernetes' rules.

A node takes new pods of a workload while it is Ready, not cordoned, and
carries no NoSchedule or NoExecute taint the workload does not tolerate
(PreferNoSchedule only steers the scheduler). The taints node lifecycle sets
for a cordon or a node that is not Ready (`unschedulable`, `not-ready`,
`unreachable`) are left to the Ready and cordon tests, so a workload that
tolerates them still does not count such a node.

Toleration matching is Kubernetes' own (`v1.Toleration.ToleratesTaint`):
an empty effect matches every effect; an empty key with `Exists` matches
every key; `Exists` ignores the value; `Equal` (or no operator) compares it.
`tolerationSeconds` only delays an eviction, so it plays no part here. The
`Gt`/`Lt` operators of Kubernetes 1.35 sit behind the alpha feature gate
TaintTolerationComparisonOperators (off by default); with it off, which is
what cozyrender models, such a toleration tolerates nothing. Checked against
k8s.io/api's TestTolerationToleratesTaint and component-helpers'
TestFindMatchingUntoleratedTaint (tests/data/k8s/).

Node fields are read through `cozyrender.kube.shape` (a malformed node is a
ShapeError naming it and the field); tolerations are checked where they are
read (`cozyrender.gpuclass.classes.tolerations`).

Pure functions over node, taint and toleration dicts, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cozyrender.kube.shape import ShapeError, got, mapping, mappings, name_of, string

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
LIFECYCLE_TAINTS = frozenset({
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
})


def tolerates(toleration: Mapping, taint: Mapping) -> bool:
    """Whether one toleration tolerates one taint."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        # As in Kubernetes, an empty key with Equal compares only the value
        # (API validation refuses such a toleration; matching does not care).
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerated(taint: Mapping, tolerations: Iterable[Mapping]) -> bool:
    return any(tolerates(toleration, taint) for toleration in tolerations)


def is_ready(node: Mapping) -> bool:
    """The Ready condition is True."""
    conditions = mappings(mapping(node, "status", node), "conditions", node, "status")
    for index, condition in enumerate(conditions):
        at = f"status.conditions[{index}]"
        if string(condition, "type", node, at) == "Ready":
            return string(condition, "status", node, at) == "True"
    return False


def is_cordoned(node: Mapping) -> bool:
    value = mapping(node, "spec", node).get("unschedulable")
    if value is None or isinstance(value, bool):
        return bool(value)
    # "false" as a string would read as cordoned: refuse rather than guess.
    raise ShapeError.at(node, "spec.unschedulable", f"is not a boolean (got {got(value)})")


def taints(node: Mapping) -> list[Mapping]:
    """`spec.taints`, each a map with string key, value and effect."""
    found = mappings(mapping(node, "spec", node), "taints", node, "spec")
    for index, taint in enumerate(found):
        for key in ("key", "value", "effect"):
            string(taint, key, node, f"spec.taints[{index}]")
    return list(found)


def untolerated_taints(node: Mapping, tolerations: Iterable[Mapping]) -> list[Mapping]:
    """The node's NoSchedule/NoExecute taints, lifecycle taints aside, that no
    toleration tolerates."""
    tolerations = list(tolerations)
    return [
        taint
        for taint in taints(node)
        if taint.get("effect") in BLOCKING_EFFECTS
        and taint.get("key") not in LIFECYCLE_TAINTS
        and not tolerated(taint, tolerations)
    ]


def is_eligible(node: Mapping, tolerations: Iterable[Mapping]) -> bool:
    """Whether a workload with `tolerations` can be placed on the node now."""
    return is_ready(node) and not is_cordoned(node) and not untolerated_taints(node, tolerations)


def node_name(node: Mapping) -> str:
    """`metadata.name`, required (pods are bound to nodes by name)."""
    return name_of(node)
