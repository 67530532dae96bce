"""Flux postRenderers: the generated kustomize patches do what the post-renderer does.

Checked with real kustomize (the pinned kubectl's `kubectl kustomize`) on every
golden case of both charts and on generated quota keys and vGPU chains.
Kustomize drops comments and reorders keys, so objects are compared as data,
keyed by apiVersion/kind/namespace/name.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cozyrender import flux
from cozyrender.golden import find_cases, run_golden
from cozyrender.keys import InvalidBudgetKey, in_budget_domain, parse_budget_key
from cozyrender.postrender import post_render

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
TENANT = ROOT / "charts" / "tenant"


def kustomize(kubectl: Path, raw: bytes, post_renderers: list[dict], workdir: Path) -> bytes:
    """What Flux does with post-renderers: one kustomize build per entry, in order."""
    data = raw
    for number, entry in enumerate(post_renderers or [{"kustomize": {}}]):
        folder = workdir / f"entry-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "release.yaml").write_bytes(data)
        kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                         "resources": ["release.yaml"], **entry["kustomize"]}
        (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
        done = subprocess.run([str(kubectl), "kustomize", str(folder)], capture_output=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        data = done.stdout
    return data


def assert_equivalent(kubectl: Path, raw: bytes, workdir: Path) -> flux.Derived:
    derived = flux.derive(raw)
    expected = flux.parse_objects(post_render(raw).output)
    actual = flux.parse_objects(kustomize(kubectl, raw, derived.post_renderers, workdir))
    assert sorted(actual) == sorted(expected)
    for key in expected:  # strict YAML equality: kustomize must not turn 'true' into true
        assert flux.same(actual[key], expected[key]), (flux.describe(key), actual[key], expected[key])
    return derived


# ---------------------------------------------------------------- golden cases

CASES = find_cases(GOLDEN)


@pytest.fixture(scope="module")
def golden_raw() -> dict[Path, bytes]:
    report = run_golden(GOLDEN)
    assert not report.errors
    return {r.case.path: r.raw.encode("utf-8") for r in report.results}


def test_golden_cases_cover_both_charts():
    charts = {yaml.safe_load((c / "case.yaml").read_text())["chart"] for c in CASES}
    assert {"charts/tenant", "charts/cozystack-basics"} <= charts
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[str(c.relative_to(GOLDEN)) for c in CASES])
def test_kustomize_equals_post_render_on_golden_case(case, golden_raw, kubectl, tmp_path):
    raw = golden_raw[case]
    derived = assert_equivalent(kubectl, raw, tmp_path)
    # Every patch selects exactly one object, and only objects the post-render changes.
    before = flux.parse_objects(raw)
    after = flux.parse_objects(post_render(raw).output)
    changed = {k for k in before if k not in after or not flux.same(before[k], after[k])}
    assert len(derived.patches) == len(changed)
    for patch in derived.patches:
        matches = [k for k in before if flux.selects(
            {f: v.replace("\\", "") for f, v in patch["target"].items()}, k)]
        assert len(matches) == 1 and matches[0] in changed


def test_gpu_only_tenant_patches(golden_raw):
    derived = flux.derive(golden_raw[GOLDEN / "tenant" / "gpu-both"])
    by_kind = {p["target"]["kind"]: p for p in derived.patches}
    assert set(by_kind) == {"LimitRange", "Namespace", "ResourceQuota"}
    assert by_kind["ResourceQuota"]["target"] == {
        "kind": "ResourceQuota", "name": "tenant-quota", "namespace": "tenant-a"}
    assert yaml.safe_load(by_kind["ResourceQuota"]["patch"])["$patch"] == "delete"
    assert yaml.safe_load(by_kind["LimitRange"]["patch"])["$patch"] == "delete"
    assert derived.patches[0]["patch"].startswith(flux.MARKER + "\n")


def test_mixed_quota_removes_budget_keys_escaped(golden_raw):
    derived = flux.derive(golden_raw[GOLDEN / "tenant" / "mixed"])
    quota = next(p for p in derived.patches if p["target"]["kind"] == "ResourceQuota")
    ops = yaml.safe_load(quota["patch"])
    assert ops and all(op["op"] == "remove" for op in ops)
    assert all(op["path"].startswith("/spec/hard/") and "~1" in op["path"] for op in ops)
    assert not any(p["target"]["kind"] == "LimitRange" for p in derived.patches)


def test_entitled_tenant_replaces_secret_values(golden_raw):
    derived = flux.derive(golden_raw[GOLDEN / "chain" / "p1-r1-c1"])
    secret = next(p for p in derived.patches if p["target"]["kind"] == "Secret")
    assert secret["target"] == {"kind": "Secret", "name": "cozystack-values",
                                "namespace": "tenant-a-b"}
    test, replace = yaml.safe_load(secret["patch"])
    assert test["op"] == "test" and replace["op"] == "replace"
    assert replace["path"] == "/stringData/values.yaml"
    assert yaml.safe_load(replace["value"])["_namespace"]["vgpu"] is True


def test_stale_patches_fail_instead_of_writing_old_values(golden_raw, kubectl, tmp_path):
    """Patches derived for an entitled tenant, applied to the release of a
    non-entitled one: the `test` guard makes kustomize (and so Flux) fail."""
    entitled = flux.derive(golden_raw[GOLDEN / "chain" / "p1-r1-c1"])
    other = golden_raw[GOLDEN / "chain" / "p1-r0-c1"]
    with pytest.raises(AssertionError, match="test"):
        kustomize(kubectl, other, entitled.post_renderers, tmp_path)


# ---------------------------------------------------------------- unit rules

def test_pointer_escapes_per_rfc6901():
    assert flux.pointer(["spec", "hard", "a~b/c"]) == "/spec/hard/a~0b~1c"
    assert flux.pointer(["x", "~1"]) == "/x/~01"


def test_diff_operations_types_and_order():
    old = {"a": 1, "b": {"c": True, "d": "x"}, "e": [1]}
    new = {"b": {"c": 1, "d": "x", "f": "y"}, "e": [1], "g": None}
    assert flux.diff_operations(old, new) == [
        {"op": "remove", "path": "/a"},
        {"op": "replace", "path": "/b/c", "value": 1},
        {"op": "add", "path": "/b/f", "value": "y"},
        {"op": "add", "path": "/g", "value": None},
    ]


def test_diff_operations_compare_yaml_types_inside_lists():
    assert flux.diff_operations({"a": [{"x": True}]}, {"a": [{"x": 1}]}) == [
        {"op": "replace", "path": "/a", "value": [{"x": 1}]}]
    assert flux.diff_operations({"a": [{"x": 1}]}, {"a": [{"x": 1}]}) == []


def test_target_adds_group_version_when_needed():
    keys = [("v1", "Thing", "", "x"), ("example.com/v1", "Thing", "", "x"), ("v1", "Other", "", "y.z")]
    assert flux.target_for(keys[0], keys) == {"group": "", "version": "v1", "kind": "Thing", "name": "x"}
    assert flux.target_for(keys[2], keys) == {"kind": "Other", "name": "y\\.z"}
    with pytest.raises(flux.FluxError):
        flux.target_for(("v1", "Thing", "", "x"), [*keys, ("v1", "Thing", "", "x")])


def test_untouched_release_gives_no_entry():
    raw = b"---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
    assert flux.derive(raw).post_renderers == []
    assert flux.format_post_renderers([]) == "postRenderers: []\n"


def test_derive_is_deterministic(golden_raw):
    raw = golden_raw[GOLDEN / "tenant" / "gpu-both"]
    first = flux.format_post_renderers(flux.derive(raw).post_renderers)
    assert first == flux.format_post_renderers(flux.derive(raw).post_renderers)
    kinds = [p["target"]["kind"] for p in flux.derive(raw).patches]
    assert kinds == sorted(kinds)


def test_bad_raw_is_a_flux_error():
    with pytest.raises(flux.FluxError, match="post-render"):
        flux.derive(b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  annotations:\n"
                    b"    render.cozystack.io/vgpu-requested: 'maybe'\n"
                    b"    render.cozystack.io/vgpu-parent: 'true'\n")


# ---------------------------------------------------------------- properties

FLAG = st.sampled_from([True, False, "true", "false"])
ORDINARY = st.sampled_from(["cpu", "memory", "requests.storage", "services.loadbalancers",
                            "nvidia.com/gpu", "requests.nvidia.com/gpu",
                            "evilgpuclass.cozystack.io/devices",
                            "gpuclass.cozystack.io.example.com/devices", "ex~ample.com/g~pu"])
CLASS = st.sampled_from(["", "a100.", "h100.", "A100.", "t~4.", "x.y."])
RESOURCE = st.sampled_from(["devices", "memory", "dev~ices", "devices/extra"])
PREFIX = st.sampled_from(["", "requests.", "limits."])
BUDGET = st.builds(lambda p, c, r: f"{p}{c}gpuclass.cozystack.io/{r}", PREFIX, CLASS, RESOURCE)
QUOTAS = st.dictionaries(st.one_of(ORDINARY, BUDGET), st.integers(0, 9), max_size=6)


def _budget_key_ok(key: str) -> bool:
    try:
        parse_budget_key(key)
    except InvalidBudgetKey:
        return False
    return True


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(quotas=QUOTAS, requested=FLAG, parent=st.one_of(st.none(), FLAG),
       cluster=st.one_of(st.none(), FLAG))
def test_property_chart_render_equivalence(quotas, requested, parent, cluster, kubectl, tmp_path_factory):
    # The tenant chart's schema refuses malformed budget keys (tests/test_chart_tenant.py);
    # how the post-renderer treats them is the stream-level property's to check.
    quotas = {k: v for k, v in quotas.items() if not in_budget_domain(k) or _budget_key_ok(k)}
    values: dict = {"resourceQuotas": quotas, "gpu": {"vgpu": requested},
                    "_namespace": {"host": "example.org"}, "_cluster": {"root-host": "example.org"}}
    if parent is not None:
        values["_namespace"]["vgpu"] = parent
    if cluster is not None:
        values["_cluster"]["gpu-vgpu"] = cluster
    try:
        raw = flux.render_raw(TENANT, "tenant-a", "tenant-root", inline=[values])
    except flux.FluxError as err:  # the chart refuses two keys that flatten to one
        assume("both set the quota key" not in str(err))
        raise
    assert_equivalent(kubectl, raw, tmp_path_factory.mktemp("chart"))


def _stream(quotas: dict, requested: str, parent: str, label: str | None, encoded: bool,
            namespace_vgpu: object, cluster_vgpu: object) -> bytes:
    """A release as a chart might render it, with what charts here never do:
    a pre-set label, base64 `data`, spoofed `_namespace.vgpu`."""
    metadata: dict = {"name": "tenant-x"}
    if label is not None:
        metadata["labels"] = {"namespace.cozystack.io/vgpu": label, "keep": "me"}
    metadata["annotations"] = {"render.cozystack.io/vgpu-requested": requested,
                               "render.cozystack.io/vgpu-parent": parent}
    values: dict = {"_namespace": {"host": "x.example.org"}}
    if namespace_vgpu is not None:
        values["_namespace"]["vgpu"] = namespace_vgpu
    if cluster_vgpu is not None:
        values["_cluster"] = {"gpu-vgpu": cluster_vgpu}
    text = yaml.safe_dump(values)
    secret: dict = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "cozystack-values", "namespace": "tenant-x"}}
    if encoded:
        secret["data"] = {"values.yaml": base64.b64encode(text.encode()).decode()}
    else:
        secret["stringData"] = {"values.yaml": text}
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}, secret]
    if quotas:
        docs.append({"apiVersion": "v1", "kind": "ResourceQuota",
                     "metadata": {"name": "q", "namespace": "tenant-x"}, "spec": {"hard": quotas}})
        docs.append({"apiVersion": "v1", "kind": "LimitRange",
                     "metadata": {"name": "lr", "namespace": "tenant-x"},
                     "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}})
    return "".join(f"---\n# Source: t/templates/{i}.yaml\n{yaml.safe_dump(d, sort_keys=False)}"
                   for i, d in enumerate(docs)).encode()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(quotas=QUOTAS, requested=st.sampled_from(["true", "false"]),
       parent=st.sampled_from(["true", "false"]),
       label=st.sampled_from([None, "true", "false", "bogus"]), encoded=st.booleans(),
       namespace_vgpu=st.sampled_from([None, True, False, "yes"]),
       cluster_vgpu=st.sampled_from([None, True, False, "true", "off"]))
def test_property_stream_equivalence(quotas, requested, parent, label, encoded, namespace_vgpu,
                                     cluster_vgpu, kubectl, tmp_path_factory):
    raw = _stream(quotas, requested, parent, label, encoded, namespace_vgpu, cluster_vgpu)
    assert_equivalent(kubectl, raw, tmp_path_factory.mktemp("stream"))
