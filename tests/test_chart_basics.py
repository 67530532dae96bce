"""charts/cozystack-basics: parity with Cozystack's chart at 3c780acd (the
stored reference renders in tests/data/cozystack-3c780acd/basics-*), the
documented GPU changes, the switches' rules, and what the hostname policies
admit, evaluated with a real CEL runtime."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cel_expr_python import cel
from cel_expr_python.ext.ext_strings import ExtStrings
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import render, validate
from cozyrender.entitlement import PARENT_ANNOTATION, REQUESTED_ANNOTATION, VGPU_LABEL
from cozyrender.postrender import post_render
from cozyrender.render import RenderError

ROOT = Path(__file__).resolve().parent.parent
BASICS = ROOT / "charts" / "cozystack-basics"
DATA = ROOT / "tests" / "data" / "cozystack-3c780acd"
CASES = sorted(p.parent.name for p in DATA.glob("basics-*/values.yaml"))
VAP_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
HOST = "namespace.cozystack.io/host"
GATEWAY = "namespace.cozystack.io/gateway"
MANAGED = "internal.cozystack.io/managed-by-cozystack"
GPU_VIEW = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "cozy:gpuclasses:view"},
     "rules": [{"apiGroups": ["cozystack.io"], "resources": ["gpuclasses"],
                "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "cozy:gpuclasses:view"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                 "name": "cozy:gpuclasses:view"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                   "name": "system:authenticated"}]},
    # A tenant's users read the GPUBudgets of the namespaces they are bound in (issue 35 item 1).
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "cozy:tenant:gpubudgets:view",
                  "labels": {"rbac.cozystack.io/aggregate-to-tenant": "true",
                             "rbac.cozystack.io/aggregate-to-tenant-view": "true"}},
     "rules": [{"apiGroups": ["cozystack.io"], "resources": ["gpubudgets"],
                "verbs": ["get", "list", "watch"]}]},
]


def helm_template(helm4: Path, values: Any, tmp_path: Path, vap: bool = True
                  ) -> subprocess.CompletedProcess[str]:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(values if isinstance(values, str) else json.dumps(values))
    args = [str(helm4), "template", "cozystack-basics", str(BASICS), "-n", "cozy-system",
            "-f", str(values_file)]
    if vap:
        args += ["--api-versions", VAP_API]
    return subprocess.run(args, capture_output=True, text=True)


def objects(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def keyed(docs: list[dict]) -> dict[tuple, dict]:
    """Objects by (apiVersion, kind, namespace, name); values Secrets' values.yaml parsed,
    since formatting may differ but values may not."""
    out: dict[tuple, dict] = {}
    for doc in docs:
        doc = json.loads(json.dumps(doc))
        meta = doc["metadata"]
        if doc["kind"] == "Secret" and "stringData" in doc:
            doc["stringData"] = {k: yaml.safe_load(v) for k, v in doc["stringData"].items()}
        key = (doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"])
        assert key not in out, key
        out[key] = doc
    return out


def rendered(helm4: Path, values: Any, tmp_path: Path, vap: bool = True) -> list[dict]:
    proc = helm_template(helm4, values, tmp_path, vap)
    assert proc.returncode == 0, proc.stderr
    result = post_render(proc.stdout.encode())
    assert result.warnings == []
    return objects(result.output.decode())


def on(value: Any) -> bool:
    return str(value).lower() == "true" if isinstance(value, bool) else value == "true"


def with_gpu_changes(upstream: list[dict], cluster: dict) -> dict[tuple, dict]:
    """Cozystack's objects plus the documented GPU changes: the catalog view,
    the tenants' GPUBudget view, no `rules` field on the aggregated roles, the vgpu label on tenant-root, `_namespace.vgpu` only when entitled, and
    `_cluster.gpu-vgpu` kept only when on."""
    expected = keyed(upstream + GPU_VIEW)
    for obj in expected.values():
        if obj["kind"] == "ClusterRole" and "aggregationRule" in obj:
            obj.pop("rules", None)  # the aggregation controller owns them (a Helm 4 upgrade would conflict)
    entitled = on(cluster.get("gpu-vgpu"))
    ns = expected[("v1", "Namespace", None, "tenant-root")]
    ns["metadata"]["labels"][VGPU_LABEL] = "true" if entitled else "false"
    if ns["metadata"]["labels"].get("namespace.cozystack.io/host") is None:
        # Issue 29: Cozystack writes a null host label when _cluster.root-host is unset; Helm 3's
        # three-way merge then drops every label of tenant-root (its vGPU label too) on an
        # upgrade or adoption. Ours is the empty string the API server stores for it on create.
        ns["metadata"]["labels"]["namespace.cozystack.io/host"] = ""
    secret = expected[("v1", "Secret", "tenant-root", "cozystack-values")]
    values = secret["stringData"]["values.yaml"]
    if entitled:
        values["_namespace"]["vgpu"] = True
    else:
        (values.get("_cluster") or {}).pop("gpu-vgpu", None)
    return expected


# ---------------------------------------------------------------- parity

def test_reference_cases_are_there() -> None:
    assert len(CASES) >= 30
    refused = [c for c in CASES if (DATA / c / "error.txt").is_file()]
    assert 0 < len(refused) < len(CASES)


@pytest.mark.parametrize("case", CASES)
def test_post_rendered_output_equals_cozystack_plus_gpu_changes(case: str, helm4: Path,
                                                                 tmp_path: Path) -> None:
    folder = DATA / case
    values_text = (folder / "values.yaml").read_text()
    proc = helm_template(helm4, values_text, tmp_path, vap=not case.endswith("-novap"))
    if (folder / "error.txt").is_file():  # Cozystack refuses these values: so do we
        assert proc.returncode != 0 and proc.stdout == ""
        assert "_cluster" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    result = post_render(proc.stdout.encode())
    assert result.warnings == []
    ours = keyed(objects(result.output.decode()))
    cluster = (yaml.safe_load(values_text) or {}).get("_cluster") or {}
    expected = with_gpu_changes(objects((folder / "upstream.yaml").read_text()), cluster)
    assert sorted(ours, key=str) == sorted(expected, key=str)
    for key, obj in expected.items():
        assert ours[key] == obj, key


@pytest.mark.parametrize("case", [c for c in CASES if not (DATA / c / "error.txt").is_file()])
def test_every_object_validates_offline(case: str, helm4: Path, tmp_path: Path) -> None:
    """Kubernetes 1.35 schemas for built-in kinds (the policies included) and the
    bundled Flux schema for the HelmRelease: no finding, not even a warning."""
    values = (DATA / case / "values.yaml").read_text()
    docs = rendered(helm4, values, tmp_path, vap=not case.endswith("-novap"))
    assert validate.validate_objects(docs) == []


# ---------------------------------------------------------------- the rules

def test_vap_capability_gates_every_policy(helm4: Path, tmp_path: Path) -> None:
    cluster = {"_cluster": {"root-host": "demo.example"}}
    kinds_with = {d["kind"] for d in rendered(helm4, cluster, tmp_path, vap=True)}
    kinds_without = {d["kind"] for d in rendered(helm4, cluster, tmp_path, vap=False)}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds_with
    assert kinds_with - kinds_without == {"ValidatingAdmissionPolicy",
                                          "ValidatingAdmissionPolicyBinding"}
    # Helm's default capability set (the SDK's, `helm template` without flags) lacks the API
    sdk = objects(render.template(BASICS, cluster, "cozystack-basics", "cozy-system").decode())
    assert {d["kind"] for d in sdk} == kinds_without


@pytest.mark.parametrize("root_host, ingress_policy", [
    ("demo.example", True), ("", False), (None, False)])
def test_ingress_policy_needs_the_root_apex(root_host: str | None, ingress_policy: bool,
                                            helm4: Path, tmp_path: Path) -> None:
    docs = rendered(helm4, {"_cluster": {"root-host": root_host}}, tmp_path)
    policies = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {d["spec"]["policyName"] for d in docs
                if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert policies == bindings
    assert ("cozystack-ingress-hostname-policy" in policies) is ingress_policy
    assert len(policies) == 5 + ingress_policy
    for doc in docs:
        if doc["kind"].startswith("ValidatingAdmissionPolicy"):
            assert doc["metadata"]["labels"] == {MANAGED: ""}
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            assert doc["spec"]["validationActions"] == ["Deny"]
        if doc["kind"] == "ValidatingAdmissionPolicy":
            assert doc["spec"]["failurePolicy"] == "Fail"


@pytest.mark.parametrize("value, gateway", [
    ("true", True), (True, True), ("false", False), (False, False), (None, False),
    ("True", False), ("yes", False)])
def test_gateway_switch(value: Any, gateway: bool, helm4: Path, tmp_path: Path) -> None:
    """Rule: on only when the value reads "true" as a string (bool true too)."""
    cluster: dict[str, Any] = {"root-host": "demo.example"}
    if value is not None:
        cluster["gateway-enabled"] = value
    docs = keyed(rendered(helm4, {"_cluster": cluster}, tmp_path))
    labels = docs[("v1", "Namespace", None, "tenant-root")]["metadata"]["labels"]
    values = docs[("v1", "Secret", "tenant-root", "cozystack-values")]["stringData"]["values.yaml"]
    assert (labels.get(GATEWAY) == "tenant-root") is gateway
    assert (GATEWAY in labels) is gateway
    assert values["_namespace"] == {"host": "demo.example", "etcd": "tenant-root",
                                    "ingress": "tenant-root", "monitoring": "tenant-root",
                                    "seaweedfs": "tenant-root",
                                    **({"gateway": "tenant-root"} if gateway else {})}


@pytest.mark.parametrize("value, redirects", [
    (None, True), ("true", True), (True, True), ("false", False),
    (False, True),  # a bool false is "empty" to sprig's default, so the default (on) wins
    ("", True), ("off", False)])
def test_monitoring_switch(value: Any, redirects: bool, helm4: Path, tmp_path: Path) -> None:
    cluster: dict[str, Any] = {"root-host": "demo.example"}
    if value is not None:
        cluster["monitoring-enabled"] = value
    services = [d for d in rendered(helm4, {"_cluster": cluster}, tmp_path)
                if d["kind"] == "Service"]
    names = ["vlinsert-generic", "vminsert-longterm", "vminsert-shortterm"]
    assert sorted(s["metadata"]["name"] for s in services) == (names if redirects else [])
    for service in services:
        assert service["metadata"]["namespace"] == "cozy-monitoring"
        assert service["spec"] == {
            "type": "ExternalName",
            "externalName": f"{service['metadata']['name']}.tenant-root.svc.cluster.local"}


@pytest.mark.parametrize("root_host, label, value", [
    ("demo.example", "demo.example", "demo.example"), (None, "", None), ("", "", "")])
def test_root_host_is_passed_as_is(root_host: str | None, label: str, value: str | None, helm4: Path,
                                   tmp_path: Path) -> None:
    """Rule: no default: an unset host is null in `_namespace.host`, as Cozystack renders
    it, and the empty string on the label (a null label value makes Helm 3's three-way
    merge drop every label of tenant-root, its vGPU label included: issue 29)."""
    cluster = {} if root_host is None else {"root-host": root_host}
    docs = keyed(rendered(helm4, {"_cluster": cluster}, tmp_path))
    labels = docs[("v1", "Namespace", None, "tenant-root")]["metadata"]["labels"]
    values = docs[("v1", "Secret", "tenant-root", "cozystack-values")]["stringData"]["values.yaml"]
    assert labels[HOST] == label
    assert values["_namespace"]["host"] == value


@pytest.mark.parametrize("cluster, parent", [
    ({"gpu-vgpu": True}, "true"), ({"gpu-vgpu": "true"}, "true"), ({"gpu-vgpu": False}, "false"),
    ({"gpu-vgpu": "false"}, "false"), ({}, "false")])
def test_vgpu_render_inputs(cluster: dict, parent: str) -> None:
    docs = keyed(objects(render.template(BASICS, {"_cluster": {"root-host": "x.example",
                                                              **cluster}},
                                         "cozystack-basics", "cozy-system").decode()))
    ns = docs[("v1", "Namespace", None, "tenant-root")]
    assert ns["metadata"]["annotations"] == {REQUESTED_ANNOTATION: "true",
                                             PARENT_ANNOTATION: parent}
    assert VGPU_LABEL not in ns["metadata"]["labels"]  # the post-renderer's to write
    values = docs[("v1", "Secret", "tenant-root", "cozystack-values")]["stringData"]["values.yaml"]
    assert values["_cluster"] == {"root-host": "x.example", **cluster}  # passed through whole
    assert "vgpu" not in values["_namespace"]


def test_tenant_root_release() -> None:
    docs = keyed(objects(render.template(BASICS, {"_cluster": {"root-host": "x.example"}},
                                         "cozystack-basics", "cozy-system").decode()))
    release = docs[("helm.toolkit.fluxcd.io/v2", "HelmRelease", "tenant-root", "tenant-root")]
    assert release["metadata"]["labels"]["sharding.fluxcd.io/key"] == "tenants"
    assert release["metadata"]["labels"]["platform.cozystack.io/no-delete"] == "true"
    assert release["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert release["spec"]["timeout"] == "15m0s"
    assert release["spec"]["chartRef"] == {"kind": "ExternalArtifact", "namespace": "cozy-system",
                                           "name": "cozystack-tenant-application-default-tenant"}
    secret = docs[("v1", "Secret", "tenant-root", "cozystack-values")]
    assert secret["metadata"]["labels"] == {"reconcile.fluxcd.io/watch": "Enabled", MANAGED: ""}
    for obj in GPU_VIEW:
        key = (obj["apiVersion"], obj["kind"], None, obj["metadata"]["name"])
        assert docs[key] == obj


def test_access_levels_nest() -> None:
    """Rule: view ⊂ use ⊂ admin ⊂ super-admin through aggregation labels."""
    docs = objects(render.template(BASICS, {}, "cozystack-basics", "cozy-system").decode())
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    levels = ["view", "use", "admin", "super-admin"]
    for i, level in enumerate(levels):
        role = roles[f"cozy:tenant:{level}"]
        selector = role["aggregationRule"]["clusterRoleSelectors"]
        assert selector == [{"matchLabels": {f"rbac.cozystack.io/aggregate-to-tenant-{level}":
                                             "true"}}]
        assert "rules" not in role  # the aggregation controller's to fill
        assert role["metadata"].get("labels", {}) == {
            f"rbac.cozystack.io/aggregate-to-tenant-{above}": "true" for above in levels[i + 1:]}
        base = roles[f"cozy:tenant:{level}:base"]
        assert base["metadata"]["labels"] == {
            f"rbac.cozystack.io/aggregate-to-tenant-{level}": "true"}
    assert roles["cozy:tenant"]["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"rbac.cozystack.io/aggregate-to-tenant": "true"}}]
    # nothing but the catalog view touches GPU classes, nothing but the tenants' view GPUBudgets,
    # and they only read
    for name, role in roles.items():
        for rule in role.get("rules", ()):
            if "gpuclasses" in rule["resources"]:
                assert rule["verbs"] == ["get", "list", "watch"]
            if "gpubudgets" in rule["resources"]:
                assert name == "cozy:tenant:gpubudgets:view" and rule["verbs"] == ["get", "list", "watch"]
    gpubudgets = roles["cozy:tenant:gpubudgets:view"]["metadata"]["labels"]
    assert gpubudgets == {"rbac.cozystack.io/aggregate-to-tenant": "true",
                          "rbac.cozystack.io/aggregate-to-tenant-view": "true"}  # view, so every level


@pytest.mark.parametrize("values, message", [
    ({"_cluster": None}, "_cluster must be a map of platform values, got null"),
    ({"_cluster": "x"}, "/_cluster"),
    ({"_cluster": ["root-host"]}, "/_cluster"),
    ({"_cluster": {"gpu-vgpu": "on"}}, "/_cluster/gpu-vgpu"),
])
def test_refused_values(values: dict, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render.template(BASICS, values, "cozystack-basics", "cozy-system")


def test_unknown_keys_and_untyped_switches_are_accepted_as_upstream_does() -> None:
    """The schema documents `_cluster`'s keys but constrains only `gpu-vgpu` (ours):
    Cozystack's chart has no schema and reads the others through toString/quote."""
    docs = keyed(objects(render.template(
        BASICS, {"tenants": {}, "_cluster": {"bundle-name": "paas", "gateway-enabled": 1,
                                             "monitoring-enabled": 0, "root-host": 5}},
        "cozystack-basics", "cozy-system").decode()))
    labels = docs[("v1", "Namespace", None, "tenant-root")]["metadata"]["labels"]
    assert labels[HOST] == "5" and GATEWAY not in labels
    assert sum(k[1] == "Service" for k in docs) == 3


# ---------------------------------------------------------------- the policies, evaluated

CEL_VARIABLES = ("object", "oldObject", "namespaceObject", "request", "variables")


@pytest.fixture(scope="module")
def policies(helm4: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    docs = rendered(helm4, {"_cluster": {"root-host": "Demo.Example"}},
                    tmp_path_factory.mktemp("policies"))
    return {d["metadata"]["name"]: d["spec"] for d in docs
            if d["kind"] == "ValidatingAdmissionPolicy"}


def admits(spec: dict, obj: dict, namespace: dict | None, old: dict | None = None,
           groups: tuple[str, ...] = ()) -> bool:
    """A ValidatingAdmissionPolicy's verdict as the API server computes it:
    match conditions, then variables in order, then every validation."""
    env = cel.NewEnv(variables={v: cel.Type.DYN for v in CEL_VARIABLES},
                     extensions=[ExtStrings()])
    data: dict[str, Any] = {"object": obj, "oldObject": old, "namespaceObject": namespace,
                            "request": {"userInfo": {"username": "u", "groups": list(groups)}},
                            "variables": {}}

    def run(expression: str) -> Any:
        result = env.compile(expression).eval(data=data)
        assert result.type() != cel.Type.ERROR, (expression, result.value())
        return result.value()

    if not all(run(c["expression"]) for c in spec.get("matchConditions", [])):
        return True
    for variable in spec.get("variables", []):
        data["variables"] = {**data["variables"], variable["name"]: run(variable["expression"])}
    return all(run(v["expression"]) for v in spec["validations"])


def ns(host: str | None) -> dict:
    return {"metadata": {"name": "tenant-a", "labels": {} if host is None else {HOST: host}}}


@pytest.mark.parametrize("host, allowed", [
    ("a.demo.example", True), ("www.a.demo.example", True), ("b.demo.example", False),
    ("demo.example", False), ("x.demo.example", False), ("shop.customer.org", True),
    ("*.customer.org", False), ("*.a.demo.example", True), ("", False)])
def test_ingress_policy(policies: dict, host: str, allowed: bool) -> None:
    spec = policies["cozystack-ingress-hostname-policy"]
    ingress = {"metadata": {"namespace": "tenant-a"}, "spec": {"rules": [{"host": host}]}}
    assert admits(spec, ingress, ns("A.Demo.Example")) is allowed
    tls = {"metadata": {"namespace": "tenant-a"},
           "spec": {"rules": [{"host": "a.demo.example"}], "tls": [{"hosts": [host]}]}}
    assert admits(spec, tls, ns("a.demo.example")) is allowed
    assert admits(spec, ingress, ns(None)) is False  # fails closed without the label
    assert admits(spec, ingress, None) is False
    assert admits(spec, {"metadata": {"namespace": "cozy-x"}, "spec": {}}, None) is True


def test_ingress_policy_refuses_catch_alls(policies: dict) -> None:
    spec = policies["cozystack-ingress-hostname-policy"]
    label = ns("a.demo.example")
    assert admits(spec, {"metadata": {"namespace": "tenant-a"},
                         "spec": {"rules": [{"http": {}}]}}, label) is False
    assert admits(spec, {"metadata": {"namespace": "tenant-a"},
                         "spec": {"defaultBackend": {"service": {"name": "s"}}}}, label) is False


@pytest.mark.parametrize("name", ["cozystack-route-hostname-policy",
                                  "cozystack-route-hostname-policy-tls"])
@pytest.mark.parametrize("hostnames, label, allowed", [
    (["a.demo.example", "x.a.demo.example"], "A.demo.example", True),
    (["b.demo.example"], "a.demo.example", False),
    (["a.demo.example"], None, False),
    ([], "a.demo.example", True)])
def test_route_policies(policies: dict, name: str, hostnames: list, label: str | None,
                        allowed: bool) -> None:
    route = {"metadata": {"namespace": "tenant-a"}, "spec": {"hostnames": hostnames}}
    assert admits(policies[name], route, ns(label)) is allowed


@pytest.mark.parametrize("hostname, label, allowed", [
    ("a.demo.example", "a.demo.example", True), ("x.a.demo.example", "A.Demo.Example", True),
    ("b.demo.example", "a.demo.example", False),
    ("anything.org", None, True),  # Cozystack's documented fail-open exception
    ("anything.org", "", True)])
def test_gateway_policy(policies: dict, hostname: str, label: str | None, allowed: bool) -> None:
    gateway = {"metadata": {"namespace": "tenant-a"},
               "spec": {"listeners": [{"hostname": hostname}, {"name": "no-hostname"}]}}
    assert admits(policies["cozystack-gateway-hostname-policy"], gateway, ns(label)) is allowed


@pytest.mark.parametrize("groups, allowed", [
    ((), False), (("system:masters",), True), (("system:serviceaccounts:cozy-fluxcd",), True),
    (("system:serviceaccounts:tenant-a",), False)])
def test_host_changes_need_a_trusted_caller(policies: dict, groups: tuple, allowed: bool) -> None:
    tenant = {"metadata": {"namespace": "tenant-root"}, "spec": {"host": "new.example"}}
    old_tenant = {"metadata": {"namespace": "tenant-root"}, "spec": {"host": "old.example"}}
    spec = policies["cozystack-tenant-host-policy"]
    assert admits(spec, tenant, None, old_tenant, groups) is allowed
    assert admits(spec, old_tenant, None, old_tenant, groups) is True  # unchanged
    label_spec = policies["cozystack-namespace-host-label-policy"]
    assert admits(label_spec, ns("new.example"), None, ns("old.example"), groups) is allowed
    assert admits(label_spec, ns("old.example"), None, ns("old.example"), groups) is True
    assert admits(label_spec, ns(None), None, None, groups) is True  # no label: not matched


# ---------------------------------------------------------------- Helm 3, Helm 4, the SDK

@pytest.mark.parametrize("values", [
    {"_cluster": {"gpu-vgpu": "true", "root-host": "example.org", "gateway-enabled": "true"}},
    {"_cluster": {"monitoring-enabled": "false"}},
    {}])
def test_helm3_helm4_and_sdk_render_identically(values: dict, helm3: Path, helm4: Path,
                                                tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    outputs = [subprocess.run([str(helm), "template", "cozystack-basics", str(BASICS),
                               "-n", "cozy-system", "-f", str(values_file)],
                              capture_output=True, check=True).stdout for helm in (helm3, helm4)]
    outputs.append(render.template(BASICS, values, "cozystack-basics", "cozy-system"))
    assert outputs[0] == outputs[1] == outputs[2]
    with_vap = [subprocess.run([str(helm), "template", "cozystack-basics", str(BASICS),
                                "-n", "cozy-system", "-f", str(values_file), "--api-versions",
                                VAP_API], capture_output=True, check=True).stdout
                for helm in (helm3, helm4)]
    assert with_vap[0] == with_vap[1]


# ---------------------------------------------------------------- properties

def sdk_render(values: dict, api_versions: list[str]) -> str:
    """`helm template` in process, with capabilities (the SDK's native render
    takes `api_versions` like --api-versions), sorted as Helm prints it."""
    import helm_python
    from helm_python import _native

    loaded = helm_python.Chart.load(str(BASICS))
    try:
        files = json.loads(_native.call_string(
            "helm_render", loaded._raw(), json.dumps(values),
            json.dumps({"name": "cozystack-basics", "namespace": "cozy-system",
                        "api_versions": api_versions})))
    finally:
        loaded.close()
    return render.sort_manifests(files).text()


SWITCH = st.sampled_from([True, False, "true", "false", "", "True", "on", None])
HOSTS = st.sampled_from([None, "", "demo.example", "Customer1.IO", "a.b.c.example"])


@given(root=HOSTS, gateway=SWITCH, monitoring=SWITCH,
       vgpu=st.sampled_from([True, False, "true", "false", None]),
       extra=st.dictionaries(st.sampled_from(["oidc-enabled", "bundle-name",
                                              "cpu-allocation-ratio", "x"]),
                             st.sampled_from(["true", "4", "paas-full", 1]), max_size=3),
       vap=st.booleans())
@settings(max_examples=60, deadline=None)
def test_switch_rules_hold_for_any_platform_values(root: Any, gateway: Any, monitoring: Any,
                                                   vgpu: Any, extra: dict, vap: bool) -> None:
    """Each `_cluster` switch does exactly what its rule says, whatever the others are,
    and the output is valid and stable under a second post-render."""
    cluster: dict[str, Any] = dict(extra)
    for key, value in (("root-host", root), ("gateway-enabled", gateway),
                       ("monitoring-enabled", monitoring), ("gpu-vgpu", vgpu)):
        if value is not None:
            cluster[key] = value
    text = sdk_render({"_cluster": cluster}, [VAP_API] if vap else [])
    result = post_render(text.encode())
    assert result.warnings == []
    assert post_render(result.output).output == result.output  # idempotent
    docs = keyed(objects(result.output.decode()))
    labels = docs[("v1", "Namespace", None, "tenant-root")]["metadata"]["labels"]
    values = docs[("v1", "Secret", "tenant-root", "cozystack-values")]["stringData"]["values.yaml"]
    assert labels[HOST] == ("" if root is None else root)  # unset: "" on the label (issue 29), else as is
    assert values["_namespace"]["host"] == root
    gateway_on = gateway is True or gateway == "true"
    assert (GATEWAY in labels) is gateway_on
    assert ("gateway" in values["_namespace"]) is gateway_on
    monitoring_on = monitoring in (None, "", False, True, "true")  # unset/empty/false -> default on
    services = [k for k in docs if k[1] == "Service"]
    assert len(services) == (3 if monitoring_on else 0)
    entitled = vgpu is True or vgpu == "true"
    assert labels[VGPU_LABEL] == ("true" if entitled else "false")
    assert values["_namespace"].get("vgpu") is (True if entitled else None)
    expected_cluster = {k: v for k, v in cluster.items() if k != "gpu-vgpu" or entitled}
    assert values["_cluster"] == expected_cluster
    policies = {k[3] for k in docs if k[1] == "ValidatingAdmissionPolicy"}
    bindings = {k[3] for k in docs if k[1] == "ValidatingAdmissionPolicyBinding"}
    assert policies == bindings
    assert len(policies) == (0 if not vap else 5 + bool(root))
    assert validate.validate_objects(objects(result.output.decode())) == []


def test_every_platform_key_the_templates_read_is_documented() -> None:
    """The `_cluster` keys the templates read (by name, in `index` or the switch
    helper) are exactly the fields the values.yaml comments document."""
    import re

    from cozyrender.chartdocs.grammar import parse

    text = "".join(p.read_text() for p in (BASICS / "templates").glob("*"))
    read = set(re.findall(r'index (?:\$cluster|\.Values\._cluster|\(\.Values\._cluster[^)]*\)) '
                          r'"([a-z-]+)"', text))
    read |= set(re.findall(r'basics\.switchOn" \(list \$cluster "([a-z-]+)"', text))
    model = parse((BASICS / "values.yaml").read_text())
    documented = {f.name for f in model.typedefs["Cluster"].fields}
    # gpu-budgets-nest no template reads: cozyrender reads it from tenant-root's values Secret.
    assert read | {"gpu-budgets-nest"} == documented == {"root-host", "gateway-enabled", "monitoring-enabled",
                                                         "gpu-vgpu", "gpu-budgets-nest"}
