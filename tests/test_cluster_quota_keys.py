"""What kube-apiserver v1.35.4 answers to a ResourceQuota that carries a GPU
budget key, in every form a chart could render it: what Helm meets without
the post-renderer (Cozystack's chart renders `limits.<key>` and
`requests.<key>` for every key of resourceQuotas). The answers are recorded in
tests/data/cluster/resourcequota-budget-keys.yaml and compared with the live
server on every run; COZYRENDER_UPDATE_GOLDEN=1 rewrites the file (review it).

Beside each answer, the test checks what cozyrender says of the same key, so
the record shows where the server's acceptance is an unenforced promise that
the post-renderer removes, and where the server refuses outright."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cozyrender.keys import declared_in_budget_domain

from kubeapi import KubeAPI

DATA = Path(__file__).resolve().parent / "data" / "cluster" / "resourcequota-budget-keys.yaml"

KEYS = [
    "gpuclass.cozystack.io/devices",
    "a100.gpuclass.cozystack.io/devices",
    "requests.a100.gpuclass.cozystack.io/devices",
    "limits.a100.gpuclass.cozystack.io/devices",
    "requests.gpuclass.cozystack.io/devices",
    "limits.gpuclass.cozystack.io/devices",
    "A100.gpuclass.cozystack.io/devices",
    "requests.A100.gpuclass.cozystack.io/devices",
    "a100.gpuclass.cozystack.io/memory",
    "x.y.gpuclass.cozystack.io/devices",
    "a_100.gpuclass.cozystack.io/devices",
    "a100.gpuclass.cozystack.io",
    "gpuclass.cozystack.io",
    "-a100.gpuclass.cozystack.io/devices",
    "a100.GPUCLASS.cozystack.io/devices",
    "requests.a100.gpuclass.cozystack.io/devices/x",
    "count/a100.gpuclass.cozystack.io",
]
VALUES = ["4", "4000m", "1.5", "0", "-1"]


def _answer(api: KubeAPI, key: str, value: str, index: int) -> dict:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": f"q{index}"},
            "spec": {"hard": {key: value}}}
    status, answer = api.create("/api/v1/namespaces/quota-keys/resourcequotas?dryRun=All", body)
    if status in (200, 201):
        return {"accepted": True}
    causes = (answer.get("details") or {}).get("causes") or []
    return {"accepted": False, "status": status,
            "causes": sorted({cause.get("message", "") for cause in causes}) or [answer.get("message", "")]}


@pytest.fixture(scope="module")
def api(apiserver):
    apiserver.kubectl("create", "namespace", "quota-keys")
    return KubeAPI(apiserver)


def test_the_servers_answers_match_the_record(api):
    observed = []
    index = 0
    for key in KEYS:
        for value in VALUES:
            index += 1
            observed.append({"key": key, "value": value, **_answer(api, key, value, index),
                             "cozyrender_budget_domain": declared_in_budget_domain(key)})
    if os.environ.get("COZYRENDER_UPDATE_GOLDEN"):
        DATA.parent.mkdir(parents=True, exist_ok=True)
        header = ("# What kube-apiserver v1.35.4 answers to a ResourceQuota spec.hard carrying each key and value\n"
                  "# (dry run). Written by tests/test_cluster_quota_keys.py with COZYRENDER_UPDATE_GOLDEN=1.\n")
        DATA.write_text(header + yaml.safe_dump(observed, sort_keys=False, width=200))
        pytest.fail(f"wrote {DATA}; review it and rerun without COZYRENDER_UPDATE_GOLDEN")
    assert DATA.exists(), f"{DATA} is missing: run with COZYRENDER_UPDATE_GOLDEN=1 to write it"
    assert observed == yaml.safe_load(DATA.read_text())


def test_every_budget_key_the_server_accepts_is_one_cozyrender_keeps_out_of_quotas(api):
    """The server stores these keys but no quota evaluator enforces them: an
    unenforced promise. Every accepted form is in cozyrender's budget domain,
    so the post-renderer removes it from the rendered quota. (`count/<r>.<group>`
    is an object-count key for a resource of that API group, not a budget.)"""
    record = yaml.safe_load(DATA.read_text())
    accepted = {entry["key"] for entry in record if entry["accepted"] and not entry["key"].startswith("count/")}
    assert accepted, "the server accepts some budget-key forms; the record says none"
    assert all(declared_in_budget_domain(key) for key in accepted)
