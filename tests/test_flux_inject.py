"""Injection: the postRenderers the webhook sets on Cozystack tenant HelmReleases.

Releases are shaped as cozystack-api writes them at Cozystack 3c780acd
(pkg/registry/apps/application/rest.go: name `tenant-<name>` in the parent's
namespace, `apps.cozystack.io/` labels, chartRef ExternalArtifact
`cozystack-tenant-application-default-tenant` in `cozy-system`, valuesFrom the
Secret `cozystack-values`, values = the Tenant's spec, RetryOnFailure), and
tenant-root's as cozystack-basics writes it (templates/tenant-root.yaml).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import flux
from cozyrender.flux import inject
from cozyrender.flux.inject import InjectError, ParentState
from cozyrender.webhook.mutate import mutate

ROOT = Path(__file__).resolve().parent.parent
TENANT = ROOT / "charts" / "tenant"
PARENT_VALUES = yaml.safe_load((ROOT / "examples" / "flux" / "parent-values.yaml").read_text())


def api_release(name: str, namespace: str, spec_values: dict, **extra_spec) -> dict:
    """A tenant HelmRelease as cozystack-api writes it."""
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": f"tenant-{name}", "namespace": namespace, "labels": {
            "apps.cozystack.io/application.kind": "Tenant",
            "apps.cozystack.io/application.group": "apps.cozystack.io",
            "apps.cozystack.io/application.name": name}},
        "spec": {
            "chartRef": {"kind": "ExternalArtifact", "name": "cozystack-tenant-application-default-tenant",
                         "namespace": "cozy-system"},
            "interval": "5m0s", "maxHistory": 5,
            "install": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1m0s"}},
            "upgrade": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1m0s"}},
            "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}],
            "values": spec_values, **extra_spec}}


SPEC = {"gpu": {"vgpu": True}, "resourceQuotas": {"cpu": "8", "a100.gpuclass.cozystack.io/devices": 2}}
PARENT = ParentState(PARENT_VALUES, vgpu_label="true")


def test_same_patches_as_cozyrender_flux(tmp_path):
    """The webhook's entry is what `cozyrender flux` prints for the same inputs."""
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    done = subprocess.run(
        [sys.executable, "-m", "cozyrender", "flux", "tenant-a", str(TENANT), "-n", "tenant-root",
         "-f", str(ROOT / "examples" / "flux" / "parent-values.yaml"), "-f", str(spec_file), "-o", "json"],
        capture_output=True, text=True, check=True)
    expected = json.loads(done.stdout)["postRenderers"]
    assert expected and flux.is_owned(expected[0])
    assert inject.postrenderers_for(api_release("a", "tenant-root", SPEC), PARENT, TENANT) == expected


def test_ours_first_users_kept_old_ours_replaced():
    user = {"kustomize": {"patches": [{"target": {"kind": "Namespace"}, "patch": "- op: add\n"}]}}
    stale = {"kustomize": {"patches": [{"target": {"kind": "Secret"}, "patch": flux.MARKER + "\n[]"}]}}
    release = api_release("a", "tenant-root", SPEC, postRenderers=[stale, user])
    result = inject.injected(release, PARENT, TENANT)
    assert len(result) == 2 and flux.is_owned(result[0]) and result[0] != stale and result[1] == user


def test_tenant_root_release_is_recognised():
    root = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "tenant-root", "namespace": "tenant-root", "labels": {
                "apps.cozystack.io/application.kind": "Tenant",
                "apps.cozystack.io/application.name": "tenant-root"}},
            "spec": {"chartRef": {"kind": "ExternalArtifact",
                                  "name": "cozystack-tenant-application-default-tenant",
                                  "namespace": "cozy-system"},
                     "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}]}}
    assert inject.is_tenant_release(root)
    unlabelled = {**root, "metadata": {"name": "tenant-root", "namespace": "tenant-root"}}
    assert inject.is_tenant_release(unlabelled)
    values = {"_cluster": {"root-host": "example.org", "gpu-vgpu": True},
              "_namespace": {"host": "example.org"}}
    # tenant-root's Namespace and values Secret come from cozystack-basics (post-rendered
    # by Helm there): the root release renders nothing the rules change, so no entry.
    assert inject.postrenderers_for(root, ParentState(values, vgpu_label=None), TENANT) == []
    with pytest.raises(InjectError, match="not in the namespace"):
        inject.postrenderers_for(root, ParentState(None), TENANT)


def test_other_objects_are_not_tenant_releases():
    other = api_release("a", "tenant-root", SPEC)
    other["metadata"]["labels"]["apps.cozystack.io/application.kind"] = "VMInstance"
    assert not inject.is_tenant_release(other)
    assert not inject.is_tenant_release({**api_release("a", "tenant-root", SPEC),
                                         "apiVersion": "helm.toolkit.fluxcd.io/v2beta1"})


@pytest.mark.parametrize("parent, release, message", [
    (ParentState(None), api_release("a", "tenant-root", SPEC), "not in the namespace"),
    (ParentState(None, values_problem="values.yaml is not YAML"), api_release("a", "tenant-root", SPEC),
     "is not YAML"),
    (ParentState(PARENT_VALUES, namespace_found=False), api_release("a", "tenant-root", SPEC),
     "is not found"),
    (ParentState(PARENT_VALUES, vgpu_label="false"), api_release("a", "tenant-root", SPEC),
     "not reconciled yet"),
    (ParentState({"_namespace": {"host": "x"}}, vgpu_label="true"), api_release("a", "tenant-root", SPEC),
     "not reconciled yet"),
    (PARENT, api_release("a", "tenant-root", SPEC, valuesFrom=[{"kind": "ConfigMap", "name": "x"}]),
     "not read by cozyrender"),
    (PARENT, api_release("a", "tenant-root", SPEC, valuesFrom=[
        {"kind": "Secret", "name": "cozystack-values", "targetPath": "a.b"}]), "targetPath"),
    (PARENT, api_release("a", "tenant-root", {"resourceQuotas": "lots"}), "tenant-root/tenant-a"),
    (PARENT, api_release("a-b", "tenant-root", SPEC), "release name must be"),
])
def test_missing_or_bad_inputs_fail_closed(parent, release, message):
    with pytest.raises(InjectError, match=message):
        inject.postrenderers_for(release, parent, TENANT)


# ---------------------------------------------------------------- the admission answer

def review(obj: dict, operation: str = "CREATE") -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": operation, "namespace": obj["metadata"]["namespace"],
                        "object": obj}}


def apply_patch(obj: dict, response: dict) -> dict:
    """The API server's side: apply the response's JSON Patch (add/replace of /spec/postRenderers)."""
    if "patch" not in response:
        return obj
    out = json.loads(json.dumps(obj))
    for op in json.loads(base64.b64decode(response["patch"])):
        assert op["op"] in ("add", "replace") and op["path"] == "/spec/postRenderers"
        out["spec"]["postRenderers"] = op["value"]
    return out


def test_mutate_sets_postrenderers_and_is_idempotent():
    release = api_release("a", "tenant-root", SPEC)
    answer = mutate(review(release), lambda ns: PARENT, TENANT)["response"]
    assert answer["allowed"] and answer["uid"] == "u-1" and answer["patchType"] == "JSONPatch"
    mutated = apply_patch(release, answer)
    assert mutated["spec"]["postRenderers"] == inject.postrenderers_for(release, PARENT, TENANT)
    again = mutate(review(mutated, "UPDATE"), lambda ns: PARENT, TENANT)["response"]
    assert again["allowed"] and "patch" not in again


def test_mutate_refuses_with_the_reason():
    answer = mutate(review(api_release("a", "tenant-root", SPEC)), lambda ns: ParentState(None),
                    TENANT)["response"]
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"]["message"].startswith("cozyrender: HelmRelease tenant-root/tenant-a")
    assert "cozystack-values" in answer["status"]["message"]


def test_mutate_passes_other_objects_and_deletes():
    def never(ns):
        raise AssertionError("no parent state is read")
    other = api_release("a", "tenant-root", SPEC)
    other["metadata"]["labels"] = {}
    assert mutate(review(other), never, TENANT)["response"] == {"uid": "u-1", "allowed": True}
    deleting = review(api_release("a", "tenant-root", SPEC), "DELETE")
    assert mutate(deleting, never, TENANT)["response"]["allowed"] is True
    assert mutate({"kind": "AdmissionReview"}, never, TENANT)["response"]["allowed"] is False


@settings(max_examples=20, deadline=None)
@given(quotas=st.dictionaries(st.sampled_from(["cpu", "memory", "gpuclass.cozystack.io/devices",
                                               "h100.gpuclass.cozystack.io/devices"]),
                              st.sampled_from([1, "2"]), max_size=3),
       requested=st.booleans(), parent_vgpu=st.booleans(), cluster=st.sampled_from([None, True, False]),
       user=st.booleans())
def test_property_injection_is_cozyrender_flux_and_idempotent(quotas, requested, parent_vgpu, cluster, user):
    values = {"_namespace": {"host": "example.org", **({"vgpu": True} if parent_vgpu else {})},
              "_cluster": {"root-host": "example.org",
                           **({"gpu-vgpu": cluster} if cluster is not None else {})}}
    spec = {"resourceQuotas": quotas, "gpu": {"vgpu": requested}}
    mine = [{"kustomize": {"images": [{"name": "x", "newTag": "1"}]}}]
    release = api_release("b", "tenant-root", spec, **({"postRenderers": mine} if user else {}))
    parent = ParentState(values, vgpu_label="true" if parent_vgpu else None)
    raw = flux.render_raw(TENANT, "tenant-b", "tenant-root", inline=[values, spec])
    expected = flux.derive(raw).post_renderers + (mine if user else [])
    mutated = apply_patch(release, mutate(review(release), lambda ns: parent, TENANT)["response"])
    assert mutated["spec"].get("postRenderers", []) == expected
    assert "patch" not in mutate(review(mutated, "UPDATE"), lambda ns: parent, TENANT)["response"]
