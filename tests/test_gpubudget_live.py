"""GPUBudget, live (issue 35 item 1), on the session's shared API server:
`cozyrender controller --controllers gpubudgets` run as the chart's
Deployment runs it, as the chart's service account (its own release and
namespace here, so its RBAC, the only grants it has, and its Lease are its
own), and a tenant's reader bound only by the tenant chart's RoleBindings to
Cozystack's roles (cozystack-basics, aggregated by the real controller
manager), reached by impersonation (`Impersonate-User`/`-Group`, the
tenant's `<namespace>-view` group as Cozystack's Keycloak groups are).

The reader sees its GPUBudget's budget, carved-out, used and left follow a
VM, a sub-tenant's carve-out and its own budget, each within 10 s of the
write (a watch as the reader, bounded at 10 s); reads its sub-tenant's;
cannot read another tenant's, nor list across namespaces, nor write its
own. A write that changes no figure writes no GPUBudget. A pod the rules
cannot read is named in its tenant's GPUBudget (Ready False), no other's.
`kubectl get
gpubudgets` prints what docs/guides/tenant-budget.md shows."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from controller_plane import ControllerPlane, gpuclass, wait_for
from kubeapi import GPUCLASSES, apps_path

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "charts" / "cozyrender-webhook" / "crds" / "gpubudgets.cozystack.io.yaml"
GUIDE = ROOT / "docs" / "guides" / "tenant-budget.md"
BLOCK = re.compile(r"(<!-- live: tests/test_gpubudget_live.py[^\n]*-->\n```text\n)(.*?)```", re.S)
SYSTEM = "gpubudget-sys"  # the controller's release namespace here (its own service account and Lease)
RELEASE = "gpubudget-live"
ALL = "gpuclass.cozystack.io/devices"
HELM_OWNED = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
              "annotations": {"meta.helm.sh/release-name": "cozystack-basics",
                              "meta.helm.sh/release-namespace": "cozy-system"}}
BOUND = 10.0  # seconds from a write to the reader seeing its figures


def budgets(namespace: str) -> str:
    return f"/apis/cozystack.io/v1alpha1/namespaces/{namespace}/gpubudgets"


def tenant(name: str, namespace: str, quotas: dict) -> dict:
    return {"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"resourceQuotas": quotas}}


def vm(name: str, count: int) -> dict:
    return {"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "VMInstance", "metadata": {"name": name},
            "spec": {"gpus": [{"class": "gb-a100", "count": count}]}}


class Reader:
    """A tenant's user: every request impersonates `user` in `group`."""

    def __init__(self, api, user: str, group: str) -> None:
        self.api, self.user, self.group = api, user, group

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.api.host, self.api.port, context=self.api.context, timeout=timeout)

    def request(self, method: str, path: str, body: object = None,
                content_type: str = "application/json") -> tuple[int, dict]:
        conn = self._connection(30)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body).encode(), headers={
                "Content-Type": content_type, "Accept": "application/json",
                "Impersonate-User": self.user, "Impersonate-Group": self.group})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        return response.status, (json.loads(data) if data else {})

    def watch_until(self, namespace: str, wanted, bound: float = BOUND) -> dict:
        """The reader's GPUBudget in `namespace` once `wanted(obj)` holds: a
        list, then a watch from its resourceVersion that the API server ends
        at `bound` seconds; fails naming what was last seen."""
        end = time.monotonic() + bound
        code, listed = self.request("GET", budgets(namespace))
        assert code == 200, json.dumps(listed)
        last = next(iter(listed["items"]), None)
        if last is not None and wanted(last):
            return last
        timeout = max(1, int(end - time.monotonic() + 0.999))
        conn = self._connection(timeout + 5)
        try:
            conn.request("GET", f"{budgets(namespace)}?watch=1&allowWatchBookmarks=false&timeoutSeconds={timeout}"
                         f"&resourceVersion={listed['metadata']['resourceVersion']}", headers={
                             "Accept": "application/json", "Impersonate-User": self.user,
                             "Impersonate-Group": self.group})
            response = conn.getresponse()
            assert response.status == 200, response.read()
            for line in response:
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED"):
                    last = event["object"]
                    if wanted(last):
                        return last
        finally:
            conn.close()
        raise AssertionError(f"{self.user} did not see the wanted GPUBudget in {namespace} within {bound:g} s "
                             f"(last seen: {json.dumps((last or {}).get('status'))})")


def figures(obj: dict | None, key: str = ALL) -> tuple | None:
    rows = {row["key"]: row for row in ((obj or {}).get("status") or {}).get("keys") or []}
    row = rows.get(key)
    return None if row is None else (row["budget"], row["carvedOut"], row["used"], row["left"])


def ready(obj: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def _create_missing(cp, objects: list[dict], path_of) -> list[str]:
    """Create the objects that are not there yet, owned as cozystack-basics' release
    would own them (a later `helm install` of it adopts them); the paths created."""
    created = []
    for obj in objects:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), **HELM_OWNED["labels"]}
        meta["annotations"] = {**(meta.get("annotations") or {}), **HELM_OWNED["annotations"]}
        code, answer = cp.api.create(path_of(obj), obj)
        assert code in (201, 409), answer
        if code == 201:
            created.append(f"{path_of(obj)}/{meta['name']}")
    return created


def _helm_template(cp, chart: str, release: str, namespace: str) -> list[dict]:
    cache = str(cp.plane.dir / "helm")
    out = subprocess.run([str(ROOT / ".cache" / "bin" / "helm4"), "template", release, str(ROOT / "charts" / chart),
                          "-n", namespace], capture_output=True, text=True, check=True,
                         env={**os.environ, "HELM_CACHE_HOME": cache, "HELM_CONFIG_HOME": cache,
                              "HELM_DATA_HOME": cache}).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def cp(apiserver):
    plane = apiserver
    plane.kubectl("apply", "--server-side", "-f", str(CRD))
    plane.wait_crds_established()
    cp = ControllerPlane(plane, namespace=SYSTEM, release=RELEASE)
    # A new resource answers 429 "storage is (re)initializing" until its watch cache is up.
    wait_for(lambda: cp.api.get(budgets("default"))[0] == 200, what="the gpubudgets resource served")
    created = _create_missing(cp, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root"}}],
                              lambda obj: "/api/v1/namespaces")
    # Cozystack's tenant roles, as cozystack-basics renders them (cluster-wide: kept when there).
    roles = [doc for doc in _helm_template(cp, "cozystack-basics", "cozystack-basics", "cozy-system")
             if doc["kind"] == "ClusterRole" and doc["metadata"]["name"].startswith("cozy:tenant")]
    created += _create_missing(cp, roles, lambda obj: "/apis/rbac.authorization.k8s.io/v1/clusterroles")
    cp.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}})
    try:
        cp.apply_chart("--set", "controller.controllers=gpubudgets")
        cp.create(GPUCLASSES, gpuclass("gb-a100", "nvidia.com/GPUBUDGET_LIVE_A100"))
        # Two tenants under tenant-root and a sub-tenant, each with the tenant chart's RoleBindings.
        for name, parent, quotas in (("acme", "tenant-root", {ALL: 8, "cpu": 16}),
                                     ("ml", "tenant-acme", {ALL: 4}),
                                     ("beta", "tenant-root", {ALL: 2})):
            namespace = f"{parent}-{name}" if parent != "tenant-root" else f"tenant-{name}"
            cp.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            bindings = [doc for doc in _helm_template(cp, "tenant", f"tenant-{name}", parent)
                        if doc["kind"] == "RoleBinding" and doc["metadata"].get("namespace") == namespace]
            for binding in bindings:
                cp.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", binding)
            cp.create(apps_path("tenants", parent), tenant(name, parent, quotas))
        cp.create(apps_path("vminstances", "tenant-acme"), vm("infer", 1))
        cp.create(apps_path("vminstances", "tenant-acme-ml"), vm("train", 2))
        cp.start("gpubudget-a", "gpubudgets")
        cp.alice = Reader(cp.api, "alice", "tenant-acme-view")  # acme's reader
        cp.bob = Reader(cp.api, "bob", "tenant-acme-ml-view")  # ml's reader
        yield cp
    finally:
        if "gpubudget-a" in cp.plane.pids:
            cp.stop("gpubudget-a")
        plane.kubectl("delete", "gpubudgets", "-A", "-l", "app.kubernetes.io/managed-by=cozyrender-controller",
                      "--wait=false", check=False)
        for namespace in ("tenant-acme-ml", "tenant-acme", "tenant-beta", SYSTEM):
            plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        for name in ("acme", "beta"):
            cp.delete(apps_path("tenants", "tenant-root", name))
        cp.delete(f"{GPUCLASSES}/gb-a100")
        for kind in ("clusterrolebinding", "clusterrole"):
            plane.kubectl("delete", kind, f"{RELEASE}-controller", check=False)
        plane.kubectl("delete", "-n", "tenant-root", "rolebinding,role", f"{RELEASE}-controller-values", check=False)
        for path in reversed(created):
            cp.delete(path)


def test_the_reader_sees_budget_carved_out_used_and_left_follow_each_write(cp):
    acme = cp.alice.watch_until("tenant-acme", lambda obj: figures(obj) == (8, 4, 1, 3), bound=60)  # first pass
    assert ready(acme) and acme["metadata"]["name"] == "gpu-budget"
    assert acme["status"]["tenant"] == "acme"
    cp.create(apps_path("vminstances", "tenant-acme"), vm("more", 2))  # used
    cp.alice.watch_until("tenant-acme", lambda obj: figures(obj) == (8, 4, 3, 1))
    cp.patch(apps_path("tenants", "tenant-acme", "ml"), {"spec": {"resourceQuotas": {ALL: 3}}})  # carved out
    cp.alice.watch_until("tenant-acme", lambda obj: figures(obj) == (8, 3, 3, 2))
    cp.patch(apps_path("tenants", "tenant-root", "acme"), {"spec": {"resourceQuotas": {ALL: 10}}})  # budget
    cp.alice.watch_until("tenant-acme", lambda obj: figures(obj) == (10, 3, 3, 4))


def test_the_parents_reader_reads_the_sub_tenants_gpubudget_and_not_the_reverse(cp):
    ml = cp.alice.watch_until("tenant-acme-ml", lambda obj: figures(obj) is not None, bound=60)
    assert ml["status"]["tenant"] == "ml" and figures(ml)[2] == 2  # its pool reserves `train`
    assert cp.bob.request("GET", f"{budgets('tenant-acme-ml')}/gpu-budget")[0] == 200
    assert cp.bob.request("GET", f"{budgets('tenant-acme')}/gpu-budget")[0] == 403


def test_the_reader_cannot_read_another_tenants_nor_list_every_namespace(cp):
    cp.alice.watch_until("tenant-acme", ready, bound=60)
    code, _ = cp.api.get(f"{budgets('tenant-beta')}/gpu-budget")
    assert code == 200  # it is there
    assert cp.alice.request("GET", f"{budgets('tenant-beta')}/gpu-budget")[0] == 403
    assert cp.alice.request("GET", budgets("tenant-beta"))[0] == 403
    assert cp.alice.request("GET", "/apis/cozystack.io/v1alpha1/gpubudgets")[0] == 403


def test_the_reader_cannot_write_its_own(cp):
    own = cp.alice.watch_until("tenant-acme", ready, bound=60)
    path = f"{budgets('tenant-acme')}/gpu-budget"
    forged = {**own, "status": {**own["status"], "keys": []}}
    assert cp.alice.request("PUT", path + "/status", forged)[0] == 403
    assert cp.alice.request("PUT", path, forged)[0] == 403
    assert cp.alice.request("PATCH", path + "/status", {"status": {"keys": []}},
                            content_type="application/merge-patch+json")[0] == 403
    assert cp.alice.request("DELETE", path)[0] == 403
    other = {**own, "metadata": {"name": "mine", "namespace": "tenant-acme"}}
    other.pop("status")
    assert cp.alice.request("POST", budgets("tenant-acme"), other)[0] == 403


def test_a_write_that_changes_no_figure_writes_no_gpubudget(cp):
    before = cp.alice.watch_until("tenant-acme", ready, bound=60)
    beta = cp.api.get(f"{budgets('tenant-beta')}/gpu-budget")[1]
    # A VM with no GPU in acme's pool: an event the writer reads, no figure moves.
    cp.create(apps_path("vminstances", "tenant-acme"), {"apiVersion": "apps.cozystack.io/v1alpha1",
                                                        "kind": "VMInstance", "metadata": {"name": "cpu-only"},
                                                        "spec": {}})
    # Then a figure of beta: once beta's GPUBudget shows it, the first event was handled before it.
    cp.create(apps_path("vminstances", "tenant-beta"), vm("one", 1))
    Reader(cp.api, "carol", "tenant-beta-view").watch_until("tenant-beta", lambda obj: figures(obj) == (2, 0, 1, 1))
    after = cp.api.get(f"{budgets('tenant-acme')}/gpu-budget")[1]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert beta["metadata"]["resourceVersion"] != cp.api.get(f"{budgets('tenant-beta')}/gpu-budget")[1][
        "metadata"]["resourceVersion"]


def test_an_object_the_rules_cannot_read_is_named_in_its_tenants_gpubudget_alone(cp):
    carol = Reader(cp.api, "carol", "tenant-beta-view")  # beta's reader
    widget = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "widget"},
              "spec": {"automountServiceAccountToken": False, "containers": [{
                  "name": "c", "image": "registry.invalid/none",
                  "resources": {"requests": {"example.com/widget": "10E"}, "limits": {"example.com/widget": "10E"}}}]}}
    cp.create("/api/v1/namespaces/tenant-beta/serviceaccounts",
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    cp.create("/api/v1/namespaces/tenant-beta/pods", widget)
    try:
        beta = carol.watch_until("tenant-beta", lambda obj: not ready(obj))
        [condition] = beta["status"]["conditions"]
        assert condition["reason"] == "Unreadable" and beta["status"]["keys"] == []
        assert "Pod tenant-beta/widget (in the namespace of Tenant tenant-root/beta)" in condition["message"]
        assert ready(cp.alice.request("GET", f"{budgets('tenant-acme')}/gpu-budget")[1])  # acme's figures stay
    finally:
        cp.delete_pod("/api/v1/namespaces/tenant-beta/pods/widget")
    carol.watch_until("tenant-beta", lambda obj: ready(obj) and figures(obj) == (2, 0, 1, 1))


def _without_age(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    cut = lines[0].rindex("AGE")
    return "\n".join(line[:cut].rstrip() for line in lines)


def test_kubectl_get_gpubudgets_prints_what_the_guide_shows(cp, kubectl):
    """As acme's reader: its namespace's GPUBudget, and its sub-tenant's."""
    cp.alice.watch_until("tenant-acme", lambda obj: figures(obj) == (10, 3, 3, 4), bound=60)
    cp.alice.watch_until("tenant-acme-ml", lambda obj: figures(obj) == (3, 0, 2, 1), bound=60)
    shown = []
    for namespace in ("tenant-acme", "tenant-acme-ml"):
        out = subprocess.run([str(kubectl), f"--kubeconfig={cp.plane.kubeconfig}", "--as=alice",
                              "--as-group=tenant-acme-view", "get", "gpubudgets", "-n", namespace],
                             capture_output=True, text=True, check=True).stdout
        shown.append(f"$ kubectl get gpubudgets -n {namespace}\n{out}")
    guide = GUIDE.read_text()
    match = BLOCK.search(guide)
    assert match, "the guide's live block is missing"
    if os.environ.get("COZYRENDER_UPDATE_DOCS") == "1":
        GUIDE.write_text(guide[:match.start(2)] + "".join(shown) + guide[match.end(2):])
        return
    documented = re.split(r"(?m)^(?=\$ )", match.group(2))[1:]
    assert len(documented) == len(shown)
    for doc, real in zip(documented, shown):
        command, table = doc.split("\n", 1)
        assert real.startswith(command + "\n")
        assert _without_age(real.split("\n", 1)[1]) == _without_age(table)
