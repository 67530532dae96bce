"""The sharded reservation ledger against the real API server (issue 26
item 1): admitted growing writes per second with two webhook replicas
behind the round-robin balancer (tools/controlplane, as `make cluster`),
for writes into one pool and into 16 independent pools, side by side in one
run, with the ratio.

Every write is a VMInstance create of one device into a pool whose budget
holds them all, sent by 16 client threads at once (one keep-alive
connection each), so every write is admitted and takes the ledger: one
shard read and one compare-and-swap per pool root it charges. Into one pool,
all of them contend on that pool's shard (409s retried); into 16 pools,
each thread writes its own pool and no two writes touch the same shard. The
API server stores each write too (its own etcd write), so with two cores
for everything the API server and the replicas' CPU are the limit.
Prints figures, the 409s the replicas retried, and the ratio; asserts no time.
"""

from __future__ import annotations

import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (ROOT / "tests", ROOT / "tools" / "controlplane"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

APPS = "apps.cozystack.io/v1alpha1"
A100 = "a100.gpuclass.cozystack.io/devices"
THREADS = 16
WRITES = 20  # per thread and phase


def _metric(plane, name: str) -> float:
    context = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    total = 0.0
    for replica in range(plane.webhook_replicas):
        url = f"https://127.0.0.1:{plane.ports[f'webhook-{replica}']}/metrics"
        text = urllib.request.urlopen(url, context=context, timeout=10).read().decode()
        total += sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))
    return total


def _phase(plane, pools: list[str], tag: str) -> tuple[float, int, float]:
    """Writes per second admitted, how many, and the ledger's 409s, for
    THREADS threads writing WRITES VMs each, thread i into pools[i % len]."""
    from kubeapi import KubeAPI, apps_path

    barrier = threading.Barrier(THREADS + 1)

    def writer(index: int) -> int:
        api = KubeAPI(plane)
        namespace = pools[index % len(pools)]
        api.get(f"/api/v1/namespaces/{namespace}")  # the connection is open before the clock starts
        barrier.wait()
        admitted = 0
        for n in range(WRITES):
            body = {"apiVersion": APPS, "kind": "VMInstance",
                    "metadata": {"name": f"{tag}-{index}-{n}", "namespace": namespace},
                    "spec": {"gpus": [{"class": "a100", "count": 1}]}}
            status, answer = api.create(apps_path("vminstances", namespace), body)
            if status == 201:
                admitted += 1
            elif "contended" not in answer.get("message", ""):
                raise RuntimeError(f"write refused: {status} {answer.get('message')}")
        return admitted

    conflicts = _metric(plane, "cozyrender_webhook_ledger_conflicts_total")
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(writer, index) for index in range(THREADS)]
        barrier.wait()
        start = time.perf_counter()
        admitted = sum(future.result() for future in futures)
        took = time.perf_counter() - start
    return admitted / took, admitted, _metric(plane, "cozyrender_webhook_ledger_conflicts_total") - conflicts


def run() -> None:
    from cluster import ControlPlane
    from kubeapi import KubeAPI, apps_path

    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
        plane = ControlPlane(Path(tmp), webhook_replicas=2)
        plane.start()
        try:
            api = KubeAPI(plane)
            api.create("/apis/cozystack.io/v1alpha1/gpuclasses", {
                "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
                "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                         "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/a100"}})
            names = ["one"] + [f"p{i}" for i in range(16)]
            for name in names:
                status, body = api.create(apps_path("tenants", "tenant-root"), {
                    "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": name, "namespace": "tenant-root"},
                    "spec": {"resourceQuotas": {A100: 100_000}}})
                assert status == 201, body
                api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": f"tenant-{name}"}})
            time.sleep(2)  # both replicas' watches have the tenants (a warm-up write follows anyway)
            _phase(plane, ["tenant-one"], "warm")
            one, count_one, conflicts_one = _phase(plane, ["tenant-one"], "one")
            many, count_many, conflicts_many = _phase(plane, [f"tenant-p{i}" for i in range(16)], "many")
        finally:
            plane.stop()
    print(f"2 webhook replicas, real kube-apiserver and etcd, {THREADS} writers, every write a growing VM create:")
    print(f"  1 pool:  {one:6.1f} admitted writes/s ({count_one} writes, {conflicts_one:.0f} shard 409s retried)")
    print(f"  16 pools: {many:6.1f} admitted writes/s ({count_many} writes, {conflicts_many:.0f} shard 409s retried)")
    print(f"  16 independent pools / 1 pool: {many / one:.2f}x (linear would be bounded by the API server's own "
          f"rate on this machine's {__import__('os').cpu_count()} cores)")


if __name__ == "__main__":
    run()
