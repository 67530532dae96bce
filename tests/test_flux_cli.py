"""`cozyrender flux` at the command line, as a Helm and Flux user types it:
`[RELEASE] CHART`, Helm's values flags, `-` for standard input, release,
namespace and chart taken from the HelmRelease, several HelmReleases in one
file, one error line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cozyrender import flux
from cozyrender.commands.flux import command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flux"
TENANT_A = EXAMPLE / "tenant-a.yaml"
TENANTS = EXAMPLE / "tenants.yaml"
PARENT = EXAMPLE / "parent-values.yaml"
TENANT = ROOT / "charts" / "tenant"


def run(*args: str, stdin: bytes | str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, list(args), input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def printed(*args: str, stdin: bytes | str | None = None) -> list[dict]:
    code, out, err = run(*args, stdin=stdin)
    assert code == 0, err
    return yaml.safe_load(out)["postRenderers"]


def strip_owned(text: str, release: str | None = None) -> str:
    """The file as a user writes it before cozyrender's first run."""
    return flux.write_entry(flux.load_helmrelease_text(text, release=release), []).text


def hr_file(*releases: str, extra: str = "") -> str:
    """A file with one bare HelmRelease per `name[@namespace]`, a ConfigMap between them."""
    out = ["# a GitOps file\n"]
    for i, spec in enumerate(releases):
        name, _, namespace = spec.partition("@")
        out.append("---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
                   f"  name: {name}\n  namespace: {namespace or 'tenant-root'}\nspec:\n"
                   "  interval: 5m   # keep   my spacing\n  chart:\n    spec:\n"
                   "      chart: ./charts/tenant\n      sourceRef:\n        kind: GitRepository\n"
                   "        name: cozyrender\n  values:\n    resourceQuotas:\n"
                   f"      gpuclass.cozystack.io/devices: {i + 1}\n" + extra)
        out.append(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: between-{i}}}\n"
                   "data:\n  k:    'v'   # odd spacing\n")
    return "".join(out)


# ---------------------------------------------------------------- Helm's argument order

def test_release_then_chart_as_helm_template():
    entries = printed("tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT),
                      "--set", "resourceQuotas.gpuclass\\.cozystack\\.io/devices=1")
    targets = [p["target"] for p in entries[0]["kustomize"]["patches"]]
    assert {"kind": "Namespace", "name": "tenant-a"} in targets


def test_one_argument_is_the_chart_and_the_release_is_helms_default():
    """`helm template CHART` names the release "release-name"; the tenant chart
    refuses that name, which shows what it was given."""
    code, out, err = run(str(TENANT), "-n", "tenant-root", "-f", str(PARENT))
    assert code == 2 and out == ""
    assert 'the release name must be "tenant-<name>" with no other dash, got "release-name"' in err


def test_chart_then_release_is_refused_with_one_line():
    code, out, err = run(str(TENANT), "tenant-a", "-n", "tenant-root")
    assert code == 2 and out == ""
    assert err == "cozyrender flux: error: tenant-a: no such chart (a folder with Chart.yaml, " \
                  "or a chart archive)\n"


@pytest.mark.parametrize("args, message", [
    ((), "missing CHART"),
    (("a", "b", "c"), "expected [RELEASE] [CHART], got 3 arguments"),
    (("tenant-a", str(TENANT)), "no namespace: pass -n NAMESPACE"),
    (("tenant-a", str(TENANT), "-n", "tenant-root", "--check"), "--check needs --helmrelease FILE"),
])
def test_usage_errors_are_one_line(args, message):
    code, out, err = run(*args)
    assert code == 2 and out == ""
    assert err.startswith("cozyrender flux: error: ") and message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


# ---------------------------------------------------------------- values flags

def test_values_flags_in_helms_order(tmp_path):
    """-f files, then the HelmRelease-less --set-json, --set, --set-string, --set-file:
    each later flag wins, as with `helm template`."""
    quota = "resourceQuotas.gpuclass\\.cozystack\\.io/devices"
    base = ["tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT)]
    vgpu = tmp_path / "vgpu.txt"
    vgpu.write_text("true")

    def label(*extra: str) -> str | None:
        entries = printed(*base, "--set", f"{quota}=1", *extra)
        for patch in entries[0]["kustomize"]["patches"]:
            for op in yaml.safe_load(patch["patch"]):
                if isinstance(op, dict) and op.get("path") == "/metadata/labels/namespace.cozystack.io~1vgpu":
                    return op["value"]
        return None

    assert label("--set-json", "gpu.vgpu=true") == "true"
    # --set after --set-json: a string "false" is still false to the chart
    assert label("--set-json", "gpu.vgpu=true", "--set", "gpu.vgpu=false") == "false"
    # --set-file last: the file says true
    assert label("--set", "gpu.vgpu=false", "--set-file", f"gpu.vgpu={vgpu}") == "true"


def test_set_string_keeps_a_string_the_chart_refuses(tmp_path):
    """--set-string gives the chart the string "1" where it wants a boolean:
    the chart's own error comes back as one line."""
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT),
                         "--set-string", "gpu.vgpu=1")
    assert code == 2 and out == "" and err.startswith("cozyrender flux: error: ")
    assert "vgpu" in err and len(err.splitlines()) == 1
    assert run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT),
               "--set", "gpu.vgpu=true")[0] == 0


def test_bad_set_json_is_one_line():
    code, _, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "--set-json", "gpu={")
    assert code == 2 and err.startswith("cozyrender flux: error: failed parsing --set-json data")


def test_values_from_stdin_equal_the_file():
    args = ["tenant-a", str(TENANT), "-n", "tenant-root"]
    assert printed(*args, "-f", "-", stdin=PARENT.read_bytes()) == printed(*args, "-f", str(PARENT))


def test_values_from_stdin_keep_their_place_among_files(tmp_path):
    later = tmp_path / "later.yaml"
    later.write_text("_namespace:\n  vgpu: false\n")
    args = ["tenant-a", str(TENANT), "-n", "tenant-root", "--set", "gpu.vgpu=true"]
    # parent (vgpu true) from stdin first, then the file: the file wins
    from_stdin = printed(*args, "-f", "-", "-f", str(later), stdin=PARENT.read_bytes())
    assert from_stdin == printed(*args, "-f", str(PARENT), "-f", str(later))
    assert from_stdin != printed(*args, "-f", str(later), "-f", "-", stdin=PARENT.read_bytes())


def test_bad_values_on_stdin_name_stdin():
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", "-", stdin="a: [\n")
    assert code == 2 and out == ""
    assert err.startswith("cozyrender flux: error: failed to parse ")
    assert "cozyrender-" not in err and len(err.splitlines()) == 1  # no temporary copy named


def test_missing_values_file_is_one_line_without_python_wording(tmp_path):
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(tmp_path / "nope.yaml"))
    assert code == 2 and out == ""
    assert err.startswith(f"cozyrender flux: error: {tmp_path / 'nope.yaml'}: no such file")  # as every command words it
    assert "Errno" not in err and len(err.splitlines()) == 1


def test_stdin_is_read_once():
    code, _, err = run("-f", "-", "-f", str(PARENT), "--helmrelease", "-", stdin="a: 1\n")
    assert code == 2 and err == "cozyrender flux: error: standard input ('-') can be given only once\n"


def test_output_json_is_the_same_list():
    args = ["tenant-a", str(TENANT), "-n", "tenant-root", "-f", str(PARENT)]
    code, out, _ = run(*args, "-o", "json")
    assert code == 0
    assert json.loads(out) == {"postRenderers": printed(*args)}
    code, _, err = run(*args, "-o", "json", "--helmrelease", str(TENANT_A))
    assert code == 2 and "-o json is for printing the list" in err


# ---------------------------------------------------------------- from the HelmRelease

def test_readme_command_takes_everything_from_the_helmrelease():
    """The README's command, from the repository root: the chart path is read in
    the Git work tree that holds the file."""
    done = subprocess.run([sys.executable, "-m", "cozyrender", "flux", "-f",
                           "examples/flux/parent-values.yaml", "--helmrelease",
                           "examples/flux/tenant-a.yaml", "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert done.stderr == "examples/flux/tenant-a.yaml: in sync\n"


def test_from_the_helmrelease_equals_the_command_line(tmp_path):
    """Release, namespace and chart from the HelmRelease give what the same
    values give on the command line."""
    path = tmp_path / "tenant-a.yaml"
    path.write_text(strip_owned(TENANT_A.read_text()))
    code, _, err = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 0, err
    assert path.read_text() == TENANT_A.read_text()


def test_default_checkout_is_the_git_work_tree_of_the_file(tmp_path):
    repo = tmp_path / "gitops"
    shutil.copytree(TENANT, repo / "charts" / "tenant")
    (repo / ".git").mkdir()
    folder = repo / "clusters" / "prod"
    folder.mkdir(parents=True)
    path = folder / "hr.yaml"
    path.write_text(hr_file("tenant-x"))
    code, _, err = run("--helmrelease", str(path))
    assert code == 0, err
    assert flux.load_helmrelease(path).owned() is not None
    # without a work tree: the error says what to pass
    (repo / ".git").rmdir()
    code, out, err = run("--helmrelease", str(path), "--check")
    assert code == 2 and out == ""
    assert "pass --chart-dir (its local checkout) or CHART" in err and "GitRepository cozyrender" in err


@pytest.mark.parametrize("spec, message", [
    ("  chartRef:\n    kind: OCIRepository\n    name: tenant\n",
     "takes its chart from spec.chartRef (OCIRepository tenant), which cozyrender cannot read: pass CHART"),
    ("  chart:\n    spec:\n      chart: tenant\n      sourceRef:\n        kind: HelmRepository\n"
     "        name: cozystack\n",
     "chart 'tenant' comes from HelmRepository cozystack, not a local checkout: pass CHART"),
    ("  chart:\n    spec:\n      chart: ./charts/nope\n      sourceRef:\n        kind: GitRepository\n"
     "        name: cozyrender\n", "chart './charts/nope' of GitRepository cozyrender is not at"),
    ("  values: {}\n", "has no spec.chart.spec.chart: pass CHART"),
])
def test_charts_that_are_not_here_are_named(tmp_path, spec, message):
    path = tmp_path / "hr.yaml"
    path.write_text("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
                    "  name: tenant-a\n  namespace: tenant-root\nspec:\n  interval: 5m\n" + spec)
    code, out, err = run("--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and out == "" and message in err, err
    assert err.startswith(f"cozyrender flux: error: {path}: HelmRelease tenant-root/tenant-a")
    # the chart on the command line is the way out (except for the chartRef-less bad spec)
    code, _, err = run("tenant-a", str(TENANT), "--helmrelease", str(path), "--check")
    assert code == 1, err


def test_chart_path_cannot_leave_the_checkout(tmp_path):
    """Flux joins the chart path to the artifact's root securely: `../` stops at the root."""
    checkout = tmp_path / "checkout"
    shutil.copytree(TENANT, checkout / "charts" / "tenant")
    outside = tmp_path / "charts" / "tenant"
    shutil.copytree(TENANT, outside)
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a").replace("./charts/tenant", "../charts/tenant"))
    hr = flux.load_helmrelease(path)
    assert flux.chart_path(hr, checkout) == checkout / "charts" / "tenant"


def test_values_files_are_refused(tmp_path):
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a").replace(
        "      sourceRef:", "      valuesFiles: [charts/tenant/values.yaml]\n      sourceRef:"))
    code, _, err = run("tenant-a", str(TENANT), "--helmrelease", str(path))
    assert code == 2 and "spec.chart.spec.valuesFiles" in err and "-f files" in err


def test_namespace_from_target_namespace_and_release_name(tmp_path):
    """Flux's release name: spec.releaseName, else targetNamespace-name; its
    namespace: targetNamespace, else metadata.namespace."""
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("x@flux-system").replace(
        "  interval: 5m", "  releaseName: tenant-q\n  targetNamespace: tenant-root\n  interval: 5m"))
    code, _, err = run("--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 0, err
    patches = flux.load_helmrelease(path).owned()[1]["kustomize"]["patches"]
    assert {"kind": "Namespace", "name": "tenant-q"} in [p["target"] for p in patches]
    # the command line must agree with the HelmRelease
    code, _, err = run("tenant-q", str(TENANT), "-n", "flux-system", "--helmrelease", str(path))
    assert code == 2 and "installs into namespace 'tenant-root', not 'flux-system'" in err


def test_valuesfrom_without_values_files_warns():
    code, _, err = run("--chart-dir", str(ROOT), "--helmrelease", str(TENANT_A), "--check")
    assert code == 1  # the parent's values are missing: the entry differs
    assert "cozyrender flux: warning: " in err and "spec.valuesFrom" in err and "-f" in err


# ---------------------------------------------------------------- several HelmReleases

def test_bundled_multi_release_example_is_in_sync():
    for release in ("tenant-b", "tenant-c"):
        code, out, err = run(release, "-f", str(PARENT), "--chart-dir", str(ROOT),
                             "--helmrelease", str(TENANTS), "--check")
        assert (code, out) == (0, ""), (release, out, err)


def test_bundled_multi_release_example_is_what_the_command_writes(tmp_path):
    original = TENANTS.read_text()
    path = tmp_path / "tenants.yaml"
    path.write_text(strip_owned(strip_owned(original, "tenant-b"), "tenant-c"))
    for release in ("tenant-c", "tenant-b"):
        assert run(release, "-f", str(PARENT), "--chart-dir", str(ROOT),
                   "--helmrelease", str(path))[0] == 0
    assert path.read_text() == original


def test_each_release_edits_only_its_document(tmp_path):
    text = hr_file("tenant-a", "tenant-b", "tenant-c")
    path = tmp_path / "hr.yaml"
    path.write_text(text)
    stream = flux.read_text(text, "x")
    code, _, err = run("tenant-b", "--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 0, err
    written = flux.read_text(path.read_text(), "x")
    assert len(written.documents) == len(stream.documents) == 7
    changed = [i for i, (a, b) in enumerate(zip(stream.documents, written.documents))
               if stream.text_of(a) != written.text_of(b)]
    assert changed == [3]  # the comment, tenant-a, a ConfigMap, then tenant-b
    assert "name: tenant-b" in written.text_of(written.documents[3])
    assert flux.load_helmrelease(path, "tenant-b").owned() is not None
    assert flux.load_helmrelease(path, "tenant-a").owned() is None
    assert run("tenant-b", "--chart-dir", str(ROOT), "--helmrelease", str(path), "--check")[0] == 0
    assert run("tenant-a", "--chart-dir", str(ROOT), "--helmrelease", str(path), "--check")[0] == 1


def test_release_selected_by_metadata_name_with_a_release_name(tmp_path):
    """RELEASE may be the Helm release name or the HelmRelease's metadata.name."""
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a", "b-object").replace(
        "  name: b-object\n  namespace: tenant-root\nspec:\n",
        "  name: b-object\n  namespace: tenant-root\nspec:\n  releaseName: tenant-b\n"))
    assert flux.load_helmrelease(path, "b-object").label() == "tenant-root/b-object"
    assert flux.load_helmrelease(path, "tenant-b").label() == "tenant-root/b-object"
    code, _, err = run("b-object", "--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and "installs release 'tenant-b', not 'b-object'" in err
    assert run("tenant-b", "--chart-dir", str(ROOT), "--helmrelease", str(path))[0] == 0


@pytest.mark.parametrize("args, message", [
    ((), "2 HelmReleases (tenant-root/tenant-a, tenant-root/tenant-b); say which with RELEASE "
         "and -n NAMESPACE"),
    (("tenant-z",), "found 2 HelmReleases and none is release 'tenant-z' "
                    "(tenant-root/tenant-a, tenant-root/tenant-b)"),
    (("-n", "elsewhere"), "found 2 HelmReleases and none is in namespace 'elsewhere' "
                          "(tenant-root/tenant-a, tenant-root/tenant-b)"),
])
def test_ambiguous_or_unknown_release_is_an_error(tmp_path, args, message):
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a", "tenant-b"))
    code, out, err = run(*args, "--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and out == ""
    assert err == f"cozyrender flux: error: {path}: {message}\n"


def test_same_name_in_two_namespaces_is_told_apart_by_namespace(tmp_path):
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a@tenant-root", "tenant-a@tenant-other"))
    code, _, err = run("tenant-a", "--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and "2 HelmReleases release 'tenant-a'" in err
    code, _, err = run("tenant-a", "-n", "tenant-other", "--chart-dir", str(ROOT),
                       "--helmrelease", str(path))
    assert code == 0, err
    assert flux.load_helmrelease(path, "tenant-a", "tenant-other").owned() is not None
    assert flux.load_helmrelease(path, "tenant-a", "tenant-root").owned() is None


def test_another_documents_bad_yaml_is_named(tmp_path):
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a") + "---\nbad: [\n")
    code, _, err = run("--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and f"{path}: document 4 is not YAML" in err


# ---------------------------------------------------------------- --helmrelease -

def test_helmrelease_from_stdin_writes_the_file_to_stdout():
    bare = strip_owned(TENANT_A.read_text())
    code, out, err = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", "-",
                         stdin=bare)
    assert code == 0, err
    assert out == TENANT_A.read_text()
    assert err == "<stdin>: wrote 3 patches\n"


def test_helmrelease_from_stdin_in_sync_is_written_unchanged():
    code, out, err = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", "-",
                         stdin=TENANT_A.read_bytes())
    assert (code, out) == (0, TENANT_A.read_text())
    assert err == "<stdin>: already up to date\n"


def test_helmrelease_from_stdin_check():
    args = ["-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", "-", "--check"]
    assert run(*args, stdin=TENANT_A.read_bytes()) == (0, "", "<stdin>: in sync\n")
    code, out, err = run(*args, stdin=strip_owned(TENANT_A.read_text()))
    assert code == 1 and out.startswith("--- <stdin> (cozyrender entry)\n") and "out of date" in err


def test_helmrelease_stdin_through_the_process():
    """A pipe, as in a shell: `... | cozyrender flux --helmrelease - > new.yaml`; CRLF kept."""
    bare = strip_owned(TENANT_A.read_text()).replace("\n", "\r\n").encode()
    done = subprocess.run([sys.executable, "-m", "cozyrender", "flux", "-f", str(PARENT),
                           "--helmrelease", "-"], input=bare, capture_output=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == TENANT_A.read_text().replace("\n", "\r\n").encode()


def test_help_has_examples():
    code, out, _ = run("--help")
    assert code == 0 and "Examples:" in out and "--helmrelease -" in out
    assert "[RELEASE] [CHART]" in out


def test_one_existing_path_with_helmrelease_is_the_chart(tmp_path):
    """Helm's rule first: a single argument that is a path is CHART; the release comes from the file."""
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a"))
    code, _, err = run(str(TENANT), "--helmrelease", str(path))  # no --chart-dir needed
    assert code == 0, err
    assert flux.load_helmrelease(path).owned() is not None


def test_chart_dir_must_be_a_folder(tmp_path):
    code, out, err = run("--chart-dir", str(tmp_path / "nope"), "--helmrelease", str(TENANT_A))
    assert code == 2 and out == ""
    assert err == f"cozyrender flux: error: --chart-dir {tmp_path / 'nope'}: no such folder\n"


def test_bundled_helmreleases_validate_against_the_v2_schema():
    import jsonschema
    from test_flux_helmrelease import HELMRELEASE_V2

    releases = [d for d in yaml.safe_load_all(TENANTS.read_text()) if d and d["kind"] == "HelmRelease"]
    assert [r["metadata"]["name"] for r in releases] == ["tenant-b", "tenant-c"]
    for release in releases:
        jsonschema.validate(release, HELMRELEASE_V2)
        assert flux.is_owned(release["spec"]["postRenderers"][0])
        assert (ROOT / release["spec"]["chart"]["spec"]["chart"] / "Chart.yaml").is_file()


def test_helmrelease_without_namespace_needs_n(tmp_path):
    path = tmp_path / "hr.yaml"
    path.write_text(hr_file("tenant-a").replace("  namespace: tenant-root\n", ""))
    code, _, err = run("--chart-dir", str(ROOT), "--helmrelease", str(path))
    assert code == 2 and "no namespace: pass -n NAMESPACE (the HelmRelease has no" in err
    assert run("-n", "tenant-root", "--chart-dir", str(ROOT), "--helmrelease", str(path))[0] == 0


def test_release_the_post_render_leaves_alone_loses_its_entry(tmp_path):
    """A chart whose output the post-render does not change: nothing to patch,
    so the stale entry is removed (and --check said so first)."""
    chart = tmp_path / "plain"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: plain\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata: {a: b}\n")
    path = tmp_path / "hr.yaml"
    stale = flux.write_entry(flux.load_helmrelease_text(hr_file("tenant-a")), [{
        "kustomize": {"patches": [{"target": {"kind": "ConfigMap", "name": "tenant-a"},
                                   "patch": flux.MARKER + "\n- op: remove\n  path: /data/a\n"}]}}]).text
    path.write_text(stale)
    code, out, err = run(str(chart), "--helmrelease", str(path), "--check")
    assert code == 1 and out.startswith(f"--- {path} (cozyrender entry)") and "+postRenderers: []" in out
    code, _, err = run(str(chart), "--helmrelease", str(path))
    assert code == 0 and err == f"{path}: removed the cozyrender entry (the post-render changes nothing)\n"
    assert flux.load_helmrelease(path).post_renderers() == []
    assert run(str(chart), "--helmrelease", str(path), "--check")[0] == 0


# ---------------------------------------------------------------- issue 19 item 11: --check over every release

def test_check_without_release_checks_every_helmrelease_one_line_each(tmp_path):
    code, out, err = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", str(TENANTS), "--check")
    assert (code, out) == (0, ""), err
    assert err.splitlines() == [f"{TENANTS}: tenant-root/tenant-b: in sync", f"{TENANTS}: tenant-root/tenant-c: in sync"]
    path = tmp_path / "tenants.yaml"
    path.write_text(strip_owned(TENANTS.read_text(), "tenant-c"))
    code, out, err = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", str(path), "--check")
    assert code == 1 and "tenant-c" in out and "tenant-b" not in out.replace("tenant-b-", "")
    assert err.splitlines() == [
        f"{path}: tenant-root/tenant-b: in sync", f"{path}: tenant-root/tenant-c: out of date",
        f"{path}: 1 of 2 HelmReleases out of date; run the same command with RELEASE and without --check for each"]
    assert path.read_text() == strip_owned(TENANTS.read_text(), "tenant-c")  # --check writes nothing


def test_check_over_every_helmrelease_takes_values_from_stdin(tmp_path):
    """`-f -` with several releases: standard input is read once and every
    release merges the same values (it said 'given only once' before)."""
    from_stdin = run("-f", "-", "--chart-dir", str(ROOT), "--helmrelease", str(TENANTS), "--check",
                     stdin=PARENT.read_bytes())
    from_file = run("-f", str(PARENT), "--chart-dir", str(ROOT), "--helmrelease", str(TENANTS), "--check")
    assert from_stdin == from_file and from_stdin[0] == 0, from_stdin
    # Other values on stdin give another answer: the releases did read them.
    other = run("-f", "-", "--chart-dir", str(ROOT), "--helmrelease", str(TENANTS), "--check", stdin="{}\n")
    assert other[0] == 1 and other[2].count(": out of date") == 2, other


def test_stdin_twice_among_values_files_is_bad_input():
    code, out, err = run("tenant-a", str(TENANT), "-n", "tenant-root", "-f", "-", "-f", "-", stdin="a: 1\n")
    assert (code, out) == (2, "") and err == "cozyrender flux: error: standard input ('-') can be given only once\n"
