"""The admission webhook at scale: the bench state of bench_budgets (10,000
tenants, ~312,000 objects) loaded into the webhook's LiveIndex, its HTTPS
server answering AdmissionReviews sent by a second process over
keep-alive TLS connections, several at a time, presenting a client
certificate the webhook's client CA signed (as `make cluster` runs it).

Measures, beside a peer in the same run:
- admission latency p50/p99 as the client sees it (target p99 <= 10 ms),
  beside `check_write` of the same writes in process (the rules alone);
- memory of the cache: RSS grown by loading the objects into the index, per
  100,000 cached objects.
The ledger is not in the loop here (no API server): its cost is one GET and
one PUT of a ConfigMap per growing write, measured by the live tests'
metrics (cozyrender_webhook_ledger_seconds). Prints figures; asserts nothing.
"""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

CONNECTIONS = 4
CLIENT = r"""
import http.client, json, ssl, sys, threading, time
port, ca, path, connections = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
bodies = [line.encode() for line in open(path)]
context = ssl.create_default_context(cafile=ca)
context.load_cert_chain(sys.argv[5], sys.argv[6])  # the API server's client certificate
times = [None] * len(bodies)
answers = [None] * len(bodies)
def worker(k):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=60)
    for i in range(k, len(bodies), connections):
        start = time.perf_counter()
        conn.request("POST", "/validate", bodies[i], {"Content-Type": "application/json"})
        data = conn.getresponse().read()
        times[i] = time.perf_counter() - start
        answers[i] = json.loads(data)["response"]["allowed"]
    conn.close()
threads = [threading.Thread(target=worker, args=(k,)) for k in range(connections)]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps({"times": times, "answers": answers}))
"""


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _review(obj: dict, operation: str, old: dict | None, uid: str) -> dict:
    group, _, version = obj["apiVersion"].rpartition("/")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"], "operation": operation,
        "object": obj, "oldObject": old, "dryRun": False, "userInfo": {"username": "bench"}}}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def bench_writes(objects: list[dict], budgets, rng: random.Random | None = None) -> list[tuple]:
    """The bench's AdmissionReviews: 1,200 VM creates in random namespaces,
    600 VM and pool updates, 200 Tenant updates, 400 GPU pod and 200
    KubeVirt VM creates (the other doors), shuffled."""
    rng = rng or random.Random(11)
    workloads = [o for o in objects if o["kind"] in ("VMInstance", "KubernetesNodes")]
    tenants = [o for o in objects if o["kind"] == "Tenant"]
    writes = []
    for i in range(1200):  # creates of VMs in random namespaces (each grows its pool)
        namespace = rng.choice(workloads)["metadata"]["namespace"]
        obj = {"apiVersion": budgets.APPS, "kind": "VMInstance", "metadata": {"name": f"bench{i}", "namespace": namespace},
               "spec": {"gpus": [{"class": rng.choice(budgets.CLASSES), "count": rng.randint(1, 3)}]}}
        writes.append((obj, "CREATE", None))
    for _ in range(600):  # updates of VMs and pools
        old = rng.choice(workloads)
        writes.append((dict(old, spec=dict(old["spec"], gpus=[{"class": rng.choice(budgets.CLASSES), "count": 3}])),
                       "UPDATE", old))
    for _ in range(200):  # Tenant updates
        old = rng.choice(tenants)
        new = dict(old, spec=dict(old["spec"], resourceQuotas={"a100.gpuclass.cozystack.io/devices": 1, "cpu": 1}))
        writes.append((new, "UPDATE", old))
    for i in range(600):  # the other doors (issue 32): pods asking for a class's device, KubeVirt VMs
        namespace = rng.choice(workloads)["metadata"]["namespace"]
        device = f"nvidia.com/{rng.choice(budgets.CLASSES)}"
        if i % 3:
            obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"benchpod{i}", "namespace": namespace},
                   "spec": {"containers": [{"name": "c", "image": "x",
                                            "resources": {"limits": {device: str(rng.randint(1, 2)), "cpu": "1"}}}]}}
        else:
            obj = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                   "metadata": {"name": f"benchvm{i}", "namespace": namespace},
                   "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"devices": {
                       "gpus": [{"name": "gpu1", "deviceName": device}]}}}}}}
        writes.append((obj, "CREATE", None))
    rng.shuffle(writes)

    return writes


def run() -> None:
    import importlib.util

    from webhook_certs import make_certs, make_client_ca

    from cozyrender.budgets import check_write
    from cozyrender.budgets.live import LiveIndex
    from cozyrender.webhook.ledger import Arbiter
    from cozyrender.webhook.metrics import Metrics
    from cozyrender.webhook.server import ReloadingTLS, serve

    spec = importlib.util.spec_from_file_location("bench_budgets", HERE / "bench_budgets.py")
    budgets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(budgets)

    gc.collect()
    empty = _rss()
    objects = budgets.generate_state()
    gc.collect()
    gc.freeze()
    before = _rss()
    started = time.perf_counter()
    index = LiveIndex(objects)
    state = index.state  # the first read indexes
    loaded = time.perf_counter() - started
    grown = _rss() - before
    total = _rss() - empty
    print(f"cache: {len(objects):,} objects into the LiveIndex in {loaded:.2f} s; memory (RSS) of objects and index "
          f"{total / 2**20:.0f} MiB = {total / len(objects) * 100_000 / 2**20:.0f} MiB per 100,000 cached objects "
          f"(the index alone {grown / len(objects) * 100_000 / 2**20:.0f} MiB per 100,000; whole objects in "
          f"process, not the webhook's compact cache: bench_webhook_memory measures that)")

    rng = random.Random(11)
    writes = bench_writes(objects, budgets, rng)

    in_process = []
    expected = []
    for obj, _, _ in writes:
        start = time.perf_counter()
        expected.append(check_write(state, obj).allowed)
        in_process.append(time.perf_counter() - start)

    metrics = Metrics()
    arbiter = Arbiter(index, threading.Lock(), metrics)
    with tempfile.TemporaryDirectory() as tmp:
        files, caller = make_certs(Path(tmp)), make_client_ca(Path(tmp), "apiserver")
        # As `make cluster` runs it: client certificates required (--client-ca), files watched for renewal.
        tls = ReloadingTLS(str(files["cert"]), str(files["key"]), str(caller["ca"]))
        server = serve(("127.0.0.1", 0), tls, {"/validate": arbiter}, lambda: True, metrics)
        thread = server.serve_in_thread()
        bodies = Path(tmp) / "bodies.jsonl"
        with bodies.open("w") as handle:
            for i, (obj, operation, old) in enumerate(writes):
                handle.write(json.dumps(_review(obj, operation, old, f"b{i}")) + "\n")
        # Warm-up: a few requests so the first connections' handshakes are not counted as admission time.
        proc = subprocess.run([sys.executable, "-c", CLIENT, str(server.port), str(files["ca"]), str(bodies),
                               str(CONNECTIONS), str(caller["cert"]), str(caller["key"])],
                              capture_output=True, text=True, timeout=600)
        server.shutdown()
        server.server_close()
        thread.join(5)
    if proc.returncode != 0:
        print(f"client failed: {proc.stderr.strip()[-2000:]}")
        return
    result = json.loads(proc.stdout)
    times, answers = result["times"], result["answers"]
    agree = sum(1 for got, want in zip(answers, expected) if got == want)
    p50, p99 = statistics.median(times), _percentile(times, 0.99)
    c50, c99 = statistics.median(in_process), _percentile(in_process, 0.99)
    print(f"admission over HTTPS with client authentication ({len(writes):,} AdmissionReviews: VM creates, VM/pool "
          f"and Tenant updates, GPU pod and KubeVirt VM creates; {CONNECTIONS} keep-alive TLS connections from a second process): p50 {p50 * 1e3:.2f} ms, "
          f"p99 {p99 * 1e3:.2f} ms, max {max(times) * 1e3:.2f} ms (target p99 <= 10 ms); "
          f"{agree:,}/{len(writes):,} answers equal check_write's")
    print(f"  peer, check_write of the same writes in process: p50 {c50 * 1e3:.3f} ms, p99 {c99 * 1e3:.3f} ms "
          f"(HTTPS, JSON and the server add {(p50 - c50) * 1e3:.2f} ms at the median)")
    pods = [t for t, (obj, _, _) in zip(times, writes) if obj["kind"] == "Pod"]
    if pods:  # closed-loop clients: the connections' rate, at the pods' mean time
        print(f"  of them {len(pods):,} GPU pod creates: p50 {statistics.median(pods) * 1e3:.2f} ms, "
              f"p99 {_percentile(pods, 0.99) * 1e3:.2f} ms; sustained about "
              f"{CONNECTIONS / statistics.fmean(pods):,.0f} pod admissions/s over {CONNECTIONS} connections")
    _overlay(arbiter, writes, rng)
    profile = importlib.util.spec_from_file_location("profile_admission", HERE / "profile_admission.py")
    module = importlib.util.module_from_spec(profile)
    profile.loader.exec_module(module)
    module.profile_decisions(arbiter, [json.dumps(_review(obj, op, old, f"p{i}")).encode()
                                       for i, (obj, op, old) in enumerate(writes)])


def _overlay(arbiter, writes, rng) -> None:
    """A growing decision as the ledger makes it, in process: 10 pending
    reservations and the request's oldObject laid over the cached view
    through LiveIndex upsert/remove, checked, reverted. Its cost is what the
    overlay touches when the index is incremental, a re-index otherwise."""
    from cozyrender.webhook import admission
    from cozyrender.webhook.ledger import Entry, identity, projection

    times = []
    stop = time.perf_counter() + 30
    for i, (obj, operation, old) in enumerate(writes[:200]):
        pending = [o for o, op, _ in rng.sample(writes, 10) if op == "CREATE" and o is not obj]
        entries = [Entry(identity(o), "", 1, projection(o), 0.0, 1e12) for o in pending]
        review = admission.read_review(_review(obj, operation, old, f"o{i}"))
        start = time.perf_counter()
        arbiter._check(review, obj, old, entries)
        times.append(time.perf_counter() - start)
        if time.perf_counter() > stop:
            break
    print(f"  a growing decision with ~10 reservations laid over the cache and reverted ({len(times)} decisions, "
          f"in process, ledger I/O excluded): p50 {statistics.median(times) * 1e3:.2f} ms, "
          f"p99 {_percentile(times, 0.99) * 1e3:.2f} ms")


if __name__ == "__main__":
    run()
