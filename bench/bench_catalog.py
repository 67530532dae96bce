"""The GPU catalog at scale: 50 classes over 5,000 nodes and 100,000 pods,
already loaded (issue 5 item 7; target < 1 s).

Measured beside a peer in the same run: a naive catalog that rescans every
pod for every class (the obvious loop), computing the same figures. Both
results are compared, so the ratio is between equal answers. Prints figures
and ratios; asserts nothing about time.
"""

from __future__ import annotations

import random
import statistics
import time
from fractions import Fraction

from cozyrender.gpuclass.catalog import catalog_rows
from cozyrender.gpuclass.classes import class_name, resource_name, tolerations
from cozyrender.gpuclass.conflicts import find_conflicts
from cozyrender.gpuclass.freeunits import allocatable
from cozyrender.kube.nodes import is_eligible, node_name
from cozyrender.kube.pods import effective_pod_resource, is_terminated
from cozyrender.kube.quantity import format_quantity

CLASS_COUNT, NODE_COUNT, POD_COUNT = 50, 5_000, 100_000
RESOURCE_COUNT = 45  # fewer resource names than classes: some classes conflict
GPU_NODE_SHARE, GPU_POD_SHARE = 0.8, 0.25
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _resource(index: int) -> str:
    return f"nvidia.com/GPU_MODEL_{index:02d}"


def _classes(rng: random.Random) -> list[dict]:
    classes = []
    for index in range(CLASS_COUNT):
        mode = rng.choice(["passthrough", "vgpu", "mig"])
        spec = {"vendor": "NVIDIA", "model": f"M{index}", "mode": mode, "memory": "40Gi",
                "sourceKind": "MediatedDevice" if mode == "vgpu" else "PCIHostDevice",
                "resourceName": _resource(index % RESOURCE_COUNT)}
        if mode != "passthrough":
            spec["profile"] = f"p{index}"
        if rng.random() < 0.7:
            spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        classes.append({"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass",
                        "metadata": {"name": f"class-{index:02d}",
                                     "creationTimestamp": f"2026-01-{1 + index % 28:02d}T00:00:00Z"},
                        "spec": spec})
    return classes


def _nodes(rng: random.Random) -> list[dict]:
    nodes = []
    for index in range(NODE_COUNT):
        allocatable = {"cpu": "63500m", "memory": "515543488Ki", "pods": "110"}
        taints = []
        if rng.random() < GPU_NODE_SHARE:
            allocatable[_resource(rng.randrange(RESOURCE_COUNT))] = str(rng.choice([1, 2, 4, 7, 8]))
            if rng.random() < 0.5:
                taints.append(dict(GPU_TAINT))
        if rng.random() < 0.05:
            taints.append({"key": "dedicated", "value": "ml", "effect": "NoSchedule"})
        ready = "True" if rng.random() < 0.97 else "Unknown"
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{index:04d}"},
                      "spec": {"unschedulable": rng.random() < 0.03, "taints": taints},
                      "status": {"allocatable": allocatable,
                                 "conditions": [{"type": "Ready", "status": ready}]}})
    return nodes


def _container(name: str, gpu: str | None, units: int) -> dict:
    limits = {"cpu": "2", "memory": "4Gi"}
    if gpu:
        limits[gpu] = str(units)
    return {"name": name, "resources": {"limits": limits, "requests": {"cpu": "250m", "memory": "4Gi"}}}


def _pods(rng: random.Random, nodes: list[dict]) -> list[dict]:
    gpu_of = {node_name(n): next((k for k in n["status"]["allocatable"] if k.startswith("nvidia.com/")), None)
              for n in nodes}
    names = list(gpu_of)
    pods = []
    for index in range(POD_COUNT):
        node = rng.choice(names)
        gpu = gpu_of[node] if rng.random() < GPU_POD_SHARE else None
        spec = {"nodeName": node, "containers": [_container("compute", gpu, 1)]}
        if gpu and rng.random() < 0.2:
            spec["initContainers"] = [_container("warmup", gpu, 2)]
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"pod-{index}", "namespace": "tenant-a"}, "spec": spec,
                     "status": {"phase": rng.choice(["Running"] * 8 + ["Pending", "Succeeded"])}})
    return pods


def naive_catalog(classes: list[dict], nodes: list[dict], pods: list[dict]) -> dict[str, tuple]:
    """The obvious loop: for each class, its eligible nodes, then every pod."""
    conflicts = find_conflicts(classes)
    figures = {}
    for gpuclass in classes:
        resource = resource_name(gpuclass)
        eligible = {node_name(n): allocatable(n, resource) for n in nodes
                    if allocatable(n, resource) is not None and is_eligible(n, tolerations(gpuclass))}
        requested: dict[str, Fraction] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node in eligible and not is_terminated(pod):
                requested[node] = requested.get(node, Fraction(0)) + effective_pod_resource(pod, resource)
        free = sum((max(units - requested.get(name, 0), Fraction(0)) for name, units in eligible.items()), Fraction(0))
        conflict = conflicts.get(class_name(gpuclass))
        figures[class_name(gpuclass)] = (format_quantity(free), format_quantity(sum(eligible.values(), Fraction(0))),
                                         len(eligible), conflict.holder if conflict else None)
    return figures


def _timed(function, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run() -> None:
    rng = random.Random(5)
    classes, nodes = _classes(rng), _nodes(rng)
    pods = _pods(rng, nodes)
    objects = classes + nodes + pods
    print(f"state: {len(classes)} classes, {len(nodes):,} nodes, {len(pods):,} pods (already loaded)")

    ours, rows = _timed(lambda: catalog_rows(objects), repeat=5)
    naive, figures = _timed(lambda: naive_catalog(classes, nodes, pods), repeat=1)
    same = all(figures[r.name] == (r.free_units, r.allocatable_units, r.eligible_nodes, r.conflict_holder)
               for r in rows) and len(rows) == len(figures)
    conflicted = sum(r.in_conflict for r in rows)
    print(f"cozyrender catalog_rows        {ours * 1000:8.1f} ms  (median of 5; target < 1000 ms)")
    print(f"naive per-class pod rescan     {naive * 1000:8.1f} ms  (1 run)")
    print(f"ratio naive / cozyrender       {naive / ours:8.1f}x   same figures: {same}; "
          f"{conflicted} classes in conflict")
