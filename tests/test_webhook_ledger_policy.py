"""Least rights for the webhook (issue 34 item 8): the chart's Role lets its
service account create and update ConfigMaps in its namespace (RBAC cannot
name shards that do not exist yet) and the chart's ValidatingAdmissionPolicy
narrows that to the ledger's shards. Against a real kube-apiserver v1.35.4,
the chart's RBAC and policies applied from `helm template`, as the webhook's
service account: the ledger (`ConfigMapShards`) writes its shards; the
callers' CA ConfigMap and any other ConfigMap are refused, in the policy's
words."""

from __future__ import annotations

import pytest
import yaml

from controller_plane import NAMESPACE, ControllerPlane, start_plane, wait_for

WEBHOOK_USER = f"system:serviceaccount:{NAMESPACE}:cozyrender-webhook"


@pytest.fixture(scope="module")
def webhook_client(tmp_path_factory):
    from cozyrender.kube.client import make_client

    plane = start_plane(tmp_path_factory)  # puts tools/controlplane on the path
    from common import client_kubeconfig

    try:
        cp = ControllerPlane(plane)
        cp.apply_chart()
        cp.create(f"/api/v1/namespaces/{NAMESPACE}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cozyrender-webhook-client-ca"},
            "data": {"ca.crt": "the callers' CA"}})
        cert, key = plane.ca.issue("webhook-client", WEBHOOK_USER, organizations=(
            "system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"), client=True)
        config = plane.dir / "webhook-sa-kubeconfig"
        config.write_text(yaml.safe_dump(client_kubeconfig(plane.server, plane.pki / "ca.crt", cert, key, "webhook")))
        client = make_client(str(config))
        wait_for(lambda: _policy_active(client), what="the ledger policy in force (policies load asynchronously)")
        yield client, cp
    finally:
        plane.stop()


def _policy_active(client) -> bool:
    """Whether a dry-run create of a ConfigMap that is no shard is refused by the policy."""
    from lightkube.core.exceptions import ApiError
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    try:
        client.create(ConfigMap(metadata=ObjectMeta(name="probe", namespace=NAMESPACE)), dry_run=True)
    except ApiError as err:
        return "ledger-only" in err.status.message
    return False


def test_the_ledger_writes_its_shards(webhook_client) -> None:
    from test_budgets_builders import vm

    from cozyrender.webhook.ledger import ConfigMapShards, Entry, identity, projection

    client, _ = webhook_client
    store = ConfigMapShards(client, NAMESPACE)
    obj = vm("tenant-acme", "v", [{"class": "a100", "count": 1}])
    entry = Entry(identity(obj), "u1", 1, projection(obj), 1.0, 61.0, "r1")
    entries, read = store.read("tenant-acme")
    assert entries == [] and read is None
    store.write("tenant-acme", [entry], read)  # created
    entries, read = store.read("tenant-acme")
    assert entries == [entry]
    store.write("tenant-acme", [], read)  # updated
    assert store.read("tenant-acme")[0] == []


def test_the_callers_ca_and_other_configmaps_are_refused(webhook_client) -> None:
    from lightkube.core.exceptions import ApiError
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    client, cp = webhook_client
    ca = client.get(ConfigMap, "cozyrender-webhook-client-ca", namespace=NAMESPACE)  # reading is allowed
    ca.data = {"ca.crt": "an attacker's CA"}
    with pytest.raises(ApiError) as refused:
        client.replace(ca)
    assert refused.value.status.code == 403
    assert "the webhook writes only its ledger's ConfigMaps" in refused.value.status.message
    for name, labels in (("other", {"app.kubernetes.io/component": "ledger"}),  # not a shard's name
                         ("cozyrender-ledger-tenant-x", {})):  # a shard's name, not labelled as one
        with pytest.raises(ApiError) as refused:
            client.create(ConfigMap(metadata=ObjectMeta(name=name, namespace=NAMESPACE, labels=labels),
                                    data={"a": "b"}))
        assert refused.value.status.code == 403, name
    with pytest.raises(ApiError) as refused:
        client.delete(ConfigMap, "cozyrender-ledger-tenant-acme", namespace=NAMESPACE)
    assert refused.value.status.code == 403  # RBAC grants no delete either
    status, kept = cp.api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/cozyrender-webhook-client-ca")
    assert status == 200 and kept["data"] == {"ca.crt": "the callers' CA"}
