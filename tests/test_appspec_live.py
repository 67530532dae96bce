"""Issue 27 item 1 against the real API server: the stand-in CRDs keep a
write's spec as written, so the webhook meets the app schema
(cozyrender.appspec) whatever field validation the client asks for; a
`spec.gpu` typo and a Tenant's `resourceQuota` are refused naming the field
meant, by kubectl (strict, its default) and by a client asking the server to
ignore unknown fields."""

from __future__ import annotations

import json

import pytest

from kubeapi import KubeAPI, apps_path

APPS = "apps.cozystack.io/v1alpha1"


@pytest.fixture(scope="module")
def api(cluster) -> KubeAPI:
    api = KubeAPI(cluster)
    status, body = api.create(apps_path("tenants", "tenant-root"), {
        "apiVersion": APPS, "kind": "Tenant", "metadata": {"name": "schema", "namespace": "tenant-root"},
        "spec": {"resourceQuotas": {"a100.gpuclass.cozystack.io/devices": 1}}})
    assert status in (201, 409), body
    status, body = api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "tenant-schema"}})
    assert status in (201, 409), body
    return api


TYPO_VM = {"apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": "typo", "namespace": "tenant-schema"},
           "spec": {"gpu": [{"class": "a100", "count": 9}]}}


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
def test_a_spec_gpu_typo_is_refused_whatever_validation_the_client_asks(api, validation):
    status, body = api.request("POST", apps_path("vminstances", "tenant-schema") + f"?fieldValidation={validation}",
                               TYPO_VM)
    assert status == 403, body
    [cause] = [c for c in body["details"]["causes"] if c["field"] == "spec.gpu"]
    assert cause["message"].endswith("unknown field; did you mean spec.gpus?"), cause
    status, listed = api.get(apps_path("vminstances", "tenant-schema"))
    assert status == 200 and listed["items"] == []


def test_kubectl_apply_of_a_tenant_with_resource_quota_is_refused_naming_resource_quotas(cluster, api, tmp_path):
    manifest = tmp_path / "tenant.yaml"
    manifest.write_text(json.dumps({"apiVersion": APPS, "kind": "Tenant",
                                    "metadata": {"name": "quota", "namespace": "tenant-root"},
                                    "spec": {"resourceQuota": {"cpu": 4}}}))
    proc = cluster.kubectl("apply", "-f", str(manifest), check=False)
    assert proc.returncode != 0
    assert "spec.resourceQuota: unknown field; did you mean spec.resourceQuotas?" in proc.stderr, proc.stderr
