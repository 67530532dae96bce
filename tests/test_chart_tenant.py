"""The tenant chart's helper rules, one test group per rule: module
HelmReleases, the gateway and scheduling-class inheritance, the Cilium
policies along the ancestor chain, the Keycloak groups (rendered with the
helm 4 binary: only it can declare API versions), the cleanup hook, and the
values schema's budget-key rule against cozyrender.keys.

Facts ported from Cozystack's helm-unittest suites for packages/apps/tenant at
3c780acd (tests/*.yaml there; Apache-2.0) are marked with the suite's file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import render
from cozyrender.keys import InvalidBudgetKey, in_budget_domain, parse_budget_key
from cozyrender.render import RenderError
from tests.conftest import ROOT

TENANT = ROOT / "charts" / "tenant"
PARENT = {"host": "example.org", "etcd": "tenant-root", "ingress": "tenant-root",
          "monitoring": "tenant-root", "seaweedfs": "tenant-root"}
MODULES = {  # name: (kind, artifact, timeout, RetryOnFailure, gated on the metrics operator)
    "etcd": ("Etcd", "cozystack-etcd-application-default-etcd", "30m", True, True),
    "ingress": ("Ingress", "cozystack-ingress-application-default-ingress", "10m", False, True),
    "monitoring": ("Monitoring", "cozystack-monitoring-application-default-monitoring", "10m",
                   True, True),
    "seaweedfs": ("SeaweedFS", "cozystack-seaweedfs-application-default-seaweedfs", "10m",
                  True, False),
    "gateway": ("Gateway", "cozystack-gateway-application-default-gateway", "10m", True, False),
    "computeplane": ("ComputePlane", "cozystack-computeplane-application-kubevirt-computeplane",
                     "10m", False, False),
}


def objs(values: dict | None = None, release: str = "tenant-a",
         namespace: str = "tenant-root") -> list[dict]:
    text = render.template(TENANT, {"_namespace": PARENT, **(values or {})}, release,
                           namespace).decode()
    return [d for d in yaml.safe_load_all(text) if d]


def by(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def helm4_template(helm4: Path, tmp_path: Path, values: dict, api: list[str],
                   release: str = "tenant-alice", namespace: str = "tenant-alice"
                   ) -> subprocess.CompletedProcess:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    return subprocess.run([str(helm4), "template", release, str(TENANT), "-n", namespace,
                           "-f", str(values_file), *[a for v in api for a in ("--api-versions", v)]],
                          capture_output=True, text=True)


# ---------------------------------------------------------------- modules

def test_info_module_always_and_nothing_else_by_default() -> None:
    releases = by(objs(), "HelmRelease")
    assert set(releases) == {"info"}
    info = releases["info"]
    assert info["spec"]["chartRef"] == {"kind": "ExternalArtifact", "namespace": "cozy-system",
                                        "name": "cozystack-info-application-default-info"}
    assert "strategy" not in info["spec"]["install"] and "dependsOn" not in info["spec"]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_switch(module: str) -> None:
    """vmo_webhook_dependson_test.yaml, volume_owner_install_retry_test.yaml,
    monitoring_gateway_install_retry_test.yaml, no_upgrade_force_test.yaml,
    computeplane_module_test.yaml"""
    kind, artifact, timeout, retry, gated = MODULES[module]
    releases = by(objs({module: True}), "HelmRelease")
    assert set(releases) == {"info", module}
    release = releases[module]
    assert release["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
    assert release["metadata"] == {"name": module, "namespace": "tenant-a", "labels": {
        "sharding.fluxcd.io/key": "tenants", "internal.cozystack.io/tenantmodule": "true",
        "app.kubernetes.io/instance": "tenant-a", "app.kubernetes.io/managed-by": "Helm",
        "apps.cozystack.io/application.kind": kind,
        "apps.cozystack.io/application.group": "apps.cozystack.io",
        "apps.cozystack.io/application.name": module}}
    spec = release["spec"]
    assert spec["chartRef"] == {"kind": "ExternalArtifact", "name": artifact,
                                "namespace": "cozy-system"}
    assert (spec["interval"], spec["timeout"]) == ("5m", timeout)
    assert spec["valuesFrom"] == [{"kind": "Secret", "name": "cozystack-values"}]
    assert "releaseName" not in spec
    for action in ("install", "upgrade"):
        assert spec[action]["remediation"] == {"retries": -1}
        assert "force" not in spec[action]
        assert spec[action].get("strategy") == (
            {"name": "RetryOnFailure", "retryInterval": "30s"} if retry else None)
    assert spec.get("dependsOn") == ([{"name": "victoria-metrics-operator",
                                       "namespace": "cozy-victoria-metrics-operator"}]
                                     if gated else None)


def test_computeplane_fails_where_the_package_api_is_served(helm4: Path, tmp_path: Path) -> None:
    proc = helm4_template(helm4, tmp_path, {"computeplane": True}, ["cozystack.io/v1alpha1"])
    assert proc.returncode != 0 and proc.stdout == ""
    assert "cozystack.computeplane-application Package is not installed" in proc.stderr
    proc = helm4_template(helm4, tmp_path, {"computeplane": True}, [])
    assert proc.returncode == 0 and "name: computeplane\n" in proc.stdout


# ---------------------------------------------------------------- gateway

@pytest.mark.parametrize("values, own", [  # gateway_default_test.yaml
    ({"host": ""}, False),
    ({"host": "customer1.io"}, False),
    ({"gateway": True, "host": ""}, True),
    ({"gateway": True, "host": "customer1.io"}, True),
    ({"gateway": False, "host": ""}, False),
    ({"gateway": True, "_cluster": {"gateway-enabled": "false"}}, True),
])
def test_gateway_only_on_explicit_true(values: dict, own: bool) -> None:
    objects = objs(values)
    assert ("gateway" in by(objects, "HelmRelease")) is own
    labels = by(objects, "Namespace")["tenant-a"]["metadata"]["labels"]
    assert labels["namespace.cozystack.io/gateway"] == ("tenant-a" if own else "")


@pytest.mark.parametrize("gateway, expected", [(None, "tenant-a"), (False, "tenant-a"),
                                               (True, "tenant-a-b")])
def test_gateway_is_inherited_from_the_parent(gateway: bool | None, expected: str) -> None:
    values = {"_namespace": {**PARENT, "gateway": "tenant-a"}}
    if gateway is not None:
        values["gateway"] = gateway
    objects = objs(values, "tenant-b", "tenant-a")
    secret = yaml.safe_load(by(objects, "Secret")["cozystack-values"]["stringData"]["values.yaml"])
    assert secret["_namespace"]["gateway"] == expected
    assert by(objects, "Namespace")["tenant-a-b"]["metadata"]["labels"][
        "namespace.cozystack.io/gateway"] == expected


# ---------------------------------------------------------------- inherited services

@pytest.mark.parametrize("service", ["etcd", "ingress", "monitoring", "seaweedfs"])
@pytest.mark.parametrize("own", [False, True])
def test_service_namespaces_are_own_or_inherited(service: str, own: bool) -> None:
    parent = {**PARENT, service: "tenant-a"}
    objects = objs({"_namespace": parent, service: own}, "tenant-b", "tenant-a")
    expected = "tenant-a-b" if own else "tenant-a"
    labels = by(objects, "Namespace")["tenant-a-b"]["metadata"]["labels"]
    assert labels[f"namespace.cozystack.io/{service}"] == expected
    secret = yaml.safe_load(by(objects, "Secret")["cozystack-values"]["stringData"]["values.yaml"])
    assert secret["_namespace"][service] == expected


@pytest.mark.parametrize("parent_class, own_class, expected", [
    (None, "", None), (None, "gold", "gold"), ("silver", "", "silver"),
    ("silver", "gold", "silver"),  # a parent's class always wins
])
def test_scheduling_class_inheritance(parent_class: str | None, own_class: str,
                                      expected: str | None) -> None:
    parent = {**PARENT, **({"schedulingClass": parent_class} if parent_class else {})}
    objects = objs({"_namespace": parent, "schedulingClass": own_class}, "tenant-b", "tenant-a")
    labels = by(objects, "Namespace")["tenant-a-b"]["metadata"]["labels"]
    assert labels.get("scheduler.cozystack.io/scheduling-class") == expected
    secret = yaml.safe_load(by(objects, "Secret")["cozystack-values"]["stringData"]["values.yaml"])
    assert secret["_namespace"].get("schedulingClass") == expected


# ---------------------------------------------------------------- network policies

NAMESPACED_POLICIES = {
    "allow-internal-communication", "allow-external-communication", "allow-to-apiserver",
    "allow-to-dns", "allow-to-dashboard", "allow-to-linstor-gui", "allow-to-keycloak",
    "allow-to-grafana-dashboards", "allow-to-cdi-upload-proxy", "allow-to-ingress"}


@pytest.mark.parametrize("release, namespace, name, parents", [
    ("tenant-a", "tenant-root", "tenant-a", ["tenant-root"]),
    ("tenant-b", "tenant-a", "tenant-a-b", ["tenant-a"]),
    ("tenant-c", "tenant-a-b", "tenant-a-b-c", ["tenant-a", "tenant-a-b"]),
    ("tenant-root", "tenant-root", "tenant-root", None),
])
def test_policies_along_the_chain(release: str, namespace: str, name: str,
                                  parents: list[str] | None) -> None:
    objects = objs(release=release, namespace=namespace)
    local = by(objects, "CiliumNetworkPolicy")
    assert set(local) == NAMESPACED_POLICIES
    assert all(p["metadata"]["namespace"] == name for p in local.values())
    grafana = local["allow-to-grafana-dashboards"]  # networkpolicy_grafana_dashboards_test.yaml
    assert grafana["spec"]["egress"][0]["toEndpoints"][0]["matchLabels"] == {
        "k8s:io.kubernetes.pod.namespace": "cozy-grafana-operator"}
    cluster = by(objects, "CiliumClusterwideNetworkPolicy")
    assert set(cluster) == {f"{name}-egress", f"{name}-ingress"}
    egress = cluster[f"{name}-egress"]["spec"]
    assert egress["endpointSelector"] == {"matchLabels": {"k8s:io.kubernetes.pod.namespace": name}}
    rules = egress["egress"]
    assert rules[0] == {"toEndpoints": [{"matchLabels": {
        f"k8s:io.cilium.k8s.namespace.labels.tenant.cozystack.io/{name}": ""}}]}
    ingress = cluster[f"{name}-ingress"]["spec"]["ingress"]
    if parents is None:
        assert len(rules) == 1 and len(ingress) == 3
        return
    selectors = [{"k8s:app.kubernetes.io/name": "vminsert"},
                 {"k8s:app.kubernetes.io/instance": "etcd"}, {"cozystack.io/service": "ingress"}]
    assert rules[1:] == [{"toEndpoints": [
        {"matchLabels": {**selector, "k8s:io.kubernetes.pod.namespace": p}} for p in parents]}
        for selector in selectors]
    assert ingress[-1] == {"fromEndpoints": [
        {"matchLabels": {"k8s:io.kubernetes.pod.namespace": p}} for p in parents]}


@pytest.mark.parametrize("module, policy", [("ingress", "tenant-a-ingress-ingress"),
                                            ("etcd", "tenant-a-ingress-etcd"),
                                            ("monitoring", "tenant-a-egress-virt-handler")])
def test_module_policies(module: str, policy: str) -> None:
    cluster = by(objs({module: True}), "CiliumClusterwideNetworkPolicy")
    assert set(cluster) == {"tenant-a-egress", "tenant-a-ingress", policy}
    selector = cluster[policy]["spec"]["endpointSelector"]["matchLabels"]
    assert selector["k8s:io.kubernetes.pod.namespace"] == "tenant-a"
    if module == "etcd":
        assert cluster[policy]["spec"]["ingress"] == [{"fromEndpoints": [{"matchLabels": {
            "k8s:io.cilium.k8s.namespace.labels.namespace.cozystack.io/etcd": "tenant-a",
            "policy.cozystack.io/allow-to-etcd": "true"}}]}]
    if module == "monitoring":
        rule = cluster[policy]["spec"]["egress"][0]
        assert rule["toPorts"] == [{"ports": [{"port": "8443", "protocol": "TCP"}]}]


# ---------------------------------------------------------------- Keycloak groups

@pytest.mark.parametrize("cluster, api, count", [  # keycloakgroups_oidc_test.yaml
    ({"oidc-enabled": "true"}, ["v1.edp.epam.com/v1"], 4),
    ({"oidc-enabled": "false"}, ["v1.edp.epam.com/v1"], 0),
    (None, ["v1.edp.epam.com/v1"], 0),
    ({"oidc-enabled": "true"}, [], 0),                                   # API not served
    ({"oidc-enabled": "true"}, ["v1.edp.epam.com/v1alpha1/KeycloakRealmGroup"], 0),
])
def test_keycloak_groups(helm4: Path, tmp_path: Path, cluster: dict | None, api: list[str],
                         count: int) -> None:
    values = {} if cluster is None else {"_cluster": cluster}
    proc = helm4_template(helm4, tmp_path, values, api)
    assert proc.returncode == 0, proc.stderr
    groups = [d for d in yaml.safe_load_all(proc.stdout)
              if d and d["kind"] == "KeycloakRealmGroup"]
    assert len(groups) == count
    assert [g["metadata"]["name"] for g in groups] == [
        f"tenant-alice-alice-{level}" for level in ("view", "use", "admin", "super-admin")][:count]
    for group in groups:
        assert group["metadata"]["namespace"] == "tenant-alice-alice"
        assert group["spec"] == {"name": group["metadata"]["name"], "realmRef": {
            "kind": "ClusterKeycloakRealm", "name": "keycloakrealm-cozy"}}


@pytest.mark.parametrize("flag", [True, 1, ["true"]])
def test_non_string_oidc_switch_is_refused(flag: object) -> None:
    with pytest.raises(RenderError, match='_cluster.oidc-enabled must be the string "true"'):
        objs({"_cluster": {"oidc-enabled": flag}})


# ---------------------------------------------------------------- cleanup hook

def test_cleanup_hook() -> None:
    """cleanup_role_watch_test.yaml"""
    objects = [o for o in objs(release="tenant-test", namespace="tenant-test")
               if o["metadata"]["name"] == "tenant-test-test-cleanup"]
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [
        ("ServiceAccount", "cozy-system"), ("Role", "tenant-test-test"),
        ("RoleBinding", "tenant-test-test"), ("Job", "cozy-system")]
    weights = [o["metadata"]["annotations"]["helm.sh/hook-weight"] for o in objects]
    assert weights == ["-5", "-5", "-5", "0"]
    assert all(o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete" for o in objects)
    role, binding, job = objects[1], objects[2], objects[3]
    assert role["rules"] == [{"apiGroups": ["helm.toolkit.fluxcd.io"],
                              "resources": ["helmreleases"],
                              "verbs": ["get", "list", "watch", "delete"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tenant-test-test-cleanup",
                                    "namespace": "cozy-system"}]
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert (spec["activeDeadlineSeconds"], spec["backoffLimit"], pod["restartPolicy"],
            pod["terminationGracePeriodSeconds"]) == (270, 0, "Never", 10)
    # the Job's failure reaches helm inside helm-controller's 300s budget
    assert spec["activeDeadlineSeconds"] + pod["terminationGracePeriodSeconds"] < 300
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    container = pod["containers"][0]
    assert container["image"] == "docker.io/clastix/kubectl:v1.32"
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert container["resources"]["requests"] == {"cpu": "10m", "memory": "64Mi"}
    script = container["command"][2]
    assert 'NAMESPACE="tenant-test-test"' in script
    waves = [line for line in script.splitlines() if line.lstrip().startswith("-l ")]
    assert waves == ["  -l 'apps.cozystack.io/application.kind,internal.cozystack.io/tenantmodule!=true' \\",
                     "  -l 'apps.cozystack.io/application.kind,internal.cozystack.io/tenantmodule=true' \\"]
    assert script.count("--timeout=90s") == 2 and script.startswith("set -e\n")


def test_cleanup_script_runs_under_sh(tmp_path: Path) -> None:
    """The script is a valid POSIX sh program (parsed, not run)."""
    job = by(objs(), "Job")["tenant-a-cleanup"]
    script = tmp_path / "cleanup.sh"
    script.write_text(job["spec"]["template"]["spec"]["containers"][0]["command"][2])
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0


# ---------------------------------------------------------------- budget keys in the schema

SCHEMA = json.loads((TENANT / "values.schema.json").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)

_word = st.text(alphabet="abcxyzAZ019-._", min_size=0, max_size=12)
domain_keys = st.one_of(
    st.builds(lambda p, d, r: f"{p}{d}/{r}", st.one_of(st.just(""), _word.map(lambda w: w + ".")),
              st.sampled_from(["gpuclass.cozystack.io", "GPUClass.cozystack.io",
                               "gpuclass.COZYSTACK.io"]),
              st.sampled_from(["devices", "Devices", "memory", "devices/x", ""])),
    st.builds(lambda q, c: f"{q}{c}.gpuclass.cozystack.io/devices",
              st.sampled_from(["", "requests.", "limits.", "Requests."]),
              st.from_regex(r"[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?", fullmatch=True)),
)


def _key_ok(key: str) -> bool:
    try:
        parse_budget_key(key)
    except InvalidBudgetKey:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(domain_keys)
def test_schema_budget_key_rule_is_cozyrender_keys_rule(key: str) -> None:
    """The schema accepts a key in the budget domain exactly when
    cozyrender.keys.parse_budget_key does; keys outside the domain are
    ordinary quantities."""
    errors = list(VALIDATOR.iter_errors({"resourceQuotas": {key: 1}}))
    if in_budget_domain(key):
        assert (not errors) is _key_ok(key), (key, [e.message for e in errors])
    else:
        assert not errors


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(-5, 10**6), st.text(max_size=6).filter(lambda t: "\n" not in t),
                 st.floats(allow_nan=False), st.booleans()))
def test_schema_budget_values_are_whole_device_counts(value: object) -> None:
    """(Python's `$` also matches before a final newline, Go's does not: the
    newline case is checked through Helm below.)"""
    errors = list(VALIDATOR.iter_errors({"resourceQuotas": {
        "a100.gpuclass.cozystack.io/devices": value}}))
    whole = ((isinstance(value, int) and not isinstance(value, bool) and value >= 0)
             or (isinstance(value, float) and value.is_integer() and value >= 0)
             or (isinstance(value, str) and value.isascii() and value.isdigit()))
    assert (not errors) is whole, value


def test_schema_refusal_names_the_key_through_helm() -> None:
    with pytest.raises(RenderError, match=r"x\.y\.gpuclass\.cozystack\.io/devices"):
        objs({"resourceQuotas": {"x.y.gpuclass.cozystack.io/devices": 1}})
    with pytest.raises(RenderError, match="a100.gpuclass.cozystack.io~1devices"):
        objs({"resourceQuotas": {"a100.gpuclass.cozystack.io/devices": "2\n"}})


# ---------------------------------------------------------------- hostile names

@settings(max_examples=120, deadline=None)
@given(st.text(alphabet="abcAZ09-._/ ", min_size=1, max_size=70),
       st.from_regex(r"tenant-[a-z0-9.]{1,40}", fullmatch=True))
def test_any_namespace_gives_a_valid_tenant_namespace_or_a_refusal(namespace: str,
                                                                   release: str) -> None:
    """Whatever the release namespace (the attacker's lever: it is the parent's
    name), the chart either names a DNS-1123 label built from it, or refuses."""
    import re

    try:
        objects = objs(namespace=namespace, release=release)
    except RenderError:
        return
    word = release.split("-", 1)[1]
    expected = f"tenant-{word}" if namespace == "tenant-root" else f"{namespace}-{word}"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", expected)
    assert namespace.startswith("tenant-") and "-" not in word
    names = {o["metadata"].get("namespace") for o in objects} - {"cozy-system", "cozy-public"}
    assert names == {None, expected}


@pytest.mark.parametrize("values, message", [
    ({"gpu": {"vgpu": "yes"}}, "gpu.vgpu must be true or false, got yes"),
    ({"_namespace": {"vgpu": 1}}, "_namespace.vgpu must be true or false, got 1"),
])
def test_render_inputs_hold_without_the_schema(helm4: Path, tmp_path: Path, values: dict,
                                               message: str) -> None:
    """`helm template --skip-schema-validation` skips the schema; the chart still
    never hands the post-renderer a render input other than "true"/"false"."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    proc = subprocess.run([str(helm4), "template", "tenant-a", str(TENANT), "-n", "tenant-root",
                           "-f", str(values_file), "--skip-schema-validation"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stdout == ""
    assert message in proc.stderr


# -- issue 19 item 5: no `limits`/`requests` key in resourceQuotas -------------------------------------
# Cozystack's tenant chart (3c780acd) renders the quota through cozy-lib's resources.sanitize
# (packages/library/cozy-lib/templates/_resources.tpl), which stops on a `limits` or `requests` key.

@pytest.mark.parametrize("quotas", [{"limits": "1", "cpu": 1}, {"requests": "2"}, {"limits": "1", "requests": "1"}])
def test_a_limits_or_requests_key_stops_the_render(quotas, helm3: Path, tmp_path: Path):
    with pytest.raises(RenderError, match=r"resourceQuotas\.(limits|requests): resourceQuotas maps resource names"):
        objs({"resourceQuotas": quotas})
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"resourceQuotas": quotas}))
    proc = subprocess.run([str(helm3), "template", "tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(values)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "is not a resource name" in proc.stderr and proc.stdout == ""


def test_a_key_spelled_limits_dot_x_still_renders_as_cozystack_renders_it():
    (quota,) = by(objs({"resourceQuotas": {"limits.cpu": "1"}}), "ResourceQuota").values()
    assert quota["spec"]["hard"] == {"requests.limits.cpu": "1", "limits.limits.cpu": "1"}
