"""The webhook against the real control plane (tools/controlplane): two
replicas of `cozyrender webhook` behind a round-robin balancer, registered
with the chart's ValidatingWebhookConfiguration.

- 20 concurrent creates into a budget of 10, spread over both replicas,
  admit exactly 10, counted as objects actually stored (several random
  interleavings);
- `kubectl apply` of an over-budget VMInstance is refused with the reason;
- a dry run writes nothing (no object, no ledger entry);
- a CREATE's AdmissionReview carries metadata.uid and generation (the
  ledger entry holds the stored object's uid);
- with the webhook down, writes are refused and nothing is lost;
- the cache relists after 410 Gone from the real server.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from kubeapi import KubeAPI, apps_path

APPS = "apps.cozystack.io/v1alpha1"
A100 = "a100.gpuclass.cozystack.io/devices"
LEDGER = "/api/v1/namespaces/cozyrender-system/configmaps/cozyrender-ledger-{pool}"


@pytest.fixture(scope="module")
def api(cluster) -> KubeAPI:
    api = KubeAPI(cluster)
    status, body = api.create("/apis/cozystack.io/v1alpha1/gpuclasses", {
        "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
        "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                 "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/a100"}})
    assert status in (201, 409), body
    return api


def make_tenant(api: KubeAPI, name: str, quotas: dict) -> str:
    status, body = api.create(apps_path("tenants", "tenant-root"), {
        "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": name, "namespace": "tenant-root"},
        "spec": {"resourceQuotas": quotas}})
    assert status == 201, f"{status}: {body.get('message', body)}"
    namespace = f"tenant-{name}"
    status, body = api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": namespace}})
    assert status == 201, body
    return namespace


@contextmanager
def webhooks_down(cluster):
    """Both webhook replicas stopped for the block, then started again and waited for."""
    for replica in (0, 1):
        cluster.stop_process(f"webhook-{replica}")
    try:
        yield
    finally:
        for replica in (0, 1):
            cluster.start_webhook(replica)
        for replica in (0, 1):
            cluster.wait_webhook(replica)


def vm_body(namespace: str, name: str, count: int) -> dict:
    return {"apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": name, "namespace": namespace},
            "spec": {"gpus": [{"class": "a100", "count": count}]}}


def stored(api: KubeAPI, namespace: str) -> list[dict]:
    status, body = api.get(apps_path("vminstances", namespace))
    assert status == 200, body
    return body["items"]


def ledger_entries(api: KubeAPI, pool: str) -> list[dict]:
    """The entries of the ledger shard of pool root `pool` (none while it was never written)."""
    status, body = api.get(LEDGER.format(pool=pool))
    if status == 404:
        return []
    assert status == 200, body
    return json.loads((body.get("data") or {}).get("reservations.json") or "[]")


def webhook_metric(cluster, replica: int, name: str) -> float:
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    url = f"https://127.0.0.1:{cluster.ports[f'webhook-{replica}']}/metrics"
    text = urllib.request.urlopen(url, context=context, timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def cached(cluster, kind: str) -> float:
    """How many objects of `kind` the replica that has seen fewest holds."""
    return min(webhook_metric(cluster, replica, f'cozyrender_webhook_cache_objects{{kind="{kind}"}}')
               for replica in (0, 1))


def wait_until_cached(cluster, kind: str, count: float, timeout: float = 20.0) -> None:
    """Until both replicas' watches have seen `count` objects of `kind`."""
    deadline = time.monotonic() + timeout
    while cached(cluster, kind) < count:
        assert time.monotonic() < deadline, f"the replicas' caches hold fewer than {count} {kind}"
        time.sleep(0.05)


@pytest.mark.parametrize("round_", range(3))
def test_twenty_concurrent_creates_into_a_budget_of_ten_admit_exactly_ten(cluster, api, round_: int) -> None:
    rng = random.Random(round_)
    tenants = cached(cluster, "Tenant")
    namespace = make_tenant(api, f"race{round_}", {A100: 10})
    wait_until_cached(cluster, "Tenant", tenants + 1)  # the budget the race is about, seen by both replicas
    names = [f"vm{i}" for i in range(20)]
    rng.shuffle(names)
    delays = {name: rng.random() * 0.02 for name in names}
    start = threading.Barrier(20)
    local = threading.local()

    def create(name: str) -> int:
        if not hasattr(local, "api"):
            local.api = KubeAPI(cluster)  # one connection per thread: requests really overlap
        start.wait()
        time.sleep(delays[name])
        status, body = local.api.create(apps_path("vminstances", namespace), vm_body(namespace, name, 1))
        assert status in (201, 403), body
        if status == 403:
            assert "exceeded GPU budget" in body["message"] or "contended" in body["message"], body
        return status

    writes_before = sum(webhook_metric(cluster, i, "cozyrender_webhook_ledger_writes_total") for i in (0, 1))
    decisions = 'cozyrender_webhook_decisions_total{kind="VMInstance"'
    decided_before = [webhook_metric(cluster, i, decisions) for i in (0, 1)]
    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(create, names))
    assert statuses.count(201) == 10
    assert len(stored(api, namespace)) == 10
    # Both replicas took part in this round (the counters are cumulative: a total
    # above 0 would hold in every round after the first whatever this one did).
    decided = [webhook_metric(cluster, i, decisions) - decided_before[i] for i in (0, 1)]
    assert all(count > 0 for count in decided), decided
    # Exactly the admitted creates were reserved in the ledger, whichever replica took them.
    writes = sum(webhook_metric(cluster, i, "cozyrender_webhook_ledger_writes_total") for i in (0, 1))
    assert writes - writes_before == 10


def test_kubectl_apply_of_an_over_budget_vm_is_refused_with_the_reason(cluster, api, tmp_path) -> None:
    namespace = make_tenant(api, "kubectl", {A100: 2})
    manifest = tmp_path / "vm.yaml"
    manifest.write_text(json.dumps(vm_body(namespace, "big", 3)))
    proc = cluster.kubectl("apply", "-f", str(manifest), check=False)
    assert proc.returncode != 0
    assert 'admission webhook "budgets.cozyrender.io" denied the request' in proc.stderr
    assert "spec.gpus[0].count: Forbidden: exceeded GPU budget 'a100.gpuclass.cozystack.io/devices' of pool " \
           f"{namespace}: requested 3, reserved 0, carved out 0, budget 2 (3 > 2)" in proc.stderr
    assert stored(api, namespace) == []


def test_a_refusal_names_the_field_in_the_status_causes(cluster, api) -> None:
    namespace = make_tenant(api, "causes", {A100: 1})
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "two", 2))
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["details"]["causes"][0]["field"] == "spec.gpus[0].count"
    assert body["details"]["causes"][0]["reason"] == "FieldValueForbidden"


def test_a_dry_run_writes_nothing(cluster, api) -> None:
    namespace = make_tenant(api, "dry", {A100: 4})
    before = [e for e in ledger_entries(api, namespace) if e["identity"][2] == namespace]
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "d", 2), dry_run=True)
    assert status == 201, body
    assert stored(api, namespace) == []
    assert [e for e in ledger_entries(api, namespace) if e["identity"][2] == namespace] == before == []
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "d", 9), dry_run=True)
    assert status == 403 and "exceeded GPU budget" in body["message"]


def test_a_create_carries_its_uid_and_generation_into_the_ledger(cluster, api) -> None:
    namespace = make_tenant(api, "uid", {A100: 4})
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "u", 1))
    assert status == 201, body
    entries = [e for e in ledger_entries(api, namespace) if e["identity"] == ["apps.cozystack.io", "VMInstance", namespace, "u"]]
    assert len(entries) == 1
    assert entries[0]["uid"] == body["metadata"]["uid"] and entries[0]["generation"] == body["metadata"]["generation"] == 1
    # An update that grows: an entry of the new generation beside the create's (each admitted
    # request holds its own until the watches have seen it; the larger counts).
    body["spec"]["gpus"][0]["count"] = 2
    status, updated = api.replace(apps_path("vminstances", namespace, "u"), body)
    assert status == 200, updated
    entries = [e for e in ledger_entries(api, namespace) if e["identity"] == ["apps.cozystack.io", "VMInstance", namespace, "u"]]
    assert entries[-1]["generation"] == updated["metadata"]["generation"] == 2
    assert {e["uid"] for e in entries} == {body["metadata"]["uid"]} and len(entries) <= 2


def test_with_the_webhook_down_writes_are_refused_and_nothing_is_lost(cluster, api) -> None:
    namespace = make_tenant(api, "down", {A100: 4})
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "kept", 1))
    assert status == 201, body
    with webhooks_down(cluster):
        status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "new", 1))
        assert status >= 400 and "budgets.cozyrender.io" in body["message"], body
        assert "failed calling webhook" in body["message"], body  # refused because the webhook is unreachable
        kept = stored(api, namespace)
        assert [o["metadata"]["name"] for o in kept] == ["kept"]
        kept[0]["spec"]["gpus"][0]["count"] = 2
        status, body = api.replace(apps_path("vminstances", namespace, "kept"), kept[0])
        # Refused by the webhook's failurePolicy (Fail), not for another reason
        # (a conflict, a schema error): the message names the webhook and the failed call.
        assert status >= 400 and "budgets.cozyrender.io" in body["message"], body
        assert "failed calling webhook" in body["message"], body
    assert [o["metadata"]["name"] for o in stored(api, namespace)] == ["kept"]
    assert stored(api, namespace)[0]["spec"]["gpus"][0]["count"] == 1
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "new", 1))
    assert status == 201, body


def test_the_cache_relists_after_410_gone(cluster, api) -> None:
    from cozyrender.budgets.live import LiveIndex
    from cozyrender.kube.client import WATCHED, make_client
    from cozyrender.webhook.cache import Cache
    from cozyrender.webhook.metrics import Metrics

    namespace = make_tenant(api, "gone", {})
    for index in range(3):
        status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, f"g{index}", 0))
        assert status == 201, body
    vms = tuple(w for w in WATCHED if w.kind == "VMInstance")
    metrics, index = Metrics(), LiveIndex()
    cache = Cache(lambda: make_client(str(cluster.kubeconfig)), index, threading.Lock(), metrics, watched=vms)
    cache.start(versions={"VMInstance": "1"})  # as if resuming a watch whose version etcd has compacted away
    try:
        deadline = time.monotonic() + 20
        while not cache.ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cache.ready()
        gone = metrics.registry.get_sample_value("cozyrender_webhook_watch_restarts_total",
                                                 {"kind": "VMInstance", "reason": "gone"})
        assert gone == 1
        names = {o["metadata"]["name"] for o in index.objects() if o["metadata"]["namespace"] == namespace}
        assert names == {"g0", "g1", "g2"}
        # And the watch that follows the relist delivers new events.
        status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "g3", 0))
        assert status == 201, body
        deadline = time.monotonic() + 10
        while index.get(body) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert index.get(body) is not None
        api.delete(apps_path("vminstances", namespace, "g0"))
        deadline = time.monotonic() + 10
        while index.get(vm_body(namespace, "g0", 0)) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert index.get(vm_body(namespace, "g0", 0)) is None
    finally:
        cache.stop()


def test_two_tenants_racing_for_one_pool_are_not_both_admitted(cluster, api) -> None:
    parent = make_tenant(api, "carve", {A100: 10})
    time.sleep(0.5)
    barrier = threading.Barrier(2)

    def create(name: str) -> int:
        client = KubeAPI(cluster)
        barrier.wait()
        status, body = client.create(apps_path("tenants", parent), {
            "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": name, "namespace": parent},
            "spec": {"resourceQuotas": {A100: 6}}})
        assert status in (201, 403), body
        return status

    for attempt in range(3):
        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(pool.map(create, [f"a{attempt}", f"b{attempt}"]))
        assert statuses == [201, 403]
        status, body = api.get(apps_path("tenants", parent))
        for item in body["items"]:
            assert api.delete(apps_path("tenants", parent, item["metadata"]["name"]))[0] == 200
        time.sleep(1)  # the watches see the deletions before the next attempt


def test_read_state_gives_check_the_cluster_the_webhook_sees(cluster, api, tmp_path) -> None:
    """`read_state` (what `tree --kubeconfig` uses) lists what the webhook
    watches; `cozyrender check` on it answers as the webhook answered (once
    both replicas' watches have seen the tenant and its VM: the file is read
    after them, so the webhook must answer from the same state)."""
    from test_budgets_builders import run_check_json

    from cozyrender.kube.client import make_client, read_state

    tenants, vms = cached(cluster, "Tenant"), cached(cluster, "VMInstance")
    namespace = make_tenant(api, "state", {A100: 3})
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "one", 2))
    assert status == 201, body
    wait_until_cached(cluster, "Tenant", tenants + 1)
    wait_until_cached(cluster, "VMInstance", vms + 1)
    objects = read_state(make_client(str(cluster.kubeconfig)))
    kinds = {o["kind"] for o in objects}
    assert {"Tenant", "VMInstance", "GPUClass", "Namespace"} <= kinds
    assert {"apiVersion", "kind", "metadata"} <= set(next(o for o in objects if o["kind"] == "VMInstance"))
    assert all(o["metadata"]["namespace"].startswith("tenant-") for o in objects
               if o["kind"] in ("Pod", "ResourceQuota"))
    for count, admitted in ((1, True), (2, False)):
        write = vm_body(namespace, f"w{count}", count)
        code, decision = run_check_json(tmp_path, objects, write)
        status, body = api.create(apps_path("vminstances", namespace), write, dry_run=True)
        assert (code == 0) is decision["allowed"] is (status == 201) is admitted, (decision, body)
        if not admitted:
            assert decision["reasons"][0]["message"].split(": ", 1)[1] in body["message"]


def test_metrics_show_the_cache_and_its_watch_lag(cluster, api) -> None:
    for replica in (0, 1):
        assert webhook_metric(cluster, replica, 'cozyrender_webhook_cache_objects{kind="Tenant"}') >= 1
        assert webhook_metric(cluster, replica, 'cozyrender_webhook_watch_lag_seconds_count{kind="Tenant"}') >= 1
        assert webhook_metric(cluster, replica, "cozyrender_webhook_ready") == 1


def test_a_cache_whose_api_server_goes_away_turns_unready(tmp_path_factory) -> None:
    """After the first sync, watches and relists that keep failing make the
    cache stale: not ready, saying why (its own control plane, stopped here)."""
    from conftest import _control_plane

    from cozyrender.budgets.live import LiveIndex
    from cozyrender.kube.client import WATCHED, make_client
    from cozyrender.webhook.cache import Cache
    from cozyrender.webhook.metrics import Metrics

    plane = _control_plane(tmp_path_factory, 0)  # its own (issue 36): this test stops kube-apiserver
    try:
        kinds = tuple(w for w in WATCHED if w.kind in ("VMInstance", "Namespace"))
        cache = Cache(lambda: make_client(str(plane.kubeconfig), timeout=2.0), LiveIndex(), threading.Lock(),
                      Metrics(), server_timeout=5, read_margin=2, watched=kinds, stale_after=2)
        cache.start()
        try:
            deadline = time.monotonic() + 20
            while not cache.ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert cache.ready() and cache.not_ready_reason() == ""
            plane.stop_process("kube-apiserver")
            deadline = time.monotonic() + 30
            while cache.ready() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not cache.ready()
            assert "has failed for more than 2 s, so the cache may be stale" in cache.not_ready_reason()
        finally:
            cache.stop()
    finally:
        plane.stop()
