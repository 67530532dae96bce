"""The vGPU license copier against a real kube-apiserver v1.35.4, running as
the chart's `cozyrender-controller` service account under the chart's RBAC
and ValidatingAdmissionPolicy: copies follow entitlement flips across a
depth-3 tenant tree (tenant-root -> tenant-a -> tenant-a-b), survive
tampering, follow the source's rotation, leave a same-named foreign Secret
alone, and never appear where they are not entitled: a watch of every
Secret from the start records every copy event, and none is in a namespace
that was not entitled at the time."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time

import pytest

from controller_plane import ControllerPlane, gpuclass, start_plane, wait_for
from kubeapi import GPUCLASSES

COPY = "vgpu-license-a100-4c"
SOURCE = "/api/v1/namespaces/cozy-system/secrets/nls-token"
LABEL = "namespace.cozystack.io/vgpu"
TREE = ("tenant-root", "tenant-a", "tenant-a-b")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class SecretLog:
    """Every watch event of a Secret named like a copy, with the time it arrived."""

    def __init__(self, plane) -> None:
        from lightkube import Client, KubeConfig
        from lightkube.resources.core_v1 import Secret

        self.events: list[tuple[float, str, str, str]] = []  # (time, event, namespace, name)
        self.client = Client(KubeConfig.from_file(str(plane.kubeconfig)))
        self._stop = threading.Event()

        def run():
            while not self._stop.is_set():
                try:
                    for event, obj in self.client.watch(Secret, namespace="*", server_timeout=30):
                        if obj.metadata.name.startswith("vgpu-license-"):
                            self.events.append((time.monotonic(), event, obj.metadata.namespace, obj.metadata.name))
                        if self._stop.is_set():
                            return
                except Exception:  # noqa: BLE001 - the plane stopping
                    time.sleep(0.2)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.client.close()


# Own plane (issue 36): a watch of every Secret from the start sees no copy in any other namespace.
@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    plane = start_plane(tmp_path_factory, namespaces=("cozy-system", "cozyrender-system"))
    controllers = ControllerPlane(plane)
    log = None
    try:
        log = SecretLog(plane)
        time.sleep(1)  # the log's watch is open before anything is created
        controllers.log = log
        for namespace, value in (("tenant-root", "true"), ("tenant-a", "true"), ("tenant-a-b", "true"),
                                 ("tenant-z", "false"), ("other", None), ("tenant-c", None)):
            labels = {LABEL: value} if value else {}
            controllers.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace, "labels": labels}})
        controllers.apply_chart()
        # A tenant's own Secret of the copy's name, before tenant-c is entitled.
        controllers.create("/api/v1/namespaces/tenant-c/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": COPY}, "data": {"token": b64("tenant's own")}})
        controllers.create("/api/v1/namespaces/cozy-system/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nls-token"}, "data": {"token": b64("T1")}})
        controllers.create(GPUCLASSES, gpuclass("a100-4c", "nvidia.com/GRID_A100-4C", "vgpu", license={
            "secretRef": {"namespace": "cozy-system", "name": "nls-token"}, "featureType": 4}))
        controllers.start("copier", "licenses")
        yield controllers
    finally:
        if log is not None:
            log.stop()
        plane.stop()


def copy_in(cp, namespace: str) -> dict | None:
    status, obj = cp.api.get(f"/api/v1/namespaces/{namespace}/secrets/{COPY}")
    return obj if status == 200 else None


def token(obj: dict | None) -> str | None:
    return base64.b64decode(obj["data"]["client_configuration_token.tok"]).decode() if obj else None


def ours(obj: dict | None) -> bool:
    return bool(obj) and (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == \
        "cozyrender-license-copier"


def set_label(cp, namespace: str, value: str | None) -> float:
    cp.patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {LABEL: value}}})
    return time.monotonic()


def test_copies_reach_every_entitled_namespace_and_no_other(cp):
    wait_for(lambda: all(token(copy_in(cp, ns)) == "T1" for ns in TREE), what="copies in the tree")
    copy = copy_in(cp, "tenant-a-b")
    assert copy["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "cozyrender-license-copier",
                                          "gpuclass.cozystack.io/class": "a100-4c"}
    assert copy["type"] == "Opaque" and sorted(copy["data"]) == ["client_configuration_token.tok", "gridd.conf"]
    assert "FeatureType=4\n" in base64.b64decode(copy["data"]["gridd.conf"]).decode()
    assert copy_in(cp, "tenant-z") is None and copy_in(cp, "other") is None
    assert not ours(copy_in(cp, "tenant-c"))


def test_revocation_at_the_root_empties_the_subtree_and_returns(cp):
    wait_for(lambda: all(copy_in(cp, ns) for ns in TREE), what="copies in the tree")
    revoked = set_label(cp, "tenant-root", "false")  # the platform's gpu.vgpu turned off
    wait_for(lambda: not any(copy_in(cp, ns) for ns in TREE), step=0.05, what="every copy of the subtree deleted")
    took = time.monotonic() - revoked
    print(f"\nrevocation across the depth-3 subtree: {took:.2f} s")
    assert took < 5  # the stated bound (docs/reference/license-contract.md): one watch event, one pass
    back = set_label(cp, "tenant-root", "true")
    wait_for(lambda: all(token(copy_in(cp, ns)) == "T1" for ns in TREE), step=0.05, what="copies back")
    print(f"re-entitlement: {time.monotonic() - back:.2f} s")
    # A middle level turned off: its subtree loses copies, the root keeps its own.
    set_label(cp, "tenant-a", "false")
    wait_for(lambda: not copy_in(cp, "tenant-a") and not copy_in(cp, "tenant-a-b"), what="tenant-a's subtree")
    assert copy_in(cp, "tenant-root")
    set_label(cp, "tenant-a", "true")
    wait_for(lambda: all(copy_in(cp, ns) for ns in TREE), what="copies back")


def test_tampered_copies_are_restored(cp):
    wait_for(lambda: all(copy_in(cp, ns) for ns in TREE), what="copies in the tree")
    edited = copy_in(cp, "tenant-a")
    edited["data"]["client_configuration_token.tok"] = b64("stolen")
    edited["data"]["gridd.conf"] = b64("FeatureType=2\n")
    status, _ = cp.api.replace(f"/api/v1/namespaces/tenant-a/secrets/{COPY}", edited)
    assert status == 200
    cp.delete(f"/api/v1/namespaces/tenant-a-b/secrets/{COPY}")
    wait_for(lambda: token(copy_in(cp, "tenant-a")) == "T1" and copy_in(cp, "tenant-a-b"), what="restored copies")
    assert "FeatureType=4" in base64.b64decode(copy_in(cp, "tenant-a")["data"]["gridd.conf"]).decode()


def test_rotation_reaches_every_copy(cp):
    cp.patch(SOURCE, {"data": {"token": b64("T2")}})
    wait_for(lambda: all(token(copy_in(cp, ns)) == "T2" for ns in TREE), what="rotated copies")


def test_a_foreign_secret_of_the_copys_name_is_never_touched(cp):
    before = copy_in(cp, "tenant-c")
    set_label(cp, "tenant-c", "true")  # entitled now: the copier wants a copy there
    time.sleep(3)  # a negative: give the copier several passes to (wrongly) act
    after = copy_in(cp, "tenant-c")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert base64.b64decode(after["data"]["token"]).decode() == "tenant's own" and not ours(after)
    set_label(cp, "tenant-c", "false")
    time.sleep(2)
    assert copy_in(cp, "tenant-c")["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_the_admission_policy_holds_the_copier_to_the_contract(cp, kubectl):
    """Even a buggy copier cannot write where it must not: the API server
    refuses its service account a copy in a namespace not entitled, a
    Secret not named and labelled as a copy, and any change to a Secret it
    did not write."""
    def as_copier(*args, input=None):
        return subprocess.run([str(kubectl), f"--kubeconfig={cp.kubeconfig}", *args], input=input,
                              capture_output=True, text=True)

    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": COPY, "labels": {
        "app.kubernetes.io/managed-by": "cozyrender-license-copier"}}, "data": {"token": b64("x")}}
    refused = as_copier("create", "-n", "tenant-z", "-f", "-", input=json.dumps(body))
    assert refused.returncode != 0 and "labelled namespace.cozystack.io/vgpu=true" in refused.stderr
    unlabelled = dict(body, metadata={"name": "vgpu-license-x"})
    refused = as_copier("create", "-n", "tenant-root", "-f", "-", input=json.dumps(unlabelled))
    assert refused.returncode != 0 and "named vgpu-license-*" in refused.stderr
    refused = as_copier("delete", "secret", "-n", "tenant-c", COPY)
    assert refused.returncode != 0 and "only the Secrets it wrote" in refused.stderr
    refused = as_copier("delete", "secret", "-n", "cozy-system", "nls-token")
    assert refused.returncode != 0 and "only the Secrets it wrote" in refused.stderr


def test_no_copy_ever_appeared_where_it_was_not_entitled(cp):
    """Checked last, over the whole module's history of Secret events."""
    events = cp.log.events
    assert any(e[1] == "ADDED" and e[2] == "tenant-a-b" for e in events)
    for _, event, namespace, name in events:
        assert namespace not in ("tenant-z", "other"), (event, namespace, name)
    # tenant-c only ever held the tenant's own Secret: one ADDED (its creation), no change.
    assert [e[1] for e in events if e[2] == "tenant-c"] == ["ADDED"]
