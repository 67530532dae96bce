"""cozyrender.flux.preview (pure): an injected entry read for what the first reconcile does.
The live half is tests/test_docs_flux_injection.py (the guide's preview, then the reconcile)."""

from __future__ import annotations

import sys

from cozyrender.flux.inject import postrenderers_for
from cozyrender.flux.preview import Change, changes, preview, text
from cozyrender.resources import data_path
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from test_flux_inject import PARENT, api_release  # noqa: E402


def entry_for(spec: dict) -> list[dict]:
    return postrenderers_for(api_release("a", "tenant-root", spec), PARENT, data_path("tenant"))


def test_a_gpu_only_tenant_loses_its_quota_and_limitrange_and_gets_its_label():
    [entry] = entry_for({"gpu": {"vgpu": True}, "resourceQuotas": {"a100.gpuclass.cozystack.io/devices": 2}})
    found = changes(entry)
    assert Change("delete", "ResourceQuota", "tenant-a", "tenant-quota") in found
    assert Change("delete", "LimitRange", "tenant-a", "tenant-range-limits") in found
    assert Change("label", "Namespace", "", "tenant-a", "namespace.cozystack.io/vgpu=true") in found
    assert Change("remove-annotation", "Namespace", "", "tenant-a", "render.cozystack.io/vgpu-requested") in found
    assert Change("rewrite-values", "Secret", "tenant-a", "cozystack-values", "values.yaml") in found
    assert not [c for c in found if c.action == "delete" and c.kind not in ("ResourceQuota", "LimitRange")]


def test_a_mixed_tenant_keeps_its_quota_without_the_budget_keys():
    [entry] = entry_for({"gpu": {"vgpu": True},
                         "resourceQuotas": {"cpu": "4", "a100.gpuclass.cozystack.io/devices": 2}})
    found = changes(entry)
    assert not [c for c in found if c.action == "delete"]
    removed = {c.detail for c in found if c.action == "remove-quota-key"}
    assert removed == {"limits.a100.gpuclass.cozystack.io/devices", "requests.a100.gpuclass.cozystack.io/devices"}


def test_release_states_and_the_summary():
    wanted = entry_for({"gpu": {"vgpu": True}, "resourceQuotas": {"a100.gpuclass.cozystack.io/devices": 2}})
    user = {"kustomize": {"patches": [{"target": {"kind": "Secret"}, "patch": "[]"}]}}
    writes = preview("tenant-root", "tenant-a", [user], [*wanted, user])
    current = preview("tenant-root", "tenant-b", wanted, wanted)
    refused = preview("tenant-root", "tenant-c", None, None, "the parent is not reconciled yet")
    assert (writes.state, current.state, refused.state) == ("writes", "current", "refused")
    assert writes.changes == changes(wanted[0])  # the user's own entry changes nothing new
    out = text([writes, current, refused])
    assert "HelmRelease tenant-root/tenant-c: cannot be computed, its next write is refused: the parent" in out
    assert out.endswith("3 tenant release(s): 1 upgraded, 1 current, 1 refused\n")
    assert "  delete             LimitRange tenant-a/tenant-range-limits" in out
