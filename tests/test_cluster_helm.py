"""Helm against the real API server (kube-apiserver v1.35.4): `helm install`,
`upgrade` and `uninstall` of the `tenant` and `cozystack-basics` charts with
the post-renderer, Helm 3 as an executable and Helm 4 as the plugin, with the
CRDs of every kind the charts render installed (Cilium network policies, Flux
HelmRelease, KeycloakRealmGroup, built from the bundled schemas). Every object
must be accepted by the server, and an upgrade from Cozystack's own chart
(3c780acd, its stored renders) to ours must delete nothing a tenant had.

The control plane runs no kubelet: the tenant chart's pre-delete cleanup Job
would never complete, so uninstalls run with `--no-hooks` (the Job's manifest
is still checked by the server, with a server-side dry run). The namespace
and garbage-collector controllers run, so an uninstalled tenant's namespace
really goes, and a later release can create it again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ROOT / "charts"
UPSTREAM = ROOT / "tests" / "data" / "cozystack-3c780acd"
SCHEMAS = ROOT / "cozyrender" / "schemas"

# (file, group, version, kind, plural, scope) of the bundled schemas, wrapped as CRDs.
BUNDLED_CRDS = [
    ("cilium.io_v2_ciliumnetworkpolicy.json", "cilium.io", "v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies", "Namespaced"),
    ("cilium.io_v2_ciliumclusterwidenetworkpolicy.json", "cilium.io", "v2", "CiliumClusterwideNetworkPolicy",
     "ciliumclusterwidenetworkpolicies", "Cluster"),
    ("helm.toolkit.fluxcd.io_v2_helmrelease.json", "helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", "Namespaced"),
    ("v1.edp.epam.com_v1_keycloakrealmgroup.json", "v1.edp.epam.com", "v1", "KeycloakRealmGroup", "keycloakrealmgroups",
     "Namespaced"),
]

GPU_VALUES = {
    "resourceQuotas": {"cpu": 2, "memory": "4Gi", "a100.gpuclass.cozystack.io/devices": 2},
    "gpu": {"vgpu": True},
    "_namespace": {"host": "example.org", "vgpu": True},
    "_cluster": {"gpu-vgpu": True},
}


def _structural(node):
    """The bundled Cilium schemas are the CRDs-catalog's conversion, which adds
    `additionalProperties: false` beside `properties` (a structural schema
    may not have both; the CRD itself has neither): drop it."""
    if isinstance(node, dict):
        return {k: _structural(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_structural(item) for item in node]
    return node


def _crd(file: str, group: str, version: str, kind: str, plural: str, scope: str) -> dict:
    schema = _structural(json.loads((SCHEMAS / file).read_text()))
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group, "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema},
                          "subresources": {"status": {}}}],
        },
    }


@pytest.fixture(scope="module")
def plane(apiserver):
    crds = [_crd(*spec) for spec in BUNDLED_CRDS]
    apiserver.kubectl("apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
    apiserver.wait_crds_established()
    return apiserver


@pytest.fixture(scope="module")
def helm(plane, tmp_path_factory, helm3, helm4):
    """Run a Helm binary against the control plane, in an isolated Helm home
    with the Helm 4 plugin installed and the venv's `cozyrender` first on PATH."""
    home = tmp_path_factory.mktemp("helm-home")
    envs = {}
    for version in (3, 4):  # one Helm home each: Helm 3 cannot read a Helm 4 plugin
        env = dict(os.environ)
        for name in ("CONFIG", "DATA", "CACHE"):
            env[f"HELM_{name}_HOME"] = str(home / f"helm{version}" / name.lower())
        env.pop("HELM_PLUGINS", None)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["KUBECONFIG"] = str(plane.kubeconfig)
        envs[version] = env
    installed = subprocess.run([helm4, "plugin", "install", ROOT / "plugins" / "cozyrender"], env=envs[4],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr

    def run(version: int, *args, values: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
        binary = helm3 if version == 3 else helm4
        extra: list[str] = []
        if values is not None:
            values_file = home / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.yaml"
            values_file.write_text(yaml.safe_dump(values))
            extra = ["-f", str(values_file)]
        result = subprocess.run([binary, *map(str, args), *extra], env=envs[version], capture_output=True, text=True,
                                timeout=300)
        if check:
            assert result.returncode == 0, f"helm{version} {' '.join(map(str, args))}: {result.stderr}"
        return result

    return run


def post_renderer(version: int) -> list[str]:
    """Helm 3 runs the executable with `post-render`; Helm 4 the plugin by name."""
    return ["--post-renderer", "cozyrender", "--post-renderer-args", "post-render"] if version == 3 else \
        ["--post-renderer", "cozyrender"]


def manifest_objects(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def key(obj: dict, default_namespace: str) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    namespaced = obj["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding", "CiliumClusterwideNetworkPolicy",
                                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    return (obj["apiVersion"].rpartition("/")[0], obj["kind"],
            meta.get("namespace", default_namespace) if namespaced else "", meta["name"])


def live(plane, obj: dict, namespace: str) -> dict | None:
    group, kind, ns, name = key(obj, namespace)
    resource = f"{kind}.{group}" if group else kind
    args = ["get", resource, name, "-o", "json"] + (["-n", ns] if ns else [])
    result = plane.kubectl(*args, check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def release_manifest(helm, version: int, release: str, namespace: str) -> list[dict]:
    return manifest_objects(helm(version, "get", "manifest", release, "-n", namespace).stdout)


def assert_all_live(plane, objects: list[dict], namespace: str) -> None:
    missing = [key(obj, namespace) for obj in objects if live(plane, obj, namespace) is None]
    assert not missing, f"not in the cluster: {missing}"


@pytest.fixture(scope="module")
def basics(plane, helm) -> list[dict]:
    """cozystack-basics installed with the Helm 4 plugin: it creates tenant-root, as in Cozystack."""
    values = yaml.safe_load((UPSTREAM / "basics-full-platform" / "values.yaml").read_text())
    values.setdefault("_cluster", {})["gpu-vgpu"] = True
    helm(4, "install", "cozystack-basics", CHARTS / "cozystack-basics", "-n", "cozy-system", *post_renderer(4), values=values)
    return release_manifest(helm, 4, "cozystack-basics", "cozy-system")


def test_cozystack_basics_installs_with_the_post_renderer(plane, basics):
    objects = basics
    kinds = {obj["kind"] for obj in objects}
    assert {"Namespace", "HelmRelease", "ValidatingAdmissionPolicy", "ClusterRole"} <= kinds
    assert_all_live(plane, objects, "cozy-system")
    root = live(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root"}}, "")
    assert root["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"


@pytest.mark.parametrize("version", [3, 4])
def test_tenant_install_upgrade_uninstall(plane, helm, basics, version):
    release = f"tenant-h{version}"
    namespace = f"tenant-h{version}"
    helm(version, "install", release, CHARTS / "tenant", "-n", "tenant-root", *post_renderer(version), values=GPU_VALUES)
    objects = release_manifest(helm, version, release, "tenant-root")
    assert_all_live(plane, objects, "tenant-root")
    quota = live(plane, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": namespace}}, "")
    assert set(quota["spec"]["hard"]) == {"limits.cpu", "requests.cpu", "limits.memory", "requests.memory"}
    ns = live(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, "")
    assert ns["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"

    upgraded = dict(GPU_VALUES, resourceQuotas={"cpu": 4, "a100.gpuclass.cozystack.io/devices": 3})
    helm(version, "upgrade", release, CHARTS / "tenant", "-n", "tenant-root", *post_renderer(version), values=upgraded)
    quota = live(plane, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": namespace}}, "")
    assert quota["spec"]["hard"]["limits.cpu"] == "4" and "limits.memory" not in quota["spec"]["hard"]

    uninstall(plane, helm, version, release, namespace)
    left = [key(obj, "tenant-root") for obj in objects if live(plane, obj, "tenant-root") is not None]
    assert not left, f"left behind: {left}"


def uninstall(plane, helm, version: int, release: str, namespace: str) -> None:
    """`helm uninstall`, then wait until the namespace controller has removed the tenant's namespace."""
    helm(version, "uninstall", release, "-n", "tenant-root", "--no-hooks")
    plane.kubectl("wait", "--for=delete", f"namespace/{namespace}", "--timeout=90s", timeout=120)


def test_the_cleanup_hook_job_is_accepted_by_the_server(plane, helm, basics):
    rendered = helm(4, "template", "tenant-hook", CHARTS / "tenant", "-n", "tenant-root", *post_renderer(4), values=GPU_VALUES)
    hooks = [obj for obj in manifest_objects(rendered.stdout)
             if "helm.sh/hook" in (obj["metadata"].get("annotations") or {})]
    assert any(obj["kind"] == "Job" for obj in hooks)
    plane.kubectl("create", "namespace", "tenant-hook", check=False)
    for obj in hooks:
        obj = json.loads(json.dumps(obj))
        obj["metadata"]["namespace"] = obj["metadata"].get("namespace", "tenant-root")
        plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))


# case -> objects the upgrade is expected to delete. A GPU-only tenant (its
# resourceQuotas hold budget keys alone) renders in ours as a tenant with no
# ordinary quota, as Cozystack renders one without resourceQuotas: its
# ResourceQuota held only budget keys (stored by the API server, enforced by
# nothing) and goes, and so does the LimitRange Cozystack renders beside any
# quota. Every other object stays.
UPGRADE_CASES = {
    "depth1-plain": set(),
    "gpu-mixed": set(),
    "depth1-no-parent-values": set(),
    "gpu-only-all-classes": {("", "ResourceQuota", "tenant-a", "tenant-quota"),
                             ("", "LimitRange", "tenant-a", "tenant-range-limits")},
}


@pytest.mark.parametrize("case", UPGRADE_CASES)
def test_upgrade_from_cozystacks_chart_deletes_nothing_a_tenant_had(plane, helm, basics, tmp_path, case):
    """Cozystack's chart (its stored render for these values, served as a
    chart of static templates named `tenant`) installed first, then upgraded
    to ours with the same values and the post-renderer."""
    folder = UPSTREAM / case
    command = (folder / "upstream.yaml").read_text().splitlines()[0]
    release = command.split()[3]
    namespace = command.split(" -n ")[1].split()[0]
    assert namespace == "tenant-root", command
    values = yaml.safe_load((folder / "values.yaml").read_text()) or {}
    chart = tmp_path / "tenant"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: tenant\nversion: 0.0.0-cozystack-3c780acd\n")
    # Static text: no template actions survive in a render, but guard `{{` anyway.
    text = (folder / "upstream.yaml").read_text().replace("{{", '{{ "{{" }}')
    (chart / "templates" / "upstream.yaml").write_text(text)
    helm(3, "install", release, chart, "-n", "tenant-root")
    before = release_manifest(helm, 3, release, "tenant-root")
    assert_all_live(plane, before, "tenant-root")

    helm(3, "upgrade", release, CHARTS / "tenant", "-n", "tenant-root", *post_renderer(3), values=values)
    after = release_manifest(helm, 3, release, "tenant-root")
    kept = {key(obj, "tenant-root") for obj in after}
    dropped = {key(obj, "tenant-root") for obj in before if key(obj, "tenant-root") not in kept}
    assert dropped == UPGRADE_CASES[case], f"the upgrade deletes {sorted(dropped)}"
    assert_all_live(plane, [obj for obj in before if key(obj, "tenant-root") not in dropped], "tenant-root")
    for obj in before:
        if key(obj, "tenant-root") in dropped:
            assert live(plane, obj, "tenant-root") is None
            if obj["kind"] == "ResourceQuota":
                assert all("gpuclass.cozystack.io/" in hard for hard in obj["spec"]["hard"])
    uninstall(plane, helm, 3, release, release)
