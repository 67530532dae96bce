"""The tenant and cozystack-basics charts: names, labels, values Secret, quota
flattening, RBAC, render inputs and values schemas, rendered by the Helm SDK
and, for parity, by the pinned Helm 3 and Helm 4 binaries."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import render
from cozyrender.entitlement import PARENT_ANNOTATION, REQUESTED_ANNOTATION, VGPU_LABEL
from cozyrender.render import RenderError

ROOT = Path(__file__).resolve().parent.parent
TENANT = ROOT / "charts" / "tenant"
BASICS = ROOT / "charts" / "cozystack-basics"
COUNTS = ["pods", "services", "services.loadbalancers", "services.nodeports",
          "services.clusterip", "configmaps", "secrets", "persistentvolumeclaims",
          "replicationcontrollers", "resourcequotas"]
PARENT = {"host": "example.org", "etcd": "tenant-root", "ingress": "tenant-root",
          "monitoring": "tenant-root", "seaweedfs": "tenant-root"}


def objects(chart: Path, values: dict, release: str, namespace: str) -> list[dict]:
    text = render.template(chart, values, release, namespace).decode()
    return [d for d in yaml.safe_load_all(text) if d]


def one(objs: list[dict], kind: str) -> dict:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, [o["kind"] for o in objs]
    return found[0]


def tenant(values: dict | None = None, release: str = "tenant-a",
           namespace: str = "tenant-root") -> list[dict]:
    return objects(TENANT, {"_namespace": PARENT, **(values or {})}, release, namespace)


def secret_values(objs: list[dict]) -> dict:
    return yaml.safe_load(one(objs, "Secret")["stringData"]["values.yaml"])


# ---------------------------------------------------------------- Helm parity

PARITY = [
    (TENANT, "tenant-a", "tenant-root", {"resourceQuotas": {"cpu": 2, "storage": "1Gi",
                                                           "a100.gpuclass.cozystack.io/devices": 1},
                                         "gpu": {"vgpu": True}, "_namespace": PARENT}),
    (TENANT, "tenant-b", "tenant-a-x", {"host": "b.example.net", "etcd": True}),
    (TENANT, "tenant-root", "tenant-root", {"resourceQuotas": {"memory": "1Gi"}}),
    (BASICS, "cozystack-basics", "cozy-system", {"_cluster": {"gpu-vgpu": "true",
                                                              "root-host": "example.org"}}),
    (BASICS, "cozystack-basics", "cozy-system", {}),
]


@pytest.mark.parametrize("chart, release, namespace, values", PARITY)
def test_helm3_helm4_and_sdk_render_identically(chart: Path, release: str, namespace: str,
                                                values: dict, helm3: Path, helm4: Path,
                                                tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    outputs = [subprocess.run([str(helm), "template", release, str(chart), "-n", namespace,
                               "-f", str(values_file)], capture_output=True, check=True).stdout
               for helm in (helm3, helm4)]
    assert outputs[0] == outputs[1]
    assert render.template(chart, values, release, namespace) == outputs[1]


@pytest.mark.parametrize("helm_fixture", ["helm3", "helm4"])
def test_binaries_refuse_bad_release_names(helm_fixture: str, request: pytest.FixtureRequest
                                           ) -> None:
    helm = request.getfixturevalue(helm_fixture)
    proc = subprocess.run([str(helm), "template", "tenant-a-b", str(TENANT), "-n", "tenant-root"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert 'the release name must be "tenant-<name>" with no other dash' in proc.stderr


# ---------------------------------------------------------------- tenant naming

@pytest.mark.parametrize("release, namespace, name, ancestors", [
    ("tenant-a", "tenant-root", "tenant-a", ["tenant-root", "tenant-a"]),
    ("tenant-b", "tenant-a", "tenant-a-b", ["tenant-root", "tenant-a", "tenant-a-b"]),
    ("tenant-c", "tenant-a-b", "tenant-a-b-c",
     ["tenant-root", "tenant-a", "tenant-a-b", "tenant-a-b-c"]),
])
def test_namespace_name_and_ancestor_labels(release: str, namespace: str, name: str,
                                            ancestors: list[str]) -> None:
    objs = tenant(release=release, namespace=namespace)
    ns = one(objs, "Namespace")
    assert ns["metadata"]["name"] == name
    labels = ns["metadata"]["labels"]
    assert sorted(k for k in labels if k.startswith("tenant.cozystack.io/")) == sorted(
        f"tenant.cozystack.io/{a}" for a in ancestors)
    assert all(labels[f"tenant.cozystack.io/{a}"] == "" for a in ancestors)
    # everything the tenant owns lives in its namespace, explicitly
    for obj in objs:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == name, obj
    subjects = one([o for o in objs if o["metadata"]["name"] == name], "RoleBinding")["subjects"]
    assert [s["name"] for s in subjects] == ancestors


@pytest.mark.parametrize("release, namespace, message", [
    ("tenant-a-b", "tenant-root", 'release name must be "tenant-<name>"'),
    ("foo-a", "tenant-root", 'release name must be "tenant-<name>"'),
    ("tenant", "tenant-root", 'release name must be "tenant-<name>"'),
    ("tenant-a", "default", 'the release namespace must start with "tenant-"'),
])
def test_bad_release_or_namespace_fails(release: str, namespace: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        tenant(release=release, namespace=namespace)


def test_tenant_root_release_leaves_namespace_and_secret_to_basics() -> None:
    kinds = {o["kind"] for o in tenant({"resourceQuotas": {"cpu": 1}}, "tenant-root",
                                       "tenant-root")}
    assert "Namespace" not in kinds and "Secret" not in kinds
    assert {"ResourceQuota", "LimitRange", "ServiceAccount", "RoleBinding"} <= kinds


# ---------------------------------------------------------------- values Secret

def test_values_secret_inherits_and_computes_host() -> None:
    cluster = {"root-host": "example.org", "gpu-vgpu": True, "extra": {"x": [1]}}
    objs = tenant({"_cluster": cluster, "monitoring": True})
    values = secret_values(objs)
    assert values["_cluster"] == cluster
    assert values["_namespace"] == {"host": "a.example.org", "etcd": "tenant-root",
                                    "ingress": "tenant-root", "monitoring": "tenant-a",
                                    "seaweedfs": "tenant-root"}
    labels = one(objs, "Namespace")["metadata"]["labels"]
    assert labels["namespace.cozystack.io/monitoring"] == "tenant-a"
    assert labels["namespace.cozystack.io/host"] == "a.example.org"
    assert one(objs, "Secret")["metadata"]["name"] == "cozystack-values"


def test_explicit_host_wins_and_no_parent_host_means_empty() -> None:
    assert secret_values(tenant({"host": "my.example.net"}))["_namespace"]["host"] == \
        "my.example.net"
    objs = objects(TENANT, {}, "tenant-a", "tenant-root")
    assert secret_values(objs) == {"_cluster": {}, "_namespace": {
        "host": "", "etcd": "", "ingress": "", "monitoring": "", "seaweedfs": ""}}


# ---------------------------------------------------------------- render inputs

FLAGS = [(True, "true"), (False, "false"), ("true", "true"), ("false", "false"), (None, "false")]


@pytest.mark.parametrize("requested, requested_out", FLAGS)
@pytest.mark.parametrize("parent, parent_out", FLAGS)
def test_vgpu_render_inputs(requested: object, requested_out: str, parent: object,
                            parent_out: str) -> None:
    values: dict = {"_namespace": {**PARENT, **({} if parent is None else {"vgpu": parent})}}
    if requested is not None:
        values["gpu"] = {"vgpu": requested}
    objs = objects(TENANT, values, "tenant-a", "tenant-root")
    ns = one(objs, "Namespace")
    assert ns["metadata"]["annotations"] == {REQUESTED_ANNOTATION: requested_out,
                                             PARENT_ANNOTATION: parent_out}
    assert VGPU_LABEL not in ns["metadata"]["labels"]  # the post-renderer's to write
    assert "vgpu" not in secret_values(objs)["_namespace"]


@pytest.mark.parametrize("cluster, parent_out", [
    ({"gpu-vgpu": True}, "true"), ({"gpu-vgpu": "true"}, "true"), ({"gpu-vgpu": False}, "false"),
    ({"gpu-vgpu": "false"}, "false"), ({}, "false")])
def test_basics_root_namespace(cluster: dict, parent_out: str) -> None:
    objs = objects(BASICS, {"_cluster": {"root-host": "example.org", **cluster}},
                   "cozystack-basics", "cozy-system")
    ns = one(objs, "Namespace")
    assert ns["metadata"]["name"] == "tenant-root"
    assert ns["metadata"]["labels"] == {"platform.cozystack.io/no-delete": "true",
                                        "namespace.cozystack.io/host": "example.org"}
    assert ns["metadata"]["annotations"] == {REQUESTED_ANNOTATION: "true",
                                             PARENT_ANNOTATION: parent_out}
    secret = one(objs, "Secret")
    assert secret["metadata"]["namespace"] == "tenant-root"
    values = yaml.safe_load(secret["stringData"]["values.yaml"])
    assert values["_cluster"] == {"root-host": "example.org", **cluster}
    assert values["_namespace"] == {"host": "example.org", **{
        k: "tenant-root" for k in ("etcd", "ingress", "monitoring", "seaweedfs")}}
    release = one(objs, "HelmRelease")
    assert release["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
    assert release["metadata"]["namespace"] == "tenant-root"
    assert release["spec"]["valuesFrom"] == [{"kind": "Secret", "name": "cozystack-values"}]


def test_gpu_catalog_is_readable_by_everyone_and_writable_by_no_one() -> None:
    objs = objects(BASICS, {}, "cozystack-basics", "cozy-system")
    role = one(objs, "ClusterRole")
    assert role["metadata"]["name"] == "cozy:gpuclasses:view"
    assert role["rules"] == [{"apiGroups": ["cozystack.io"], "resources": ["gpuclasses"],
                              "verbs": ["get", "list", "watch"]}]
    binding = one(objs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "cozy:gpuclasses:view"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:authenticated"}]
    rules = [r for o in objs + tenant({"resourceQuotas": {"cpu": 1}})
             for r in o.get("rules", [])]
    for rule in rules:
        if "gpuclasses" in rule["resources"] or "*" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}


def test_basics_renders_no_crds_whatever_crds_dir_holds() -> None:
    # crds/ belongs to the GPU class work; `helm template` leaves CRDs out by default
    kinds = {o["kind"] for o in objects(BASICS, {}, "cozystack-basics", "cozy-system")}
    assert kinds == {"Namespace", "Secret", "HelmRelease", "ClusterRole", "ClusterRoleBinding"}


# ---------------------------------------------------------------- RBAC

def test_access_level_bindings() -> None:
    objs = tenant(release="tenant-b", namespace="tenant-a")
    bindings = {o["metadata"]["name"]: o for o in objs if o["kind"] == "RoleBinding"}
    levels = ["view", "use", "admin", "super-admin"]
    assert set(bindings) == {"tenant-a-b", *(f"tenant-a-b-{level}" for level in levels)}
    assert bindings["tenant-a-b"]["roleRef"]["name"] == "cozy:tenant"
    for i, level in enumerate(levels):
        binding = bindings[f"tenant-a-b-{level}"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": f"cozy:tenant:{level}"}
        groups = {s["name"] for s in binding["subjects"] if s["kind"] == "Group"}
        assert groups == {f"{t}-{above}" for t in ("tenant-root", "tenant-a", "tenant-a-b")
                          for above in levels[i:]}
    assert one(objs, "ServiceAccount")["metadata"]["name"] == "tenant-a-b"


# ---------------------------------------------------------------- quota

def flatten(quotas: dict[str, object]) -> dict[str, object]:
    """The model of the chart's quota flattening."""
    out: dict[str, object] = {}
    for key, value in quotas.items():
        if key in COUNTS or key.startswith(("requests.", "limits.")):
            out[key] = value
        elif key == "storage":
            out["requests.storage"] = value
        else:
            out[f"requests.{key}"] = value
            out[f"limits.{key}"] = value
    return out


_label = st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True)
quota_keys = st.one_of(
    st.sampled_from(["cpu", "memory", "ephemeral-storage", "storage", "nvidia.com/gpu",
                     "gpuclass.cozystack.io/devices", "x.y.gpuclass.cozystack.io/memory",
                     *COUNTS]),
    _label.map(lambda c: f"{c}.gpuclass.cozystack.io/devices"),
    st.tuples(_label, _label).map(lambda t: f"{t[0]}.example.com/{t[1]}"),
)
quantities = st.one_of(st.integers(0, 10**6),
                       st.from_regex(r"[1-9][0-9]{0,3}(m|Mi|Gi|k)?", fullmatch=True))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(quota_keys, quantities, min_size=1, max_size=8))
def test_quota_flattening(quotas: dict[str, object]) -> None:
    expected = flatten(quotas)  # generated keys never carry a prefix, so never collide
    objs = tenant({"resourceQuotas": quotas})
    quota = one(objs, "ResourceQuota")
    assert quota["metadata"] == {"name": "tenant-quota", "namespace": "tenant-a"}
    assert quota["spec"]["hard"] == expected  # GPU keys included: no GPU rule in the chart
    assert one(objs, "LimitRange")["metadata"]["name"] == "tenant-range-limits"


def test_prefixed_keys_stay_verbatim() -> None:
    hard = one(tenant({"resourceQuotas": {"requests.a100.gpuclass.cozystack.io/devices": 1,
                                          "limits.memory": "1Gi"}}), "ResourceQuota")["spec"]["hard"]
    assert hard == {"requests.a100.gpuclass.cozystack.io/devices": 1, "limits.memory": "1Gi"}


@pytest.mark.parametrize("quotas", [{"storage": "1Gi", "requests.storage": "2Gi"},
                                    {"cpu": "1", "limits.cpu": "2"}])
def test_colliding_quota_keys_fail(quotas: dict) -> None:
    with pytest.raises(RenderError, match="both set the quota key"):
        tenant({"resourceQuotas": quotas})


def test_no_quotas_no_quota_no_limitrange() -> None:
    kinds = {o["kind"] for o in tenant({"resourceQuotas": {}})}
    assert "ResourceQuota" not in kinds and "LimitRange" not in kinds


# ---------------------------------------------------------------- schemas

@pytest.mark.parametrize("values, message", [
    ({"surprise": 1}, "additional properties 'surprise' not allowed"),
    ({"resourceQuotas": {"cpu": "two"}}, "/resourceQuotas/cpu"),
    ({"resourceQuotas": {"cpu": -1}}, "/resourceQuotas/cpu"),
    ({"gpu": {"vgpu": "yes"}}, "/gpu/vgpu"),
    ({"gpu": {"vgpu": True, "count": 1}}, "additional properties 'count' not allowed"),
    ({"etcd": "yes"}, "/etcd"),
    ({"host": 1}, "/host"),
    ({"_namespace": {"vgpu": "maybe"}}, "/_namespace/vgpu"),
])
def test_tenant_schema_refuses(values: dict, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        objects(TENANT, values, "tenant-a", "tenant-root")


def test_tenant_schema_accepts_platform_keys() -> None:
    objs = objects(TENANT, {"_cluster": {"anything": {"goes": 1}}, "_namespace": {"vgpu": True},
                            "gpu": {"vgpu": "true"}, "resourceQuotas": {"memory": "1.5Gi"}},
                   "tenant-a", "tenant-root")
    assert one(objs, "ResourceQuota")["spec"]["hard"]["limits.memory"] == "1.5Gi"


@pytest.mark.parametrize("values, message", [
    ({"_cluster": {"gpu-vgpu": "on"}}, "/_cluster/gpu-vgpu"),
    ({"tenants": {}}, "additional properties 'tenants' not allowed"),
])
def test_basics_schema_refuses(values: dict, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        objects(BASICS, values, "cozystack-basics", "cozy-system")
