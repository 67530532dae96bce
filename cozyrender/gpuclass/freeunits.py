"""Free units of a GPU class, from Node allocatable and pod requests alone.

A class's nodes are the nodes whose `status.allocatable` lists its resource
name (a class has no node selector). On one node,

    free = allocatable[resource] - effective requests of the node's
           non-terminated pods for it          (never below zero)

with Kubernetes' effective-request rule (`cozyrender.kube.pods`). A node
counts for a class only while it is eligible for the class's tolerations
(`cozyrender.kube.nodes.is_eligible`); an ineligible node adds nothing.

`requests_by_node` reads every pod once for all the resource names at hand,
so a catalog of many classes costs one pass over the pods, not one per class.
A malformed node or pod is a ShapeError naming it and the field
(`cozyrender.kube.shape`), never skipped. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from cozyrender.gpuclass.classes import class_name, resource_name, tolerations
from cozyrender.kube.nodes import is_eligible, node_name
from cozyrender.kube.pods import effective_pod_resources, is_terminated
from cozyrender.kube.shape import ShapeError, mapping, quantity, string

ZERO = Fraction(0)

# node name -> resource name -> effective requests of its non-terminated pods
NodeRequests = dict[str, dict[str, Fraction]]


def advertised(node: Mapping) -> Mapping:
    """The node's `status.allocatable` map."""
    return mapping(mapping(node, "status", node), "allocatable", node, "status")


def allocatable(node: Mapping, resource: str) -> Fraction | None:
    """The node's allocatable units of `resource`; None when it does not
    advertise it; a ShapeError when it advertises something not a quantity."""
    raw = advertised(node).get(resource)
    if raw is None:
        return None
    return quantity(raw, node, f"status.allocatable.{resource}")


def _mentions_any(spec: Mapping, resources: frozenset[str]) -> bool | None:
    """Cheap test before the full effective-request computation: does any
    container, init container or the overhead name one of `resources`?
    None when the pod is not shaped as a pod (the full reading names the
    field)."""
    overhead = spec.get("overhead")
    if overhead is not None and not isinstance(overhead, dict):
        return None
    # Scan to the end even after a hit: the projection reads every container.
    found = bool(overhead) and not resources.isdisjoint(overhead)
    for group in ("containers", "initContainers"):
        containers = spec.get(group)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return None
        for container in containers:
            if not isinstance(container, dict):
                return None
            figures = container.get("resources")
            if figures is None:
                continue
            if not isinstance(figures, dict):
                return None
            for side in ("requests", "limits"):
                listed = figures.get(side)
                if listed is None:
                    continue
                if not isinstance(listed, dict):
                    return None
                if not found and not resources.isdisjoint(listed):
                    found = True
    return found


def _only(figures: Mapping | None, wanted: frozenset[str]) -> dict:
    return {name: value for name, value in (figures or {}).items() if name in wanted}


def _projected(pod: Mapping, wanted: frozenset[str]) -> dict:
    """The pod with only the `wanted` resources left in its figures, so the
    effective-request rule (kube.pods, the single implementation) parses no
    cpu or memory it would throw away: that parsing is most of a catalog's cost."""
    spec = pod.get("spec") or {}

    def container(c: Mapping) -> dict:
        figures = c.get("resources") or {}
        return {
            "restartPolicy": c.get("restartPolicy"),
            "resources": {"requests": _only(figures.get("requests"), wanted),
                          "limits": _only(figures.get("limits"), wanted)},
        }

    return {"spec": {
        "containers": [container(c) for c in spec.get("containers") or ()],
        "initContainers": [container(c) for c in spec.get("initContainers") or ()],
        "overhead": _only(spec.get("overhead"), wanted),
    }}


def requests_by_node(pods: Iterable[Mapping], resources: Iterable[str]) -> NodeRequests:
    """Effective requests for `resources` of the non-terminated pods bound to
    each node (pods not bound to a node hold nothing anywhere yet)."""
    wanted = frozenset(resources)
    totals: NodeRequests = {}
    for pod in pods:
        spec = mapping(pod, "spec", pod)
        node = string(spec, "nodeName", pod, "spec")
        if not node or is_terminated(pod):
            continue
        mentions = _mentions_any(spec, wanted)
        if mentions is None:  # malformed: the full reading raises, naming the field
            effective = effective_pod_resources(pod)
        elif mentions:
            try:
                effective = effective_pod_resources(_projected(pod, wanted))
            except ShapeError as err:  # found on the projection: name the pod itself
                raise err.about(pod) from None
        else:
            continue
        per_node = totals.setdefault(node, {})
        for resource in wanted.intersection(effective):
            per_node[resource] = per_node.get(resource, ZERO) + effective[resource]
    return totals


@dataclass(frozen=True)
class ClassCapacity:
    """A class's figures over its eligible nodes."""

    free: Fraction = ZERO
    allocatable: Fraction = ZERO
    eligible_nodes: int = 0


def nodes_by_resource(nodes: Iterable[Mapping], resources: Iterable[str]) -> dict[str, list[Mapping]]:
    """For each resource name, the nodes that advertise it."""
    index: dict[str, list[Mapping]] = {resource: [] for resource in resources}
    for node in nodes:
        listed = advertised(node)
        for resource in index.keys() & listed.keys():
            index[resource].append(node)
    return index


def class_capacity(
    gpuclass: Mapping, class_nodes: Iterable[Mapping], requests: NodeRequests
) -> ClassCapacity:
    """Free and allocatable units and the eligible node count of a class, from
    the nodes advertising its resource and the per-node requests."""
    resource = resource_name(gpuclass)
    free = total = ZERO
    eligible = 0
    for node, available in eligible_nodes(gpuclass, class_nodes):
        eligible += 1
        total += available
        requested = requests.get(node_name(node), {}).get(resource, ZERO)
        free += max(available - requested, ZERO)
    return ClassCapacity(free=free, allocatable=total, eligible_nodes=eligible)


def eligible_nodes(gpuclass: Mapping, class_nodes: Iterable[Mapping]) -> Iterator[tuple[Mapping, Fraction]]:
    """The nodes that advertise the class's resource and are eligible for
    it, each with its allocatable units."""
    resource = resource_name(gpuclass)
    class_tolerations = tolerations(gpuclass)
    for node in class_nodes:
        available = allocatable(node, resource)
        if available is not None and is_eligible(node, class_tolerations):
            yield node, available


def node_free_units(gpuclass: Mapping, node: Mapping, pods: Iterable[Mapping]) -> Fraction:
    """Free units of a class on one node (only the pods bound to it count);
    zero when the node is not eligible for the class or does not advertise
    its resource. `class_capacity` over one node: the same arithmetic."""
    return class_capacity(gpuclass, [node], requests_by_node(pods, [resource_name(gpuclass)])).free


def capacities(
    classes: Iterable[Mapping], nodes: Iterable[Mapping], pods: Iterable[Mapping]
) -> dict[str, ClassCapacity]:
    """Every class's capacity by class name: one pass over nodes and pods."""
    classes = list(classes)
    resources = {resource_name(c) for c in classes if resource_name(c)}
    index = nodes_by_resource(nodes, resources)
    requests = requests_by_node(pods, resources)
    return {class_name(c): class_capacity(c, index.get(resource_name(c), ()), requests) for c in classes}
