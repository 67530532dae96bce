"""The webhook's memory beside the number of objects it caches (issue 26
item 3: at most 60 MiB per 100,000 cached objects), before and after the
compact cache, in one run.

Each figure comes from a fresh process that feeds the objects through the
webhook's own `Cache.replace_all` (what a first list does: the objects of
one kind at a time, streamed, into the LiveIndex the decisions read), then
reads its resident memory: grown = RSS after the lists minus RSS before
them (imports done), and the process's peak (VmHWM). No API server here:
the lists are read from a file or generated, so only the cache is
measured; `bench_startup` lists from a real API server.

"Before" is the code of BASELINE (the commit before issue 26's cache
work), taken with `git archive` and run the same way from a temporary
directory; it is skipped, saying so, where git or that commit is missing.
"After" leaves out what the pods' field selector leaves out (finished pods:
the API server never sends them); the figure per 100,000 divides by the
objects the cluster holds, the same number for both.

Two sets: 100,000 pods as the API server sends them (a Deployment's pod
with managedFields, conditions, container statuses, volumes; 5 % finished)
and the whole bench state of `bench_budgets` (312,529 objects). Prints
figures and ratios; asserts nothing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from baseline import BASELINE, extract

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET_MIB = 60
PODS = 100_000

_MEASURE = r"""
import gc, json, os, sys, threading, time
dataset, source, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import WATCHED
from cozyrender.webhook import cache as cache_module
from cozyrender.webhook.metrics import Metrics
after = hasattr(cache_module, "scope")  # the compact cache watches pods without finished ones

def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def finished(obj):
    return obj["kind"] == "Pod" and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")

def generated_pods():
    sys.path.insert(0, source)
    import random
    import bench_webhook_memory as bench
    rng = random.Random(26)
    for index in range(count):
        yield bench.api_pod(rng, index)

def from_file(kind):
    # Pages of 500, each parsed at once, as a chunked list from the API server is.
    path = os.path.join(source, kind + ".jsonl")
    if os.path.exists(path):
        with open(path) as handle:
            page = []
            for line in handle:
                page.append(line)
                if len(page) == 500:
                    yield from json.loads("[" + ",".join(page) + "]")
                    page = []
            if page:
                yield from json.loads("[" + ",".join(page) + "]")

traced = os.environ.get("BENCH_TRACE") == "1"
if traced:
    import tracemalloc
    tracemalloc.start()
gc.collect()
before = rss()
cache = cache_module.Cache(lambda: None, LiveIndex(), threading.Lock(), Metrics())
start = time.perf_counter()
listed = 0
for watched in WATCHED:
    objects = generated_pods() if dataset == "pods" else from_file(watched.kind)
    if dataset == "pods" and watched.kind != "Pod":
        objects = iter(())
    kept = (o for o in objects if not finished(o)) if after else list(objects)
    cache.replace_all(watched, kept)
    del kept
took = time.perf_counter() - start
gc.collect()
grown = rss() - before
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024
cached = sum(cache.size().values())
live = tracemalloc.get_traced_memory()[0] if traced else None
print(json.dumps({"grown": grown, "peak": hwm, "cached": cached, "seconds": took, "live": live}))
"""


def api_pod(rng: random.Random, index: int) -> dict:
    """A pod as the API server sends it (bench_state's Deployment pod, with
    managedFields), 5 % of them finished, in one of 400 tenant namespaces."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_state", HERE / "bench_state.py")
    global _STATE
    if _STATE is None:
        _STATE = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_STATE)
    pod = _STATE._pod(rng, index)
    pod["metadata"]["namespace"] = f"tenant-t{index % 400}"
    pod["metadata"]["managedFields"] = [
        {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kube-controller-manager", "operation": "Update",
         "time": "2026-11-02T09:14:27Z", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {
             ".": {}, "f:app.kubernetes.io/name": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {}},
             "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {},
                                                                "f:resources": {".": {}, "f:limits": {}}}}}}},
        {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubelet", "operation": "Update",
         "subresource": "status", "time": "2026-11-02T09:14:31Z", "fieldsV1": {"f:status": {
             "f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
             "f:startTime": {}}}},
    ]
    if rng.random() < 0.05:
        pod["status"]["phase"] = "Succeeded"
    return pod


_STATE = None


def _measure(code: Path, dataset: str, source: str, count: int = 0, traced: bool = False) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(code), BENCH_TRACE="1" if traced else "0")
    out = subprocess.run([sys.executable, "-c", _MEASURE, dataset, source, str(count)], env=env, cwd=str(code),
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        print(f"  (measurement failed: {out.stderr.strip()[-400:]})")
        return None
    return json.loads(out.stdout)


def _line(name: str, objects: int, result: dict | None) -> float | None:
    if result is None:
        return None
    per = result["grown"] / objects * 100_000 / 2**20
    print(f"  {name:7} {objects:,} objects in the cluster, {result['cached']:,} cached: RSS grown "
          f"{result['grown'] / 2**20:6.1f} MiB = {per:5.1f} MiB per 100,000 (target <= {TARGET_MIB}); "
          f"peak RSS {result['peak'] / 2**20:5.0f} MiB; listed and indexed in {result['seconds']:.1f} s", flush=True)
    return per


def run() -> None:
    import importlib.util

    with tempfile.TemporaryDirectory() as tmp:
        baseline = extract(Path(tmp))
        if baseline is None:
            print(f"(no baseline: git or commit {BASELINE} missing; the figures after only)")
        print(f"{PODS:,} pods as the API server sends them (managedFields, statuses; 5 % finished):")
        results = {}
        for name, code in (("before", baseline), ("after", ROOT)):
            if code is not None:
                results[name] = _line(name, PODS, _measure(code, "pods", str(HERE), PODS))
        if results.get("before") and results.get("after"):
            print(f"  {results['before'] / results['after']:.1f}x less memory per cached object")

        spec = importlib.util.spec_from_file_location("bench_budgets", HERE / "bench_budgets.py")
        budgets = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(budgets)
        objects = budgets.generate_state()
        count = len(objects)
        path = Path(tmp) / "state"
        path.mkdir()
        handles: dict = {}
        for obj in objects:
            if obj["kind"] not in handles:
                handles[obj["kind"]] = (path / f"{obj['kind']}.jsonl").open("w")
            handles[obj["kind"]].write(json.dumps(obj) + "\n")
        for handle in handles.values():
            handle.close()
        del objects
        print(f"the whole bench state of bench_budgets ({count:,} objects; 5 % of its pods finished):")
        results = {}
        for name, code in (("before", baseline), ("after", ROOT)):
            if code is not None:
                results[name] = _line(name, count, _measure(code, "state", str(path)))
        if results.get("before") and results.get("after"):
            print(f"  {results['before'] / results['after']:.1f}x less memory per cached object")
        live = _measure(ROOT, "state", str(path), traced=True)
        if live is not None:
            print(f"  after, the bytes Python holds for the cache (tracemalloc, the same lists again): "
                  f"{live['live'] / 2**20:.1f} MiB = {live['live'] / count * 100_000 / 2**20:.1f} MiB per 100,000; "
                  f"the rest of the RSS above is the allocator's: memory freed during the first lists and the "
                  f"index, held in arenas that still hold a live object")


if __name__ == "__main__":
    run()
