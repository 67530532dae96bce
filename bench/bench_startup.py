"""The startup of a webhook replica against a real API server (issue 26
item 5): list every kind the rules read, index it, ready. Not a test:
nothing here asserts a time.

A control plane of .cache/bin (etcd, kube-apiserver, as the live tests
start it; no webhook registered, so nothing slows the writes) is filled
with a fraction of the bench state of `bench_budgets` (FRACTION of its
tenants, workloads, pods and quotas, the same generator scaled; each
tenant namespace with its default ServiceAccount, which a pod needs), by
several writers at once. Then a replica's cache (`webhook.cache.Cache` over
a `LiveIndex`, in a process of its own, as `cozyrender webhook` runs it)
starts, and the time to ready, the objects it holds, its resident memory
and its peak (VmHWM) are printed; beside it the same replica of BASELINE
(the commit before issue 26's cache work, from `git archive`).

Storing the whole state (312,529 objects and 20,000 namespaces and
ServiceAccounts) through one API server on this machine takes longer than
a bench run should, so a fraction is stored and said; set
BENCH_STARTUP_FRACTION=1 for the whole. Pods are stored as created: the
API server gives a new pod a Pending status (no container statuses), as
no kubelet runs here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from baseline import BASELINE, extract

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for extra in (ROOT / "tools" / "controlplane", ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

FRACTION = float(os.environ.get("BENCH_STARTUP_FRACTION", "0.1"))
WRITERS = 8

_REPLICA = r"""
import json, os, sys, threading, time
start = time.perf_counter()
from cozyrender.budgets.live import LiveIndex
from cozyrender.kube.client import make_client
from cozyrender.webhook.cache import Cache
from cozyrender.webhook.metrics import Metrics
kubeconfig = sys.argv[1]
cache = Cache(lambda: make_client(kubeconfig, timeout=120.0), LiveIndex(), threading.Lock(), Metrics())
cache.start()
while not cache.ready():
    if time.perf_counter() - start > 1800:
        print(json.dumps({"error": cache.not_ready_reason()})); sys.exit(1)
    time.sleep(0.02)
ready = time.perf_counter() - start
status = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in open("/proc/self/status")
          if line.startswith(("VmHWM:", "VmRSS:"))}
cache.stop()
print(json.dumps({"ready": ready, "cached": sum(cache.size().values()), "rss": status["VmRSS"],
                  "peak": status["VmHWM"]}))
os._exit(0)
"""


def _state() -> list[dict]:
    spec = importlib.util.spec_from_file_location("bench_budgets", HERE / "bench_budgets.py")
    budgets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(budgets)
    budgets.LEVEL_SIZES = tuple(max(1, round(size * FRACTION)) for size in budgets.LEVEL_SIZES)
    budgets.VM_COUNT = round(budgets.VM_COUNT * FRACTION)
    budgets.POOL_COUNT = round(budgets.POOL_COUNT * FRACTION)
    budgets.POD_COUNT = round(budgets.POD_COUNT * FRACTION)
    return budgets.generate_state()


def _path(obj: dict) -> str:
    from kubeapi import apps_path

    kind, meta = obj["kind"], obj["metadata"]
    namespace = meta.get("namespace")
    if kind == "Namespace":
        return "/api/v1/namespaces"
    if kind == "GPUClass":
        return "/apis/cozystack.io/v1alpha1/gpuclasses"
    if kind in ("Pod", "ResourceQuota", "ServiceAccount"):
        return f"/api/v1/namespaces/{namespace}/{kind.lower()}s"
    plural = {"Tenant": "tenants", "VMInstance": "vminstances", "KubernetesNodes": "kubernetesnodeses"}[kind]
    return apps_path(plural, namespace)


def _store(api_factory, objects: list[dict]) -> tuple[int, list[str]]:
    """Create `objects` with WRITERS connections; (created, the first few refusals)."""
    lock = threading.Lock()
    position = [0]
    created = [0]
    problems: list[str] = []

    def writer() -> None:
        api = api_factory()
        while True:
            with lock:
                if position[0] >= len(objects):
                    return
                obj = objects[position[0]]
                position[0] += 1
            status, body = api.create(_path(obj), obj)
            with lock:
                if status in (200, 201, 409):
                    created[0] += 1
                elif len(problems) < 5:
                    problems.append(f"{obj['kind']} {obj['metadata'].get('name')}: {status} "
                                    f"{str(body.get('message'))[:200]}")

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return created[0], problems


def _replica(code: Path, kubeconfig: Path) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, "-c", _REPLICA, str(kubeconfig)], env=env, cwd=str(code),
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        print(f"  (replica failed: {(out.stdout + out.stderr).strip()[-600:]})")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def run() -> None:
    from cluster import ControlPlane, ClusterError
    from kubeapi import KubeAPI

    if not (ROOT / ".cache" / "bin" / "kube-apiserver").exists():
        print("(no .cache/bin/kube-apiserver: run `make controlplane binaries`; skipped)")
        return
    objects = _state()
    namespaces = sorted({o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
                        | {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"})
    with tempfile.TemporaryDirectory() as tmp:
        plane = ControlPlane(Path(tmp) / "plane", webhook_replicas=0)
        try:
            plane.start()
        except ClusterError as err:
            print(f"(the control plane did not start: {err}; skipped)")
            return
        try:
            existing = {"cozy-system", "cozyrender-system", "tenant-root"}
            first = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                     for ns in namespaces if ns not in existing]
            accounts = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}
                        for ns in namespaces]
            rest = [o for o in objects if o["kind"] != "Namespace"]
            for obj in rest:  # the API server requires an image of every container
                for container in (obj.get("spec") or {}).get("initContainers") or ():
                    container.setdefault("image", "busybox")
            order = {"GPUClass": 0, "Tenant": 1, "VMInstance": 2, "KubernetesNodes": 2, "ResourceQuota": 3, "Pod": 4}
            rest.sort(key=lambda o: order.get(o["kind"], 5))
            started = time.perf_counter()
            stored = 0
            problems: list[str] = []
            for batch in (first, accounts, rest):
                done, found = _store(lambda: KubeAPI(plane), batch)
                stored += done
                problems += found
            took = time.perf_counter() - started
            kinds: dict[str, int] = {}
            for obj in objects:
                kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
            print(f"stored {stored:,} objects ({FRACTION:g} of the bench state: "
                  + ", ".join(f"{n:,} {k}" for k, n in sorted(kinds.items()))
                  + f"; plus {len(accounts):,} ServiceAccounts and the namespaces) in {took:.0f} s "
                  f"({stored / took:,.0f} per second, {WRITERS} writers)", flush=True)
            for problem in problems[:5]:
                print(f"  refused: {problem}")
            baseline = extract(Path(tmp))
            results = {}
            for name, code in (("before", baseline), ("after", ROOT)):
                if code is None:
                    print(f"  {name}: no baseline (git or commit {BASELINE} missing)")
                    continue
                result = _replica(code, plane.kubeconfig)
                if result is None:
                    continue
                results[name] = result
                print(f"  {name:6} replica: ready in {result['ready']:.1f} s (interpreter start, list of every "
                      f"kind, index), {result['cached']:,} objects cached; RSS {result['rss'] / 2**20:.0f} MiB, "
                      f"peak {result['peak'] / 2**20:.0f} MiB", flush=True)
            if "before" in results and "after" in results:
                before, after = results["before"], results["after"]
                print(f"  after / before: {after['ready'] / before['ready']:.2f}x the time, "
                      f"{after['peak'] / before['peak']:.2f}x the peak memory")
            if "after" in results and FRACTION < 1:
                after = results["after"]
                print(f"  scaled to the whole state (x{1 / FRACTION:g}, linear; not measured): ready in about "
                      f"{after['ready'] / FRACTION:.0f} s")
        finally:
            plane.stop()


if __name__ == "__main__":
    run()
