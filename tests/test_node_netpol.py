"""NetworkPolicy enforced on the real node (issue 33 item 2): kube-network-policies v0.8.0 beside the
kubelet (`ControlPlane(network_policy=True)`, as `make cluster` runs it), the webhook chart with
`networkPolicy.type: kubernetes`, its default callers (the aggregated server's pods) and a scraper
in `extraIngress`. A tenant's pod reaches neither the webhook's nor the controller's port; the API
servers do (kube-apiserver, and the aggregated server through the chart's default
`networkPolicy.callers`: an over-budget VMInstance written through it is refused with the webhook's
message); the scraper reads both ports, its unlabelled neighbour neither. The aggregated server's
own checks (tests/node_aggapi_checks.py) run here too: the production path, as `make cluster`
runs it (aggregated server, enforced policy, client certificates).

Own plane (issue 36): the enforcer decides every new connection between the node's pods, which
adds its latency to the timing tests of tests/test_node_cluster.py's plane (rollouts, kills,
pauses, drains); here it runs alone, with one node and one webhook replica.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from kubeapi import apps_path
from test_node_cluster import GPU, NAMESPACE, api, kubectl_json, make_tenant, ready, wait_cached_tenant, wait_for  # noqa: F401 (api: the fixture)
from test_webhook_live import A100, vm_body

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".cache" / "bin"
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(ROOT / "tools" / "image"))

import build  # noqa: E402
from node import NODE_NAME, SCRAPER  # noqa: E402


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    from cluster import ControlPlane

    import aggapi
    if not aggapi.image().exists():
        pytest.fail(f"{aggapi.image()} is missing: run `make aggapi`")
    plane = ControlPlane(tmp_path_factory.mktemp("node-netpol"), BIN, webhook_replicas=1, node=True, gpus={GPU: 4},
                         aggapi=True, network_policy=True)
    plane.start()
    yield plane
    plane.stop()


# Run in a probing pod: each target (address, port, HTTP path or "") reached at once, 3 s each:
# "open" (connected; with a path, the controller's metrics read), "timeout", or the error.
PROBE = """
import http.client, json, socket, sys
from concurrent.futures import ThreadPoolExecutor

def reach(target):
    host, port, path = target
    try:
        if not path:
            socket.create_connection((host, port), timeout=3).close()
            return "open"
        connection = http.client.HTTPConnection(host, port, timeout=3)
        connection.request("GET", path)
        body = connection.getresponse().read()
        return "open" if b"cozyrender_controller_leader" in body else body[:200].decode(errors="replace")
    except (socket.timeout, TimeoutError):
        return "timeout"
    except OSError as err:
        return str(err)

targets = json.loads(sys.argv[1])
with ThreadPoolExecutor(len(targets)) as pool:
    print(json.dumps(list(pool.map(reach, targets))))
"""


def probe_pod(name: str, namespace: str, labels: dict | None = None) -> dict:
    """A pod on the first node (the enforcer's) that probes when exec'd into."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": NODE_NAME, "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "probe", "image": build.image_reference(), "imagePullPolicy": "Never",
                                     "command": ["sleep", "3600"]}]}}


def probe(plane, pod: dict, targets: list[tuple[str, int, str]]) -> list[str]:
    meta = pod["metadata"]
    result = plane.kubectl("-n", meta["namespace"], "exec", meta["name"], "--", "python3", "-c", PROBE,
                           json.dumps(targets))
    return json.loads(result.stdout)


@pytest.fixture(scope="class")
def guarded(plane, api) -> dict:
    """The probing pods (a tenant's; the scraper the plane's extraIngress names and an unlabelled
    neighbour in its namespace) Running beside a webhook pod and a controller pod on the first
    node, and those two pods' addresses; the pods gone after the class (bare pods would outlive
    the test otherwise)."""
    tenant = make_tenant(api, "netpol", {A100: 1})
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SCRAPER["namespace"]}}]
    pods = {"tenant": probe_pod("probe", tenant), "scraper": probe_pod("scraper", SCRAPER["namespace"], SCRAPER["labels"]),
            "neighbour": probe_pod("neighbour", SCRAPER["namespace"])}
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": namespaces + list(pods.values())}))

    def on_the_node(name: str) -> dict | None:
        found = [p for p in kubectl_json(plane, "-n", NAMESPACE, "get", "pods", "-l", f"app.kubernetes.io/name={name}")
                 ["items"] if p["spec"].get("nodeName") == plane.node.name and ready(p)
                 and not p["metadata"].get("deletionTimestamp")]
        return found[0] if found else None

    def running() -> bool:
        return all(kubectl_json(plane, "-n", p["metadata"]["namespace"], "get", "pod", p["metadata"]["name"])
                   ["status"].get("phase") == "Running" for p in pods.values())

    try:
        wait_for("the probing pods Running", running, 60)
        webhook = wait_for("a webhook pod Ready on the first node", lambda: on_the_node("cozyrender-webhook"), 60)
        controller = wait_for("a controller pod Ready on the first node", lambda: on_the_node("cozyrender-controller"), 60)
        yield {"webhook": webhook["status"]["podIP"], "webhook-pod": webhook["metadata"]["name"],
               "controller": controller["status"]["podIP"], "namespace": tenant, **pods}
    finally:
        # The pods alone: the plane runs no namespace controller, so a namespace would stay Terminating.
        plane.kubectl("-n", tenant, "delete", "pod", "probe", check=False)
        plane.kubectl("-n", SCRAPER["namespace"], "delete", "pod", "scraper", "neighbour", check=False)


class TestNetworkPolicy:
    def test_a_tenant_pod_reaches_neither_the_webhook_nor_the_controller_and_the_api_server_does(self, plane, api, guarded):
        """The chart's NetworkPolicies as kube-network-policies enforces them: a pod in a tenant
        namespace cannot connect to the webhook pod's port (8443) nor the controller pod's metrics port
        (8080): its SYNs are dropped, and it times out. (Without the enforcer both connect, and this
        fails.) kube-apiserver, on the node (its connections to pods leave from the bridge address,
        the policy's apiServerCIDRs, and are not forwarded, so the enforcer never sees them), still
        reaches that same webhook pod through its pods/proxy, which dials the pod's address as the
        webhook calls do (those go to the endpoint a kept-alive connection was dialled to, maybe
        the other node's), and a checked write is still decided: an over-budget VMInstance is
        refused with the webhook's message."""
        webhook, controller = guarded["webhook"], guarded["controller"]
        assert probe(plane, guarded["tenant"], [(webhook, 8443, ""), (controller, 8080, ""),
                                                (controller, 8080, "/metrics")]) == ["timeout"] * 3
        proxied = plane.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/"
                                f"https:{guarded['webhook-pod']}:8443/proxy/metrics").stdout
        assert "cozyrender_webhook_decisions_total" in proxied
        namespace = guarded["namespace"]
        wait_cached_tenant(plane, namespace)
        status, body = api.create(apps_path("vminstances", namespace), vm_body(namespace, "big", 2))
        assert status == 403, body
        assert "exceeded GPU budget 'a100.gpuclass.cozystack.io/devices'" in body["message"]

    def test_the_scraper_let_in_by_extra_ingress_reads_both_and_its_unlabelled_neighbour_cannot(self, plane, guarded):
        """networkPolicy.extraIngress (the plane's: the scraper's namespace and pod labels, ports 8443
        and 8080) admits the scraper pod to the webhook pod's port and the controller's /metrics; a pod
        in the same namespace without the scraper's labels times out on both. (Without the enforcer
        the neighbour connects, and this fails.)"""
        webhook, controller = guarded["webhook"], guarded["controller"]
        targets = [(webhook, 8443, ""), (controller, 8080, "/metrics")]
        assert probe(plane, guarded["scraper"], targets) == ["open", "open"]
        assert probe(plane, guarded["neighbour"], targets) == ["timeout", "timeout"]


# The aggregated server's own tests (tests/node_aggapi_checks.py), on this plane: its pods call the
# webhook through the enforced policy. The one that takes the server's client certificate away and
# gives it back runs last.
from node_aggapi_checks import (  # noqa: E402,F401
    test_a_spec_against_the_kinds_schema_is_refused_by_the_aggregated_server,
    test_a_tenant_and_a_vm_within_the_budget_are_admitted_and_stored_under_its_etcd_prefix,
    test_a_vm_past_the_budget_is_refused_with_the_webhooks_message,
    test_the_apps_group_is_served_by_the_aggregated_server_in_a_pod,
    test_without_its_client_certificate_the_aggregated_server_fails_closed,
)
