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
    # Test-only patches guard a delete; the others are one per changed object.
    changing = [p for p in derived.patches if not _test_only(p)]
    assert len(changing) == len(changed)
    for patch in derived.patches:
        matches = [k for k in before if flux.selects(
            {f: v.replace("\\", "") for f, v in patch["target"].items()}, k)]
        if "name" not in patch["target"]:  # an absence guard: selects nothing in its release
            assert matches == [] and flux.ABSENT in patch["patch"]
            continue
        assert len(matches) == 1
        # a change targets a changed object; a guard, an object the rules read
        assert matches[0] in changed if not _test_only(patch) else flux.read_by_rules(
            matches[0], before[matches[0]])


def _test_only(patch: dict) -> bool:
    body = yaml.safe_load(patch["patch"])
    return isinstance(body, list) and all(op["op"] == "test" for op in body)


def test_gpu_only_tenant_patches(golden_raw):
    derived = flux.derive(golden_raw[GOLDEN / "tenant" / "gpu-both"])
    by_kind = {p["target"]["kind"]: p for p in derived.patches if not _test_only(p)}
    assert set(by_kind) == {"LimitRange", "Namespace", "ResourceQuota"}
    assert by_kind["ResourceQuota"]["target"] == {
        "kind": "ResourceQuota", "name": "tenant-quota", "namespace": "tenant-a"}
    assert yaml.safe_load(by_kind["ResourceQuota"]["patch"])["$patch"] == "delete"
    assert yaml.safe_load(by_kind["LimitRange"]["patch"])["$patch"] == "delete"
    assert derived.patches[0]["patch"].startswith(flux.MARKER + "\n")


def test_mixed_quota_removes_budget_keys_escaped(golden_raw):
    derived = flux.derive(golden_raw[GOLDEN / "tenant" / "mixed"])
    quota = next(p for p in derived.patches
                 if p["target"]["kind"] == "ResourceQuota" and "name" in p["target"])
    test, *ops = yaml.safe_load(quota["patch"])
    assert test["op"] == "test" and test["path"] == "/spec/hard" and "limits.cpu" in test["value"]
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


GPU_ONLY = {"_cluster": {"root-host": "example.org"},
            "_namespace": {"host": "example.org", "etcd": "tenant-root", "ingress": "tenant-root",
                           "monitoring": "tenant-root", "seaweedfs": "tenant-root"},
            "resourceQuotas": {"gpuclass.cozystack.io/devices": 8,
                               "a100.gpuclass.cozystack.io/devices": 6}}


def _render_tenant(values: dict) -> bytes:
    return flux.render_raw(TENANT, "tenant-a", "tenant-root", inline=[values])


def test_stale_delete_of_gpu_only_quota_fails_the_build(kubectl, tmp_path):
    """Issue 17's scenario: patches generated for a GPU-only tenant (they drop
    its ResourceQuota and LimitRange), then `cpu: "4"` added to resourceQuotas
    without regenerating. kustomize must fail, not delete the quota that now
    holds limits.cpu (and the LimitRange with it)."""
    derived = flux.derive(_render_tenant(GPU_ONLY))
    deletes = [p for p in derived.patches if "$patch: delete" in p["patch"]]
    assert {p["target"]["kind"] for p in deletes} == {"ResourceQuota", "LimitRange"}
    with_cpu = {**GPU_ONLY, "resourceQuotas": {**GPU_ONLY["resourceQuotas"], "cpu": "4"}}
    raw = _render_tenant(with_cpu)
    assert "limits.cpu" in flux.parse_objects(raw)[("v1", "ResourceQuota", "tenant-a", "tenant-quota")][
        "spec"]["hard"]
    with pytest.raises(AssertionError, match="test"):
        kustomize(kubectl, raw, derived.post_renderers, tmp_path)


def test_stale_edit_of_mixed_quota_fails_the_build(kubectl, tmp_path):
    """A mixed quota keeps its ordinary keys: its patch removes the budget keys.
    With the ordinary key gone from the values the quota would be dropped (and
    the LimitRange with it); the old patch must not leave an empty quota."""
    mixed = {**GPU_ONLY, "resourceQuotas": {**GPU_ONLY["resourceQuotas"], "cpu": "4"}}
    derived = flux.derive(_render_tenant(mixed))
    assert not any("$patch: delete" in p["patch"] for p in derived.patches)
    with pytest.raises(AssertionError, match="test"):
        kustomize(kubectl, _render_tenant(GPU_ONLY), derived.post_renderers, tmp_path)


def test_every_removal_and_replace_is_guarded(golden_raw):
    """No patch removes or replaces anything without a test before it: a
    delete is preceded by a test-only patch on the content that decided it,
    a remove or replace by a test of its path or of a parent path."""
    for raw in golden_raw.values():
        patches = flux.derive(raw).patches
        for number, patch in enumerate(patches):
            body = yaml.safe_load(patch["patch"])
            if isinstance(body, dict):  # a strategic-merge delete
                assert body["$patch"] == "delete"
                guard_ops = yaml.safe_load(patches[number - 1]["patch"])
                assert number > 0 and all(op["op"] == "test" for op in guard_ops)
                continue
            tested: list[str] = []
            for op in body:
                if op["op"] == "test":
                    tested.append(op["path"])
                elif op["op"] in ("remove", "replace"):
                    assert any(op["path"] == t or op["path"].startswith(t + "/") for t in tested), op


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
    # Changes in kind order, each delete right after its guards (the quota's spec.hard).
    patches = flux.derive(raw).patches
    kinds = [p["target"]["kind"] for p in patches if not _test_only(p)]
    assert kinds == sorted(kinds)
    assert [(p["target"]["kind"], _test_only(p)) for p in patches] == [
        ("Secret", True), ("ResourceQuota", True), ("LimitRange", False), ("Namespace", False),
        ("ResourceQuota", True), ("ResourceQuota", False)]


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


# The never-stale invariant: patches derived for one set of values, applied to
# the release of another, either make exactly what the post-renderer makes of
# that release or fail the kustomize build. Never a third outcome.
TENANT_QUOTAS = st.dictionaries(st.sampled_from(["cpu", "memory", "gpuclass.cozystack.io/devices",
                                                 "a100.gpuclass.cozystack.io/devices"]),
                                st.sampled_from([1, 2, "4"]), max_size=3)
TENANT_VALUES = st.fixed_dictionaries({
    "quotas": TENANT_QUOTAS, "requested": st.booleans(),
    "parent": st.one_of(st.none(), st.booleans()), "cluster": st.one_of(st.none(), st.booleans())})


def _tenant_values(v: dict) -> dict:
    values: dict = {"resourceQuotas": v["quotas"], "gpu": {"vgpu": v["requested"]},
                    "_namespace": {"host": "example.org"}, "_cluster": {"root-host": "example.org"}}
    if v["parent"] is not None:
        values["_namespace"]["vgpu"] = v["parent"]
    if v["cluster"] is not None:
        values["_cluster"]["gpu-vgpu"] = v["cluster"]
    return values


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=TENANT_VALUES, applied=TENANT_VALUES)
def test_property_stale_patches_fail_or_fit(generated, applied, kubectl, tmp_path_factory):
    derived = flux.derive(_render_tenant(_tenant_values(generated)))
    raw = _render_tenant(_tenant_values(applied))
    try:
        out = kustomize(kubectl, raw, derived.post_renderers, tmp_path_factory.mktemp("stale"))
    except AssertionError as err:
        assert "test failed" in str(err), err
        return
    expected = flux.parse_objects(post_render(raw).output)
    actual = flux.parse_objects(out)
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert flux.same(actual[key], expected[key]), (flux.describe(key), actual[key], expected[key])
