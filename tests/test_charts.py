"""The tenant chart: names, labels, values Secret, quota arithmetic, RBAC,
render inputs and the values schema, rendered by the Helm SDK and, for byte
parity, by the pinned Helm 3 and Helm 4 binaries. (Parity with Cozystack's
own chart: test_chart_tenant_parity.py; the modules, policies and hooks:
test_chart_tenant.py.)"""

from __future__ import annotations

import json
import math
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import render
from cozyrender.entitlement import PARENT_ANNOTATION, REQUESTED_ANNOTATION, VGPU_LABEL
from cozyrender.keys import in_budget_domain
from cozyrender.kube.quantity import parse_quantity
from cozyrender.postrender import post_render
from cozyrender.render import RenderError

ROOT = Path(__file__).resolve().parent.parent
TENANT = ROOT / "charts" / "tenant"
COUNTS = ["pods", "services", "services.loadbalancers", "services.nodeports",
          "services.clusterip", "configmaps", "secrets", "persistentvolumeclaims",
          "replicationcontrollers", "resourcequotas"]
PARENT = {"host": "example.org", "etcd": "tenant-root", "ingress": "tenant-root",
          "monitoring": "tenant-root", "seaweedfs": "tenant-root"}
LEVELS = ["view", "use", "admin", "super-admin"]


def objects(chart: Path, values: dict, release: str, namespace: str) -> list[dict]:
    text = render.template(chart, values, release, namespace).decode()
    return [d for d in yaml.safe_load_all(text) if d]


def one(objs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, [(o["kind"], o["metadata"]["name"]) for o in objs]
    return found[0]


def tenant(values: dict | None = None, release: str = "tenant-a",
           namespace: str = "tenant-root") -> list[dict]:
    return objects(TENANT, {"_namespace": PARENT, **(values or {})}, release, namespace)


def secret_values(objs: list[dict]) -> dict:
    return yaml.safe_load(one(objs, "Secret")["stringData"]["values.yaml"])


# ---------------------------------------------------------------- Helm parity

PARITY = [
    ("tenant-a", "tenant-root", {"resourceQuotas": {"cpu": 2, "storage": "1Gi",
                                                    "a100.gpuclass.cozystack.io/devices": 1},
                                 "gpu": {"vgpu": True}, "_namespace": PARENT}),
    ("tenant-b", "tenant-a-x", {"host": "b.example.net", "etcd": True, "ingress": True,
                                "monitoring": True, "seaweedfs": True, "gateway": True,
                                "computeplane": True, "schedulingClass": "gold"}),
    ("tenant-root", "tenant-root", {"resourceQuotas": {"memory": "1Gi"},
                                    "_cluster": {"oidc-enabled": "true"}}),
]


@pytest.mark.parametrize("release, namespace, values", PARITY)
def test_helm3_helm4_and_sdk_render_identically(release: str, namespace: str, values: dict,
                                                helm3: Path, helm4: Path, tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    outputs = [subprocess.run([str(helm), "template", release, str(TENANT), "-n", namespace,
                               "-f", str(values_file)], capture_output=True, check=True).stdout
               for helm in (helm3, helm4)]
    assert outputs[0] == outputs[1]
    assert render.template(TENANT, values, release, namespace) == outputs[1]


@pytest.mark.parametrize("helm_fixture", ["helm3", "helm4"])
@pytest.mark.parametrize("quotas, message", [
    ({"A100.gpuclass.cozystack.io/devices": 1}, "A100.gpuclass.cozystack.io/devices"),
    ({"requests.a100.gpuclass.cozystack.io/devices": 1},
     "requests.a100.gpuclass.cozystack.io/devices"),
    ({"a100.gpuclass.cozystack.io/devices": "2Gi"}, "a100.gpuclass.cozystack.io"),
])
def test_binaries_refuse_malformed_budgets_naming_the_key(
        helm_fixture: str, quotas: dict, message: str, request: pytest.FixtureRequest,
        tmp_path: Path) -> None:
    helm = request.getfixturevalue(helm_fixture)
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps({"resourceQuotas": quotas}))
    proc = subprocess.run([str(helm), "template", "tenant-a", str(TENANT), "-n", "tenant-root",
                           "-f", str(values_file)], capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert message in proc.stderr


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
    # everything the tenant owns lives in its namespace, but for the hook's
    # ServiceAccount and Job (cozy-system) and the dashboard binding (cozy-public)
    elsewhere = {(o["kind"], o["metadata"].get("namespace")) for o in objs
                 if o["metadata"].get("namespace") not in (name, None)}
    assert elsewhere == {("ServiceAccount", "cozy-system"), ("Job", "cozy-system"),
                         ("RoleBinding", "cozy-public")}
    cluster_scoped = {o["kind"] for o in objs if "namespace" not in o["metadata"]}
    assert cluster_scoped == {"Namespace", "CiliumClusterwideNetworkPolicy"}
    # cozy:tenant: tenant-root's account, the release namespace's dash-prefixes, the tenant's
    subjects = one(objs, "RoleBinding", "cozy:tenant")["subjects"]
    chain = [namespace.rsplit("-", k)[0] for k in range(namespace.count("-") - 1, -1, -1)]
    want = (["tenant-root"] if namespace != "tenant-root" else []) + chain + [name]
    assert [s["name"] for s in subjects] == want
    assert all(s == {"kind": "ServiceAccount", "name": s["name"], "namespace": s["name"]}
               for s in subjects)


@pytest.mark.parametrize("release, namespace, message", [
    ("tenant-a-b", "tenant-root", 'release name must be "tenant-<name>"'),
    ("foo-a", "tenant-root", 'release name must be "tenant-<name>"'),
    ("tenant", "tenant-root", 'release name must be "tenant-<name>"'),
    ("tenant-a", "default", 'the release namespace must start with "tenant-"'),
    ("tenant-a", "tenant-Root", 'the release namespace "tenant-Root" is not a DNS-1123 label'),
    ("tenant-a", "tenant-root_x", 'the release namespace "tenant-root_x" is not a DNS-1123'),
    ("tenant-a", "tenant-" + "x" * 57, "is not a DNS-1123 label"),
    ("tenant-a.b", "tenant-root", 'the tenant namespace "tenant-a.b"'),
    ("tenant-" + "y" * 30, "tenant-" + "x" * 30, "is not a DNS-1123 label"),
])
def test_bad_release_or_namespace_fails(helm4: Path, tmp_path: Path, release: str, namespace: str,
                                        message: str) -> None:
    """The chart itself refuses (as a hoster runs it, with the real helm);
    `cozyrender template` checks names before rendering, in its own words."""
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"_namespace": PARENT}))
    result = subprocess.run([str(helm4), "template", release, str(TENANT), "-n", namespace, "-f", str(values)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and result.stdout == ""
    assert re.search(message, result.stderr), result.stderr


def test_longest_namespace_is_accepted() -> None:
    parent = "tenant-" + "y" * 35
    name = f"{parent}-{'x' * 20}"  # 63 characters
    assert one(tenant(release="tenant-" + "x" * 20, namespace=parent),
               "Namespace")["metadata"]["name"] == name


def test_tenant_root_release_leaves_namespace_and_secret_to_basics() -> None:
    kinds = {o["kind"] for o in tenant({"resourceQuotas": {"cpu": 1}}, "tenant-root",
                                       "tenant-root")}
    assert "Namespace" not in kinds and "Secret" not in kinds
    assert {"ResourceQuota", "LimitRange", "ServiceAccount", "RoleBinding", "HelmRelease",
            "CiliumNetworkPolicy", "Job"} <= kinds


# ---------------------------------------------------------------- values Secret

def test_values_secret_inherits_and_computes_host() -> None:
    cluster = {"root-host": "example.org", "gpu-vgpu": True, "extra": {"x": [1]}}
    objs = tenant({"_cluster": cluster, "monitoring": True})
    values = secret_values(objs)
    assert values["_cluster"] == cluster
    assert values["_namespace"] == {"host": "a.example.org", "etcd": "tenant-root",
                                    "ingress": "tenant-root", "gateway": "",
                                    "monitoring": "tenant-a", "seaweedfs": "tenant-root"}
    labels = one(objs, "Namespace")["metadata"]["labels"]
    assert labels["namespace.cozystack.io/monitoring"] == "tenant-a"
    assert labels["namespace.cozystack.io/host"] == "a.example.org"
    assert labels["alpha.kubevirt.io/auto-memory-limits-ratio"] == "1.0"
    assert one(objs, "Secret")["metadata"] == {
        "name": "cozystack-values", "namespace": "tenant-a",
        "labels": {"reconcile.fluxcd.io/watch": "Enabled"}}


@pytest.mark.parametrize("host", [None, ""])
def test_null_and_empty_host_derive_from_the_parent(host: object) -> None:
    assert secret_values(tenant({"host": host}))["_namespace"]["host"] == "a.example.org"


def test_explicit_host_wins_and_no_parent_host_means_empty() -> None:
    assert secret_values(tenant({"host": "my.example.net"}))["_namespace"]["host"] == \
        "my.example.net"
    objs = objects(TENANT, {}, "tenant-a", "tenant-root")
    # no _cluster at all: Cozystack writes `_cluster: null`
    assert secret_values(objs) == {"_cluster": None, "_namespace": {
        "host": "", "etcd": "", "ingress": "", "gateway": "", "monitoring": "",
        "seaweedfs": ""}}


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


# ---------------------------------------------------------------- RBAC

@pytest.mark.parametrize("release, namespace, tenants", [
    ("tenant-a", "tenant-root", ["tenant-a", "tenant-root"]),
    ("tenant-b", "tenant-a", ["tenant-a", "tenant-a-b", "tenant-root"]),
    ("tenant-c", "tenant-a-b", ["tenant-a", "tenant-a-b", "tenant-a-b-c", "tenant-root"]),
    ("tenant-root", "tenant-root", ["tenant-root"]),
])
def test_access_level_bindings(release: str, namespace: str, tenants: list[str]) -> None:
    objs = tenant(release=release, namespace=namespace)
    name = tenants[-2] if len(tenants) > 1 else "tenant-root"
    bindings = {o["metadata"]["name"]: o for o in objs if o["kind"] == "RoleBinding"
                and o["metadata"]["namespace"] == name and o["roleRef"]["kind"] == "ClusterRole"}
    assert set(bindings) == {"cozy:tenant", *(f"cozy:tenant:{level}" for level in LEVELS)}
    for i, level in enumerate(LEVELS):
        binding = bindings[f"cozy:tenant:{level}"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": f"cozy:tenant:{level}"}
        above = sorted(LEVELS[i:])  # Cozystack lists the levels in name order
        want = []
        for t in tenants:
            want.append({"kind": "ServiceAccount", "name": t, "namespace": t})
            want += [{"kind": "Group", "name": f"{t}-{a}", "apiGroup": "rbac.authorization.k8s.io"}
                     for a in above]
        assert binding["subjects"] == want
    dashboard = one(objs, "RoleBinding", f"cozy:{name}:dashboard")
    assert dashboard["metadata"]["namespace"] == "cozy-public"
    assert dashboard["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                    "name": "cozy:tenant:dashboard"}
    assert [s["name"] for s in dashboard["subjects"]] == [
        f"{name}-{level}" for level in reversed(LEVELS)] + [name]
    assert one(objs, "ServiceAccount", name)["metadata"]["namespace"] == name


# ---------------------------------------------------------------- quota

def go_v(number: float) -> str:
    """Go's `%v` of a float64 (Sprig's toString): the shortest digits that read
    back, in exponent form when the decimal exponent is below -4 or 6 or more."""
    sign, digits, exponent = Decimal(repr(float(number))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(digits) + exponent - 1
    if number == 0:
        return "0"
    if power < -4 or power >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    return f"{Decimal(repr(float(number))).normalize():f}"


@pytest.mark.parametrize("number, text", [  # printed by helm 4's toString
    (100000, "100000"), (999999, "999999"), (1000000, "1e+06"), (1234567, "1.234567e+06"),
    (0.0001, "0.0001"), (0.00001, "1e-05"), (0.1, "0.1"), (123456.5, "123456.5"),
    (1e20, "1e+20"), (12345678901234567890, "1.2345678901234567e+19"),
    (1 / 3, "0.3333333333333333"), (0, "0"), (-2.5, "-2.5")])
def test_go_v_model(number: float, text: str) -> None:
    assert go_v(number) == text


RATIOS = {"cpu": ("cpu-allocation-ratio", 10), "memory": ("memory-allocation-ratio", 1),
          "ephemeral-storage": ("ephemeral-storage-allocation-ratio", 40)}


def flattened_keys(quotas: dict[str, object]) -> dict[str, str]:
    """The model of the chart's key flattening: {quota key: user key}."""
    out: dict[str, str] = {}
    for key in quotas:
        if key in COUNTS:
            out[key] = key
        elif key == "storage":
            out["requests.storage"] = key
        else:
            out[f"requests.{key}"] = key
            out[f"limits.{key}"] = key
    return out


_label = st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True)
ordinary_keys = st.one_of(
    st.sampled_from(["cpu", "memory", "ephemeral-storage", "storage", "nvidia.com/gpu",
                     "requests.cpu", "limits.memory", *COUNTS]),
    st.tuples(_label, _label).map(lambda t: f"{t[0]}.example.com/{t[1]}"),
)
budget_keys = st.one_of(st.just("gpuclass.cozystack.io/devices"),
                        _label.filter(lambda c: c not in ("requests", "limits"))
                        .map(lambda c: f"{c}.gpuclass.cozystack.io/devices"))
quantities = st.one_of(st.integers(0, 10**6),
                       st.from_regex(r"[1-9][0-9]{0,3}(m|Mi|Gi|k|M)?", fullmatch=True))
devices = st.one_of(st.integers(0, 64), st.integers(0, 64).map(str))
quota_sets = st.builds(lambda a, b: {**a, **b},
                       st.dictionaries(ordinary_keys, quantities, max_size=6),
                       st.dictionaries(budget_keys, devices, max_size=3)).filter(bool)
ratios = st.one_of(st.integers(1, 64), st.sampled_from(["1", "2.5", "10", "0.5", "40", "3"]))


@settings(max_examples=60, deadline=None)
@given(quota_sets,
       st.dictionaries(st.sampled_from(sorted(RATIOS)), ratios))
def test_quota_flattening_and_allocation_ratios(quotas: dict[str, object],
                                                custom: dict[str, object]) -> None:
    """Keys follow the flattening model exactly; values are kept as written,
    except the requests of cpu, memory and ephemeral-storage: the quantity
    divided by its allocation ratio (default or `_cluster` override), cpu as a
    decimal, memory and ephemeral storage cut to whole bytes."""
    cluster = {RATIOS[k][0]: v for k, v in custom.items()}
    objs = tenant({"resourceQuotas": quotas, "_cluster": cluster})
    quota = one(objs, "ResourceQuota")
    assert quota["metadata"] == {"name": "tenant-quota", "namespace": "tenant-a"}
    hard = quota["spec"]["hard"]
    model = flattened_keys(quotas)
    assert set(hard) == set(model)  # GPU keys included: no GPU rule in the chart
    for quota_key, key in model.items():
        value = quotas[key]
        if key in RATIOS and quota_key.startswith("requests."):
            ratio = Decimal(str(custom.get(key, RATIOS[key][1])))
            amount = parse_quantity(str(value))
            exact = Decimal(amount.numerator) / Decimal(amount.denominator) / ratio
            got = Decimal(hard[quota_key])
            assert isinstance(hard[quota_key], str)
            if key == "cpu":
                assert math.isclose(got, exact, rel_tol=1e-12, abs_tol=1e-15)
            else:
                assert got == int(got) and 0 <= exact - got < 1 + exact * Decimal(1e-12)
        elif key in RATIOS:  # limits as text, a number as Go's %v prints it
            assert hard[quota_key] == (value if isinstance(value, str) else go_v(value))
        else:
            assert hard[quota_key] == value
    assert one(objs, "LimitRange")["metadata"]["name"] == "tenant-range-limits"


@pytest.mark.parametrize("cluster, cpu, memory, ephemeral", [
    ({}, "0.6", "12884901888", "805306368"),                            # defaults 10, 1, 40
    ({"cpu-allocation-ratio": "5"}, "1.2", "12884901888", "805306368"),
    ({"cpu-allocation-ratio": 4, "memory-allocation-ratio": "2",
      "ephemeral-storage-allocation-ratio": "10"}, "1.5", "6442450944", "3221225472"),
    ({"memory-allocation-ratio": "1.5"}, "0.6", "8589934592", "805306368"),
])
def test_allocation_ratio_table(cluster: dict, cpu: str, memory: str, ephemeral: str) -> None:
    hard = one(tenant({"_cluster": cluster, "resourceQuotas": {
        "cpu": 6, "memory": "12Gi", "ephemeral-storage": "30Gi"}}), "ResourceQuota")["spec"]["hard"]
    assert hard == {"limits.cpu": "6", "requests.cpu": cpu, "limits.memory": "12Gi",
                    "requests.memory": memory, "limits.ephemeral-storage": "30Gi",
                    "requests.ephemeral-storage": ephemeral}


def test_prefixed_keys_are_prefixed_again_as_cozystack_does() -> None:
    hard = one(tenant({"resourceQuotas": {"requests.cpu": "1", "limits.memory": "1Gi"}}),
               "ResourceQuota")["spec"]["hard"]
    assert hard == {"requests.requests.cpu": "1", "limits.requests.cpu": "1",
                    "requests.limits.memory": "1Gi", "limits.limits.memory": "1Gi"}


@pytest.mark.parametrize("ratio", ["0", "-2", "ten", "", "1e400x", "0.0"])
def test_bad_allocation_ratio_is_refused(ratio: str) -> None:
    with pytest.raises(RenderError, match="_cluster.cpu-allocation-ratio must be a positive number"):
        tenant({"_cluster": {"cpu-allocation-ratio": ratio}, "resourceQuotas": {"cpu": 1}})


@pytest.mark.parametrize("key, value", [("memory", "9Ei"), ("ephemeral-storage", "1000Ei"),
                                        ("memory", "-9Ei")])
def test_byte_requests_past_64_bits_are_refused(key: str, value: str) -> None:
    """Cozystack's chart wraps these to -9223372036854775808: refused instead."""
    with pytest.raises(RenderError, match=f"resourceQuotas.{key}: the request {value} / "):
        tenant({"resourceQuotas": {key: value}})
    assert one(tenant({"resourceQuotas": {key: "7Ei"}}), "ResourceQuota")  # still fits


def test_limitrange_defaults() -> None:
    limits = one(tenant({"resourceQuotas": {"pods": 3}}), "LimitRange")["spec"]["limits"]
    assert limits == [{"type": "Container",
                       "default": {"cpu": "250m", "memory": "128Mi", "ephemeral-storage": "2Gi"},
                       "defaultRequest": {"cpu": "25m", "memory": "128Mi",
                                          "ephemeral-storage": "50Mi"}}]


def test_no_quotas_no_quota_no_limitrange() -> None:
    kinds = {o["kind"] for o in tenant({"resourceQuotas": {}})}
    assert "ResourceQuota" not in kinds and "LimitRange" not in kinds


@settings(max_examples=30, deadline=None)
@given(quota_sets)
def test_no_budget_key_survives_post_render(quotas: dict[str, object]) -> None:
    """Whatever the chart flattens, the post-rendered release has no budget key
    in any quota, and a tenant with only budget keys has no quota and no LimitRange."""
    raw = render.template(TENANT, {"_namespace": PARENT, "resourceQuotas": quotas},
                          "tenant-a", "tenant-root")
    out = [o for o in yaml.safe_load_all(post_render(raw).output) if o]
    quotas_out = [o for o in out if o["kind"] == "ResourceQuota"]
    assert not any(in_budget_domain(k) for q in quotas_out for k in q["spec"]["hard"])
    gpu_only = all(in_budget_domain(k) for k in quotas)
    assert bool(quotas_out) is not gpu_only
    assert any(o["kind"] == "LimitRange" for o in out) is not gpu_only


# ---------------------------------------------------------------- schema

@pytest.mark.parametrize("values, message", [
    ({"resourceQuotas": {"cpu": "two"}}, "/resourceQuotas/cpu"),
    ({"resourceQuotas": {"cpu": 1.5}}, "/resourceQuotas/cpu"),          # Cozystack refuses too
    ({"resourceQuotas": {"cpu": {"limit": 1}}}, "/resourceQuotas/cpu"),  # nested map
    ({"resourceQuotas": {"pods": True}}, "/resourceQuotas/pods"),
    ({"resourceQuotas": {"A100.gpuclass.cozystack.io/devices": 1}},
     "A100.gpuclass.cozystack.io/devices"),
    ({"resourceQuotas": {"a100.gpuclass.cozystack.io/memory": 1}},
     "a100.gpuclass.cozystack.io/memory"),
    ({"resourceQuotas": {"x.y.gpuclass.cozystack.io/devices": 1}},
     "x.y.gpuclass.cozystack.io/devices"),
    ({"resourceQuotas": {"limits.gpuclass.cozystack.io/devices": 1}},
     "limits.gpuclass.cozystack.io/devices"),
    ({"resourceQuotas": {"GPUCLASS.cozystack.io/devices": 1}}, "GPUCLASS.cozystack.io/devices"),
    ({"resourceQuotas": {f"{'a' * 64}.gpuclass.cozystack.io/devices": 1}}, "a" * 64),
    ({"resourceQuotas": {"a100.gpuclass.cozystack.io/devices": -1}},
     "/resourceQuotas/a100.gpuclass.cozystack.io~1devices"),
    ({"resourceQuotas": {"a100.gpuclass.cozystack.io/devices": "1.5"}},
     "/resourceQuotas/a100.gpuclass.cozystack.io~1devices"),
    ({"resourceQuotas": {"gpuclass.cozystack.io/devices": "2k"}},
     "/resourceQuotas/gpuclass.cozystack.io~1devices"),
    ({"gpu": {"vgpu": "yes"}}, "/gpu/vgpu"),
    ({"gpu": {"vgpu": 1}}, "/gpu/vgpu"),
    ({"etcd": "yes"}, "/etcd"),
    ({"gateway": None}, "/gateway"),                                    # Cozystack refuses too
    ({"host": 1}, "/host"),
    ({"_namespace": {"vgpu": "maybe"}}, "/_namespace/vgpu"),
    ({"_cluster": {"gpu-vgpu": "on"}}, "/_cluster/gpu-vgpu"),
])
def test_tenant_schema_refuses(values: dict, message: str) -> None:
    with pytest.raises(RenderError, match=message.replace("[", r"\[")):
        objects(TENANT, values, "tenant-a", "tenant-root")


def test_tenant_schema_accepts_what_cozystack_accepts() -> None:
    objs = objects(TENANT, {"_cluster": {"anything": {"goes": 1}}, "_namespace": {"vgpu": True},
                            "gpu": {"vgpu": True}, "surprise": 1,
                            "resourceQuotas": {"memory": "1.5Gi", "cpu": "-1",
                                               "a100.gpuclass.cozystack.io/devices": "2",
                                               "gpuclass.cozystack.io/devices": 0,
                                               "evilgpuclass.cozystack.io/devices": "1"}},
                   "tenant-a", "tenant-root")
    hard = one(objs, "ResourceQuota")["spec"]["hard"]
    assert hard["limits.memory"] == "1.5Gi" and hard["requests.cpu"] == "-0.1"
    assert hard["limits.a100.gpuclass.cozystack.io/devices"] == "2"
    assert hard["limits.evilgpuclass.cozystack.io/devices"] == "1"  # outside the domain
