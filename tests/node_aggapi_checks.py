"""apps.cozystack.io served as on Cozystack: by an aggregated API server in a pod on the real node
(tools/aggapi, cozyrender's stand-in for cozystack-api; tools/controlplane/aggapi.py), not by
stand-in CRDs, with the webhook chart installed from the image as the other node tests install it
(`ControlPlane(node=True, aggapi=True)`, `make cluster`).

Run on tests/test_node_netpol.py's plane, which imports these tests (this module's name keeps
pytest from collecting them twice): one node plane for both saves a plane's start (about 40 s).

- the group is the APIService's, backed by the pod's Service; no CRD serves it;
- a Tenant and a VMInstance within the Tenant's GPU budget, written through kube-apiserver, are
  admitted by the webhook, called by the aggregated server's admission chain, and stored in etcd
  under the aggregated server's own prefix;
- a VMInstance past the budget is refused with the webhook's message, and nothing is stored;
- a spec against the kind's schema is refused by the aggregated server itself (422, the field named);
- without its client certificate the aggregated server cannot call the webhook (which requires
  one: `clientAuth`), and the write is refused (fail closed); given it back, the same write is
  admitted. Last in the module: it restarts the aggregated server.

The budget examples are test_webhook_live's (a100 class, budget 2, 2 admitted, 3 refused).
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request
from pathlib import Path

from kubeapi import KubeAPI, apps_path
from test_webhook_live import A100, make_tenant, stored, vm_body

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))

import aggapi  # noqa: E402

GPU = "nvidia.com/GA100"
DENIED = 'admission webhook "budgets.cozyrender.io" denied the request'


def tenant_with_budget(plane, api: KubeAPI, name: str) -> str:
    """A tenant with budget 2 of the a100 class, once every webhook pod's cache holds it."""
    from test_node_cluster import wait_cached_tenant

    namespace = make_tenant(api, name, {A100: 2})
    wait_cached_tenant(plane, namespace)
    return namespace


def etcd_keys(plane, prefix: str) -> list[str]:
    """The keys under `prefix` in the plane's etcd (its v3 JSON gateway)."""
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    request = urllib.request.Request(f"http://127.0.0.1:{plane.ports['etcd']}/v3/kv/range", method="POST",
                                     data=json.dumps({"key": b64(prefix), "range_end": b64(end),
                                                      "keys_only": True}).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.loads(response.read())
    return [base64.b64decode(kv["key"]).decode() for kv in body.get("kvs", [])]


def test_the_apps_group_is_served_by_the_aggregated_server_in_a_pod(plane, api):
    service = json.loads(plane.kubectl("get", "apiservice", aggapi.APISERVICE, "-o", "json").stdout)
    assert service["spec"]["service"] == {"name": "cozystack-api", "namespace": "cozy-system", "port": 443}
    assert {c["type"]: c["status"] for c in service["status"]["conditions"]}["Available"] == "True"
    crds = json.loads(plane.kubectl("get", "crd", "-o", "json").stdout)["items"]
    assert [crd["metadata"]["name"] for crd in crds if crd["spec"]["group"] == "apps.cozystack.io"] == []
    pods = json.loads(plane.kubectl("-n", "cozy-system", "get", "pods", "-l", "app=cozystack-api",
                                    "-o", "json").stdout)["items"]
    # One replica per node (aggapi.replicas), each on a node's pod network.
    assert len(pods) == aggapi.replicas(plane) and all(p["status"]["phase"] == "Running" for p in pods)
    subnets = {f"10.250.{node.subnet_octet}." for node in (plane.node, *plane.extra_nodes)}
    assert all(any(p["status"]["podIP"].startswith(net) for net in subnets) for p in pods), pods
    resources = plane.kubectl("api-resources", "--api-group=apps.cozystack.io", "-o", "name").stdout.split()
    assert sorted(resources) == ["kuberneteses.apps.cozystack.io", "kubernetesnodeses.apps.cozystack.io",
                                 "tenants.apps.cozystack.io", "vminstances.apps.cozystack.io"]


def test_a_tenant_and_a_vm_within_the_budget_are_admitted_and_stored_under_its_etcd_prefix(plane, api):
    namespace = tenant_with_budget(plane, api, "aggin")
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "fits", 2))
    assert status == 201, body
    assert [vm["metadata"]["name"] for vm in stored(api, namespace)] == ["fits"]
    keys = etcd_keys(plane, f"{aggapi.ETCD_PREFIX}/")
    assert f"{aggapi.ETCD_PREFIX}/apps.cozystack.io/tenants/tenant-root/aggin" in keys
    assert f"{aggapi.ETCD_PREFIX}/apps.cozystack.io/vminstances/{namespace}/fits" in keys
    assert etcd_keys(plane, "/registry/apps.cozystack.io/") == []


def test_a_vm_past_the_budget_is_refused_with_the_webhooks_message(plane, api):
    namespace = tenant_with_budget(plane, api, "aggover")
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "big", 3))
    assert status == 403, body
    assert DENIED in body["message"]
    assert "spec.gpus[0].count: Forbidden: exceeded GPU budget 'a100.gpuclass.cozystack.io/devices' of pool " \
           f"{namespace}: requested 3, reserved 0, carved out 0, budget 2 (3 > 2)" in body["message"]
    assert stored(api, namespace) == []


def test_a_spec_against_the_kinds_schema_is_refused_by_the_aggregated_server(plane, api):
    namespace = tenant_with_budget(plane, api, "aggschema")
    status, body = api.create(apps_path("vminstances", namespace),
                              {**vm_body(namespace, "bad", 1), "spec": {"gpus": "a100"}})
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "spec.gpus"
    assert "must be of type array" in body["message"]
    assert stored(api, namespace) == []


def test_without_its_client_certificate_the_aggregated_server_fails_closed(plane, api):
    namespace = tenant_with_budget(plane, api, "aggnocert")
    aggapi.set_client_certificate(plane, False)
    try:
        status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "one", 1))
        assert status == 500, body
        assert 'failed calling webhook "budgets.cozyrender.io"' in body["message"], body
        assert stored(api, namespace) == []
    finally:  # the plane is shared: the tests after this one need the certificate back
        aggapi.set_client_certificate(plane, True)
    status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "one", 1))
    assert status == 201, body
    assert [vm["metadata"]["name"] for vm in stored(api, namespace)] == ["one"]
