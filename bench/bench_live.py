"""The live budget index under watch events (issue 16: "a watch event
updates the index in time proportional to the objects it touches, never a
full re-index"), on the bench state of `bench_budgets` (10,000 tenants,
about 312,000 objects).

Measures events per second for workload events (a VM's or worker pool's GPU
count changed), pod events (a pod's limits changed, its namespace's usage
read again), and tenant events (a budget value changed; a tenant starting
or stopping to declare keys, which re-derives its subtree's pools), beside
the peer: a full re-index per event, as the first LiveIndex did. Checks once
at the end that the live state equals a full index of its objects (a
correctness check, not a time). Prints figures and ratios; asserts no time.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib.util
import random
import time
from pathlib import Path

from cozyrender.budgets import index_state
from cozyrender.budgets.live import LiveIndex


def _bench_budgets():
    path = Path(__file__).resolve().parent / "bench_budgets.py"
    spec = importlib.util.spec_from_file_location("bench_budgets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _events(objects: list[dict], rng: random.Random, count: int) -> dict[str, list[dict]]:
    classes = ("a100", "h100", "l40s")
    workloads = [o for o in objects if o["kind"] in ("VMInstance", "KubernetesNodes")]
    pods = [o for o in objects if o["kind"] == "Pod"]
    tenants = [o for o in objects if o["kind"] == "Tenant" and o["metadata"]["namespace"] != "tenant-root"]
    declaring = [t for t in tenants if t["spec"]["resourceQuotas"]]
    events: dict[str, list[dict]] = {"workload": [], "pod": [], "tenant value": [], "tenant keys": []}
    for _ in range(count):
        old = rng.choice(workloads)
        events["workload"].append(dict(old, spec=dict(old["spec"], gpus=[{"class": rng.choice(classes),
                                                                           "count": rng.randint(0, 3)}])))
        old = rng.choice(pods)
        new = copy.deepcopy(old)
        new["spec"]["containers"][0]["resources"] = {"limits": {"cpu": f"{rng.randint(1, 4000)}m", "memory": "1Gi"}}
        events["pod"].append(new)
        old = rng.choice(declaring)
        quotas = dict(old["spec"]["resourceQuotas"])
        key = rng.choice(sorted(quotas))
        if isinstance(quotas[key], int):
            quotas[key] = quotas[key] + rng.randint(1, 5)
        events["tenant value"].append(dict(old, spec=dict(old["spec"], resourceQuotas=quotas)))
        old = rng.choice(tenants)
        flipped = {} if old["spec"]["resourceQuotas"] else {"a100.gpuclass.cozystack.io/devices": 4, "cpu": 8}
        events["tenant keys"].append(dict(old, spec=dict(old["spec"], resourceQuotas=flipped)))
    return events


def run() -> None:
    objects = _bench_budgets().generate_state()
    gc.freeze()
    start = time.perf_counter()
    live = LiveIndex(objects)
    built = time.perf_counter() - start
    start = time.perf_counter()
    index_state(objects)
    full = time.perf_counter() - start
    print(f"{len(objects):,} objects: LiveIndex built in {built:.2f} s (the first list); a full re-index {full:.2f} s")

    events = _events(objects, random.Random(16), 2000)
    for name, batch in events.items():
        start = time.perf_counter()
        for obj in batch:
            live.upsert(obj)
        took = (time.perf_counter() - start) / len(batch)
        print(f"{name} events: {1 / took:,.0f} per second ({took * 1e6:,.0f} us each; {len(batch):,} events); "
              f"a full re-index per event: {1 / full:.2f} per second ({full / took:,.0f}x slower)")

    start = time.perf_counter()
    again = index_state(live.objects())
    check = time.perf_counter() - start
    same = all(getattr(live.state, f.name) == getattr(again, f.name) for f in dataclasses.fields(again))
    print(f"after {sum(map(len, events.values())):,} events the live state equals a full index of its objects: "
          f"{same} (re-indexed in {check:.2f} s to compare)")
    if not same:
        raise SystemExit("bench_live: the live state differs from a full index")


if __name__ == "__main__":
    run()
