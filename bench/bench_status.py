"""The GPUClass status controller's work per event, on the catalog benchmark's
cluster (50 classes, 5,000 nodes, 100,000 pods): a pod bound or deleted, and a
node cordoned, each applied to the controller's ClassIndex and the touched
classes' figures recomputed, beside the peer a controller without an index
would run: the whole catalog recomputed per event. The touched classes'
figures are compared with the catalog's after every event, so the ratio is
between equal answers. Prints figures and ratios; asserts nothing about time.
"""

from __future__ import annotations

import copy
import importlib.util
import random
import statistics
import time
from pathlib import Path

from cozyrender.gpuclass.catalog import catalog_rows
from cozyrender.gpuclass.status import ClassIndex, desired_status, pod_demand, small_node

EVENTS = 20


def _catalog_bench():
    path = Path(__file__).resolve().parent / "bench_catalog.py"
    spec = importlib.util.spec_from_file_location("bench_catalog", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run() -> None:
    cluster = _catalog_bench()
    rng = random.Random(7)
    classes, nodes = cluster._classes(rng), cluster._nodes(rng)
    pods = cluster._pods(rng, nodes)
    started = time.perf_counter()
    index = ClassIndex()
    for gpuclass in classes:
        index.set_class(gpuclass, gpuclass["metadata"]["name"])
    for node in nodes:
        index.set_node(small_node(node), node["metadata"]["name"])
    for pod in pods:
        index.set_pod((pod["metadata"]["namespace"], pod["metadata"]["name"]), pod_demand(pod))
    print(f"index built from {len(classes)} classes, {len(nodes)} nodes, {len(pods)} pods: "
          f"{time.perf_counter() - started:.2f} s (once, at the first list)")
    gpu_pods = [pod for pod in pods if pod_demand(pod)]
    ours, peer = [], []
    for step in range(EVENTS):
        kind = step % 3
        if kind == 0:  # a GPU pod deleted
            pod = gpu_pods.pop(rng.randrange(len(gpu_pods)))
            pods.remove(pod)
            event = lambda pod=pod: index.set_pod((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
        elif kind == 1:  # a GPU pod bound
            pod = copy.deepcopy(gpu_pods[rng.randrange(len(gpu_pods))])
            pod["metadata"]["name"] += f"-new-{step}"
            pods.append(pod)
            event = lambda pod=pod: index.set_pod((pod["metadata"]["namespace"], pod["metadata"]["name"]),
                                                  pod_demand(pod))
        else:  # a node cordoned
            node = nodes[rng.randrange(len(nodes))]
            node.setdefault("spec", {})["unschedulable"] = True
            event = lambda node=node: index.set_node(small_node(node), node["metadata"]["name"])
        began = time.perf_counter()
        touched = event()
        statuses = {name: desired_status(index.classes[name], index.figures(name), "2026-01-01T00:00:00Z")
                    for name in touched}
        ours.append(time.perf_counter() - began)
        began = time.perf_counter()
        rows = {row.name: row for row in catalog_rows(classes + nodes + pods)}
        peer.append(time.perf_counter() - began)
        for name, status in statuses.items():
            row = rows[name]
            assert (str(status["free"]), str(status["allocatable"]), status["nodes"]) == \
                (row.free_units, row.allocatable_units, row.eligible_nodes), name
    mine, theirs = statistics.median(ours), statistics.median(peer)
    print(f"per event (median of {EVENTS}: pod deleted, pod bound, node cordoned):")
    print(f"  status controller (index, touched classes only): {mine * 1000:9.3f} ms")
    print(f"  peer (the whole catalog recomputed):             {theirs * 1000:9.3f} ms")
    print(f"  ratio: {theirs / mine:,.0f}x")
