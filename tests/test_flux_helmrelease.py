"""`cozyrender flux --helmrelease` and `--check`, and the bundled Flux example."""

from __future__ import annotations

import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from cozyrender import flux
from cozyrender.commands.flux import command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flux"
RELEASE_FILE = EXAMPLE / "tenant-a.yaml"
PARENT_VALUES = EXAMPLE / "parent-values.yaml"
TENANT = ROOT / "charts" / "tenant"
ARGS = ["tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT_VALUES)]

# The HelmRelease v2 fields the example uses, written from Flux's API reference
# (helm.toolkit.fluxcd.io/v2). postRenderers is closed: Flux's PostRenderer
# holds only `kustomize` (patches, images) and a Patch only `patch` and
# `target`, so a field Flux would reject fails here.
_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {k: {"type": "string"} for k in (
        "group", "version", "kind", "name", "namespace", "annotationSelector", "labelSelector")},
}
HELMRELEASE_V2 = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "helm.toolkit.fluxcd.io/v2"},
        "kind": {"const": "HelmRelease"},
        "metadata": {"type": "object", "required": ["name"],
                     "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}},
        "spec": {
            "type": "object",
            "required": ["interval"],
            "oneOf": [{"required": ["chart"]}, {"required": ["chartRef"]}],
            "properties": {
                "interval": {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"},
                "chart": {"type": "object", "required": ["spec"], "properties": {"spec": {
                    "type": "object", "required": ["chart", "sourceRef"],
                    "properties": {
                        "chart": {"type": "string", "minLength": 1},
                        "version": {"type": "string"},
                        "reconcileStrategy": {"enum": ["ChartVersion", "Revision"]},
                        "sourceRef": {
                            "type": "object", "required": ["kind", "name"],
                            "properties": {
                                "kind": {"enum": ["HelmRepository", "GitRepository", "Bucket"]},
                                "name": {"type": "string"}, "namespace": {"type": "string"}},
                        },
                    }}}},
                "releaseName": {"type": "string", "maxLength": 53},
                "targetNamespace": {"type": "string", "maxLength": 63},
                "values": {"type": "object"},
                "valuesFrom": {"type": "array", "items": {
                    "type": "object", "required": ["kind", "name"],
                    "properties": {"kind": {"enum": ["Secret", "ConfigMap"]},
                                   "name": {"type": "string"}, "valuesKey": {"type": "string"},
                                   "targetPath": {"type": "string"},
                                   "optional": {"type": "boolean"}}}},
                "postRenderers": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"kustomize": {
                        "type": "object", "additionalProperties": False,
                        "properties": {
                            "patches": {"type": "array", "items": {
                                "type": "object", "additionalProperties": False,
                                "required": ["patch"],
                                "properties": {"patch": {"type": "string"}, "target": _SELECTOR}}},
                            "images": {"type": "array", "items": {"type": "object"}},
                        }}}}},
            },
        },
    },
}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def release_copy(tmp_path) -> Path:
    path = tmp_path / "tenant-a.yaml"
    shutil.copy(RELEASE_FILE, path)
    return path


def strip_owned(text: str) -> str:
    """The example as a user writes it before cozyrender's first run."""
    hr = flux.load_helmrelease_text(text)
    return flux.write_entry(hr, []).text


# ---------------------------------------------------------------- the example

def test_example_is_in_sync():
    code, out, err = run(*ARGS, "--helmrelease", str(RELEASE_FILE), "--check")
    assert (code, out) == (0, ""), out
    assert "in sync" in err


def test_example_is_what_helmrelease_writes(tmp_path):
    original = RELEASE_FILE.read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(strip_owned(original))
    assert not flux.load_helmrelease(bare).owned()
    code, _, _ = run(*ARGS, "--helmrelease", str(bare))
    assert code == 0
    assert bare.read_text() == original


def test_example_is_a_valid_helmrelease():
    documents = [d for d in yaml.safe_load_all(RELEASE_FILE.read_text()) if d]
    releases = [d for d in documents if d["kind"] == "HelmRelease"]
    assert len(releases) == 1
    jsonschema.validate(releases[0], HELMRELEASE_V2)
    source = next(d for d in documents if d["kind"] == "GitRepository")
    ref = releases[0]["spec"]["chart"]["spec"]["sourceRef"]
    assert (ref["kind"], ref["name"]) == ("GitRepository", source["metadata"]["name"])
    chart = releases[0]["spec"]["chart"]["spec"]["chart"]
    assert (ROOT / chart / "Chart.yaml").is_file()
    entries = releases[0]["spec"]["postRenderers"]
    assert flux.is_owned(entries[0]) and not flux.is_owned(entries[1])


def test_schema_rejects_invented_post_renderer_fields():
    release = yaml.safe_load(flux.load_helmrelease(RELEASE_FILE).document)
    release["spec"]["postRenderers"][0]["cozyrender"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(release, HELMRELEASE_V2)


def test_example_equivalence_with_kustomize(kubectl, tmp_path):
    """The example's cozyrender entry, applied by kustomize to what Flux renders."""
    from test_flux_patches import kustomize

    from cozyrender.postrender import post_render

    hr = flux.load_helmrelease(RELEASE_FILE)
    raw = flux.render_raw(TENANT, "tenant-a", "tenant-root", [str(PARENT_VALUES)],
                          inline=[hr.values()])
    entry = hr.owned()[1]
    got = flux.parse_objects(kustomize(kubectl, raw, [entry], tmp_path))
    assert got == flux.parse_objects(post_render(raw).output)


# ---------------------------------------------------------------- writing

def test_user_entries_and_comments_preserved(release_copy):
    original = release_copy.read_text()
    bare = strip_owned(original)
    release_copy.write_text(bare)
    code, _, _ = run(*ARGS, "--helmrelease", str(release_copy))
    assert code == 0
    written = release_copy.read_text()
    # Only lines were added: every line of the user's file is still there, in order.
    it = iter(written.splitlines())
    assert all(any(line == w for w in it) for line in bare.splitlines())
    assert "# our own patch; runs after cozyrender's entry" in written
    assert "vgpu: true # ask for the vGPU entitlement" in written
    entries = flux.load_helmrelease(release_copy).post_renderers()
    assert [flux.is_owned(e) for e in entries] == [True, False]
    # Everything outside the HelmRelease document is byte for byte the same.
    head = original[:original.index("---\napiVersion: helm")]
    assert written.startswith(head)


def test_idempotent(release_copy):
    code, _, err = run(*ARGS, "--helmrelease", str(release_copy))
    assert code == 0 and "already up to date" in err
    assert release_copy.read_text() == RELEASE_FILE.read_text()


def test_replaces_only_owned_entry_in_place(release_copy):
    text = release_copy.read_text().replace("vgpu: true # ask", "vgpu: false # ask")
    release_copy.write_text(text)
    code, out, _ = run(*ARGS, "--helmrelease", str(release_copy), "--check")
    assert code == 1
    assert out.startswith("--- ") and "namespace.cozystack.io~1vgpu" in out
    assert release_copy.read_text() == text  # --check writes nothing
    code, _, _ = run(*ARGS, "--helmrelease", str(release_copy))
    assert code == 0
    entries = flux.load_helmrelease(release_copy).post_renderers()
    assert len(entries) == 2 and flux.is_owned(entries[0])
    namespace = next(p for p in entries[0]["kustomize"]["patches"] if p["target"]["kind"] == "Namespace")
    assert "value: 'false'" in namespace["patch"]
    assert run(*ARGS, "--helmrelease", str(release_copy), "--check")[0] == 0


def test_check_detects_parent_values_drift(release_copy, tmp_path):
    parent = tmp_path / "parent.yaml"
    parent.write_text(PARENT_VALUES.read_text().replace("  vgpu: true", "  vgpu: false"))
    args = ["tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(parent)]
    code, out, err = run(*args, "--helmrelease", str(release_copy), "--check")
    assert code == 1 and "out of date" in err
    assert "-                value: 'true'" in out or "value: 'true'" in out


def test_check_detects_hand_edit(release_copy):
    text = release_copy.read_text()
    release_copy.write_text(text.replace("limits.a100.gpuclass.cozystack.io~1devices",
                                         "limits.a100.gpuclass.cozystack.io~1dev"))
    assert run(*ARGS, "--helmrelease", str(release_copy), "--check")[0] == 1


def test_check_without_entry_is_drift(release_copy):
    release_copy.write_text(strip_owned(release_copy.read_text()))
    code, out, _ = run(*ARGS, "--helmrelease", str(release_copy), "--check")
    assert code == 1 and flux.MARKER in out


def test_inserts_post_renderers_when_absent(tmp_path):
    path = tmp_path / "hr.yaml"
    path.write_text(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: tenant-a\n"
        "  namespace: tenant-root\nspec:\n  interval: 5m # often\n  chart:\n    spec:\n"
        "      chart: ./charts/tenant\n      sourceRef:\n        kind: GitRepository\n"
        "        name: cozyrender\n  values:\n    resourceQuotas:\n      gpuclass.cozystack.io/devices: 1\n")
    code, _, _ = run("tenant-a", str(TENANT), "-n", "tenant-root", "--helmrelease", str(path))
    assert code == 0
    text = path.read_text()
    assert "interval: 5m # often" in text
    release = flux.load_helmrelease(path)
    jsonschema.validate(release.release, HELMRELEASE_V2)
    kinds = [p["target"]["kind"] for p in release.owned()[1]["kustomize"]["patches"]]
    # the values Secret's guard, the quota's guard before the LimitRange's delete, the quota's before its own
    assert kinds == ["Secret", "ResourceQuota", "LimitRange", "Namespace", "ResourceQuota", "ResourceQuota"]
    assert run("tenant-a", str(TENANT), "-n", "tenant-root", "--helmrelease", str(path),
               "--check")[0] == 0


def test_print_without_helmrelease(tmp_path):
    """The printed list is the example's entry when given the same values."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(flux.load_helmrelease(RELEASE_FILE).values()))
    code, out, _ = run(*ARGS, "-f", str(values))
    assert code == 0
    printed = yaml.safe_load(out)["postRenderers"]
    assert printed == [flux.load_helmrelease(RELEASE_FILE).owned()[1]]


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("content, message", [
    ("a: [\n", "not YAML"),
    ("apiVersion: v1\nkind: ConfigMap\n", "expected one HelmRelease, found 0"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2beta1\nkind: HelmRelease\nspec: {}\n", "v2beta1"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec: 3\n", "no spec mapping"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  postRenderers: {}\n",
     "postRenderers is not a list"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: other\n"
     "spec: {}\n", "release 'other'"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: tenant-a\n"
     "  namespace: elsewhere\nspec: {}\n", "namespace 'elsewhere'"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  values: [1]\n",
     "spec.values is not a mapping"),
    ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  values:\n"
     "    resourceQuotas: 7\n", "resourceQuotas"),
    ("---\nkind: HelmRelease\napiVersion: helm.toolkit.fluxcd.io/v2\nspec: {}\n---\n"
     "kind: HelmRelease\napiVersion: helm.toolkit.fluxcd.io/v2\nspec: {}\n", "found 2"),
])
def test_bad_files_exit_2(tmp_path, content, message):
    path = tmp_path / "hr.yaml"
    path.write_text(content)
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "--helmrelease", str(path))
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err
    assert path.read_text() == content


def test_two_owned_entries_exit_2(release_copy):
    hr = flux.load_helmrelease(release_copy)
    doubled = hr.text.replace("  postRenderers:\n", "  postRenderers:\n" + _owned_block(hr), 1)
    release_copy.write_text(doubled)
    code, _, err = run(*ARGS, "--helmrelease", str(release_copy), "--check")
    assert code == 2 and "2 cozyrender entries" in err


def _owned_block(hr: flux.HelmReleaseFile) -> str:
    lines = hr.document.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("  postRenderers:")) + 1
    end = next(i for i, line in enumerate(lines) if "# our own patch" in line)
    return "".join(lines[start:end])


def test_missing_file_and_check_alone_exit_2(tmp_path):
    code, _, err = run(*ARGS, "--helmrelease", str(tmp_path / "nope.yaml"))
    assert code == 2 and err == f"cozyrender flux: error: {tmp_path / 'nope.yaml'}: no such file or folder\n"
    code, _, err = run(*ARGS, "--check")
    assert code == 2 and "--check needs --helmrelease" in err


def test_bad_values_exit_2(tmp_path):
    values = tmp_path / "v.yaml"
    values.write_text("gpu:\n  vgpu: maybe\n")
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(values))
    assert code == 2 and out == "" and "Traceback" not in err


# ---------------------------------------------------------------- the real command

def test_cozyrender_flux_process_check_and_error(tmp_path):
    """Through `python -m cozyrender` (the lazy dispatcher), as CI runs it."""
    import subprocess
    import sys

    base = [sys.executable, "-m", "cozyrender", "flux", *ARGS, "--helmrelease"]
    done = subprocess.run([*base, str(RELEASE_FILE), "--check"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: HelmRelease\napiVersion: helm.toolkit.fluxcd.io/v2\nspec: [\n")
    done = subprocess.run([*base, str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert "not YAML" in done.stderr and "Traceback" not in done.stderr


def test_documents_after_the_helmrelease_are_kept(tmp_path):
    path = tmp_path / "hr.yaml"
    tail = "---\n# trailing document, odd   spacing kept\napiVersion: v1\nkind: ConfigMap\n" \
           "metadata: {name: x}\ndata:\n  k:    'v'\n"
    head = RELEASE_FILE.read_text()
    path.write_text(strip_owned(head) + tail)
    code, _, err = run(*ARGS, "--helmrelease", str(path))
    assert code == 0 and "warning" not in err
    assert path.read_text() == head + tail


def test_unusual_spacing_is_kept_and_nothing_is_reported(tmp_path):
    """No re-formatting: the spec's odd spacing and flow values stay as written."""
    path = tmp_path / "hr.yaml"
    original = ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
                "  name: tenant-a\n  namespace: tenant-root\nspec:\n  interval:    5m\n"
                "  values: {resourceQuotas: {gpuclass.cozystack.io/devices: 1}}\n")
    path.write_text(original)
    code, _, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "--helmrelease", str(path))
    assert code == 0 and "warning" not in err
    written = path.read_text()
    assert written.startswith(original)
    assert written[len(original):].startswith("  postRenderers:\n    - kustomize:\n")
    assert flux.load_helmrelease(path).owned() is not None


def test_check_sees_a_block_chomping_change(release_copy):
    """`|` to `|-` on the replaced values.yaml drops its final line break:
    that is drift, not layout."""
    text = release_copy.read_text()
    hr = flux.load_helmrelease_text(text)
    entry = hr.owned()[1]
    secret = entry["kustomize"]["patches"][-1]["patch"]
    assert "value: |\n" in secret
    release_copy.write_text(text.replace("              - op: replace\n                value: |\n",
                                         "              - op: replace\n                value: |-\n"))
    assert run(*ARGS, "--helmrelease", str(release_copy), "--check")[0] == 1
