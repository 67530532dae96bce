"""Ledger entries carry what a decision reads and nothing else, within the
documented bound (issue 34 item 8): over generated Tenants (any
resourceQuotas keys and values, vGPU flags, fields the rules never read) and
workloads (many class entries, fields inside them, node groups with long
names), the projection reads back to the same declaration or reservations
as the object itself, holds no other field, and a write whose entry would
pass MAX_ENTRY_BYTES (4,096 B, the bound docs/guides/in-the-cluster.md
states as 4 KiB) is refused before anything is written, while every entry
written is within it."""

from __future__ import annotations

import json
import threading

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_budgets_builders import classes, kubernetes, node_group, nodes, tenant, vm
from test_webhook_admission import A100, review

from cozyrender.budgets.live import LiveIndex
from cozyrender.budgets.model import parse_declaration, parse_workload
from cozyrender.kube.shape import ShapeError
from cozyrender.webhook.ledger import MAX_ENTRY_BYTES, Arbiter, Entry, MemoryShards, identity, projection
from cozyrender.webhook.metrics import Metrics

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STATE = classes("a100", "h100") + [tenant("acme", quotas={A100: 10**6, "cpu": "1000000"})]

keys = st.one_of(
    st.sampled_from([A100, "h100.gpuclass.cozystack.io/devices", "gpuclass.cozystack.io/devices", "cpu", "memory",
                     "requests.cpu", "limits.memory", "nvidia.com/gpu", "services.loadbalancers"]),
    st.text(st.characters(min_codepoint=45, max_codepoint=122), min_size=1, max_size=80),
)
values = st.one_of(st.integers(-3, 10**6), st.sampled_from(["2", "500m", "1Gi", "0", "-1", "x", "1e3", "", "2.5"]),
                   st.text(max_size=40))
junk = st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=200), max_size=3)


@st.composite
def tenants(draw) -> dict:
    quotas = draw(st.dictionaries(keys, values, max_size=40))
    obj = tenant(draw(st.sampled_from(["t", "team"])), "tenant-acme", quotas=quotas,
                 vgpu=draw(st.sampled_from([None, True, False, "true", "yes"])))
    obj["spec"].update(draw(junk))  # fields the rules never read (host, notes, ...)
    return obj


@st.composite
def workloads(draw) -> dict:
    entries = draw(st.lists(st.fixed_dictionaries(
        {"class": st.sampled_from(["a100", "h100"]), "count": st.integers(0, 4)},
        optional={"devices": st.lists(st.text(max_size=30), max_size=3), "junk": st.text(max_size=300)}),
        max_size=60))
    shape = draw(st.sampled_from(["vm", "pool", "k8s"]))
    if shape == "vm":
        return vm("tenant-acme", "w", entries)
    if shape == "pool":
        return nodes("tenant-acme", "w", entries, max_replicas=draw(st.integers(0, 5)))
    groups = {draw(st.text(min_size=1, max_size=150)): node_group(entries, draw(st.integers(0, 5)))
              for _ in range(draw(st.integers(1, 3)))}
    return kubernetes("tenant-acme", "w", groups)


def _declaration(obj: dict):
    try:
        d = parse_declaration(obj)
    except ShapeError as err:
        return ("unreadable", str(err).split(":")[-1])
    return (d.namespace, d.budgets, d.ordinary, d.requests_vgpu)


def _reservations(obj: dict):
    try:
        return parse_workload(obj).reservations
    except ShapeError:
        return "unreadable"


def _only(kept: dict) -> set:
    return set(kept) | {f"spec.{key}" for key in kept["spec"]} | {f"metadata.{key}" for key in kept["metadata"]}


@SETTINGS
@given(tenants())
def test_a_tenants_entry_reads_as_the_tenant_and_holds_nothing_else(obj) -> None:
    kept = projection(obj)
    if _declaration(obj)[0] != "unreadable":  # (a Tenant the rules cannot read is refused 422: no entry is made)
        assert _declaration(kept) == _declaration(obj)
    assert _only(kept) <= {"apiVersion", "kind", "metadata", "spec", "metadata.name", "metadata.namespace",
                           "spec.resourceQuotas", "spec.gpu"}
    assert kept["spec"].get("gpu", {}).keys() <= {"vgpu"}


@SETTINGS
@given(workloads())
def test_a_workloads_entry_reserves_as_the_workload_and_holds_nothing_else(obj) -> None:
    kept = projection(obj)
    assert _reservations(kept) == _reservations(obj)
    text = json.dumps(kept)
    assert "junk" not in text and "devices" not in text
    for name in (obj["spec"].get("nodeGroups") or {}):
        assert json.dumps(name) not in text or name in ("g0", "g1", "g2")


def _big_tenant() -> dict:
    return tenant("team", "tenant-acme", quotas={f"example.com/{'k' * 60}-{i}": "1" for i in range(60)})


def _big_cluster() -> dict:
    return kubernetes("tenant-acme", "w", {f"group-{i}": node_group([{"class": "a100", "count": 1}] * 60, 2)
                                           for i in range(3)})


@SETTINGS
@given(st.one_of(tenants(), workloads()))
@example(_big_tenant())  # about 4.9 KB of keys a decision reads: refused, nothing written
@example(_big_cluster())
@example(vm("tenant-acme", "w", [{"class": "a100", "count": 1}]))  # small: admitted and written
def test_the_bound_stated_is_the_bound_enforced(obj) -> None:
    store = MemoryShards()
    judge = Arbiter(LiveIndex(STATE), threading.Lock(), Metrics(), ledger=store)
    size = len(json.dumps([Entry(identity(obj), "", 0, projection(obj), 0.0, 0.0, "").as_dict()],
                          separators=(",", ":"), sort_keys=True))
    out = judge(review(obj))["response"]
    if size > MAX_ENTRY_BYTES:
        assert not out["allowed"] and f"more than {MAX_ENTRY_BYTES} bytes" in out["status"]["message"]
        assert store.entries() == []
    assert all(entry.size() <= MAX_ENTRY_BYTES for entry in store.entries())
