"""Helm's conventions on every command, through the real `cozyrender` entry
point (`python -m cozyrender`, which is cli.main): one error format, `-` for
standard input, folders where files are taken, one `-o` vocabulary, Helm's
argument order and values flags, shell completion, examples in every --help."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
CLUSTER = EXAMPLES / "cluster"
BUDGETS = EXAMPLES / "budgets"
COMMAND = [sys.executable, "-m", "cozyrender"]


def cozy(*args: str | Path, stdin: bytes | str | None = None, cwd: Path | None = None,
         env: dict | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run([*COMMAND, *map(str, args)], input=data if data is not None else b"",
                          capture_output=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=120)


def one_error_line(result: subprocess.CompletedProcess, command: str) -> str:
    """The error line, checked against the one format every command writes."""
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert err.count("\n") == 1 and err.startswith(f"cozyrender {command}: error: "), err
    for python_wording in ("Traceback", "[Errno", "Error:", "ERROR", "Usage:"):
        assert python_wording not in err, err
    return err


# ---------------------------------------------------------------- one error format

@pytest.mark.parametrize(("args", "command", "says"), [
    (["check", "--state", "missing.json"], "check", "missing.json: no such file or folder"),
    (["check", "--state", str(BUDGETS / "state"), "--write", "missing.yaml"], "check",
     "missing.yaml: no such file or folder"),
    (["catalog", "--state", "missing.yaml"], "catalog", "missing.yaml: no such file or folder"),
    (["gpuclass", "validate", "missing.yaml"], "gpuclass validate", "missing.yaml: no such file or folder"),
    (["template", "tenant-a", "charts/missing", "-n", "tenant-root"], "template",
     "chart charts/missing: no such folder or archive"),
    (["template", "tenant-a", "charts/tenant", "-n", "tenant-root", "-f", "missing.yaml"], "template",
     "missing.yaml: no such file or folder"),
    (["golden", "missing"], "golden", "missing: no such folder"),
    (["template", "--bogus"], "template", "no such option '--bogus' (see 'cozyrender template --help')"),
    (["catalog", "-o", "xml", "--state", "x"], "catalog", "invalid value for '-o' / '--output'"),
    (["nosuch"], "", "no such command 'nosuch'"),
])
def test_every_error_is_one_line_in_one_format(args, command, says, tmp_path):
    result = cozy(*args, cwd=ROOT)
    line = one_error_line(result, command) if command else None
    if not command:
        err = result.stderr.decode()
        assert result.returncode == 2 and err.startswith("cozyrender: error: ") and err.count("\n") == 1, err
        line = err
    assert says in line, line
    assert result.stdout == b""


def test_a_folder_that_cannot_be_read_is_said_in_words(tmp_path):
    locked = tmp_path / "state.yaml"
    locked.mkdir()  # a folder where a file is expected: read as a folder of YAML files (none)
    (locked / "x.yaml").write_bytes(b"\xff\xfe")
    line = one_error_line(cozy("catalog", "--state", locked), "catalog")
    assert "not UTF-8" in line


def test_warnings_are_not_doubled(tmp_path):
    # a malformed budget key is removed with a warning: `warning:` once, under the command's name
    # (the tenant chart's schema refuses such a key; this chart has none)
    result = cozy("template", "tenant-a", "tests/data/helm/malformed-quota", "-n", "tenant-root", cwd=ROOT)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    lines = err.splitlines()
    assert len(lines) == 2, err  # the key's requests. and limits. forms
    for line in lines:
        assert line.startswith("cozyrender template: warning: post-render: ") and line.count("warning") == 1, err


# ---------------------------------------------------------------- `-` for standard input

def test_check_reads_state_and_write_from_stdin():
    state = "".join(f"---\n{p.read_text()}" for p in sorted((BUDGETS / "state").glob("*.yaml")))
    from_files = cozy("check", "--state", BUDGETS / "state", "--write", BUDGETS / "vm-refused.yaml", "-o", "json")
    state_stdin = cozy("check", "--state", "-", "--write", BUDGETS / "vm-refused.yaml", "-o", "json", stdin=state)
    write_stdin = cozy("check", "--state", BUDGETS / "state", "--write", "-", "-o", "json",
                       stdin=(BUDGETS / "vm-refused.yaml").read_bytes())
    assert from_files.returncode == state_stdin.returncode == write_stdin.returncode == 1, state_stdin.stderr
    decision = json.loads(from_files.stdout)
    assert decision["allowed"] is False and decision["reasons"]
    assert json.loads(state_stdin.stdout) == decision == json.loads(write_stdin.stdout)


def test_stdin_is_read_once():
    line = one_error_line(cozy("check", "--state", "-", "--write", "-", stdin="kind: List\nitems: []\n"), "check")
    assert "standard input ('-') can be given only once" in line


def test_catalog_and_gpuclass_read_stdin():
    nodes = "".join(f"---\n{(CLUSTER / name).read_text()}" for name in ("nodes.yaml", "pods.yaml", "gpuclasses.yaml"))
    piped = cozy("catalog", "--state", "-", stdin=nodes)
    files = cozy("catalog", "--state", CLUSTER)
    assert piped.returncode == files.returncode == 0 and piped.stdout == files.stdout
    assert b"a100-4c" in piped.stdout
    validated = cozy("gpuclass", "validate", "-", stdin=(CLUSTER / "gpuclasses.yaml").read_bytes())
    assert validated.returncode == 0 and b"gpuclass/a100-4c: valid (create)" in validated.stdout


def test_template_reads_values_from_stdin():
    piped = cozy("template", "tenant-a", "charts/tenant", "-n", "tenant-root", "-f", "-", "--raw",
                 stdin="resourceQuotas: {cpu: '3'}\n", cwd=ROOT)
    flagged = cozy("template", "tenant-a", "charts/tenant", "-n", "tenant-root", "--set-string", "resourceQuotas.cpu=3",
                   "--raw", cwd=ROOT)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == flagged.stdout and b'limits.cpu: "3"' in piped.stdout


# ---------------------------------------------------------------- folders and -o

def test_gpuclass_validate_takes_folders_and_writes_json_and_yaml(tmp_path):
    folder = tmp_path / "classes"
    folder.mkdir()
    (folder / "good.yaml").write_text((CLUSTER / "gpuclasses.yaml").read_text())
    (folder / ".hidden.yaml").write_text("not: [yaml")  # dot-files are skipped
    bad = yaml.safe_load("""
apiVersion: cozystack.io/v1alpha1
kind: GPUClass
metadata: {name: BadName}
spec: {vendor: NVIDIA, model: L4, mode: passthrough, memory: 24Gi, sourceKind: PCIHostDevice,
       resourceName: nvidia.com/L4}
""")
    (folder / "sub").mkdir()
    (folder / "sub" / "bad.json").write_text(json.dumps(bad))
    table = cozy("gpuclass", "validate", folder)
    as_json = cozy("gpuclass", "validate", folder, "-o", "json")
    as_yaml = cozy("gpuclass", "validate", folder, "-o", "yaml")
    assert table.returncode == as_json.returncode == as_yaml.returncode == 1, table.stderr
    assert b"gpuclass/BadName: invalid (create):" in table.stdout
    data = json.loads(as_json.stdout)
    assert data == yaml.safe_load(as_yaml.stdout)
    assert data["valid"] is False
    by_name = {item["name"]: item for item in data["classes"]}
    assert by_name["a100-4c"]["valid"] and by_name["a100-4c"]["action"] == "create"
    assert not by_name["BadName"]["valid"] and by_name["BadName"]["source"].endswith("bad.json")
    assert any("metadata.name must be a DNS-1123 label" in v["message"] for v in by_name["BadName"]["violations"])


def test_catalog_and_check_share_the_output_vocabulary():
    table = cozy("catalog", "--state", CLUSTER)
    as_json = cozy("catalog", "--state", CLUSTER, "-o", "json")
    as_yaml = cozy("catalog", "--state", CLUSTER, "-o", "yaml")
    assert table.stdout.startswith(b"NAME ") and json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
    audit_json = cozy("check", "--state", BUDGETS / "state", "-o", "json")
    audit_yaml = cozy("check", "--state", BUDGETS / "state", "-o", "yaml")
    audit_table = cozy("check", "--state", BUDGETS / "state")
    assert audit_json.returncode == audit_yaml.returncode == audit_table.returncode == 0
    assert json.loads(audit_json.stdout) == yaml.safe_load(audit_yaml.stdout)
    assert re.search(rb"^\d+ errors?, \d+ warnings?$", audit_table.stdout, re.M), audit_table.stdout
    assert b"(s)" not in audit_table.stdout


# ---------------------------------------------------------------- Helm's argument order

def test_template_takes_release_then_chart_like_helm(tmp_path):
    ordered = cozy("template", "tenant-a", "charts/tenant", "-n", "tenant-root", "--raw", cwd=ROOT)
    assert ordered.returncode == 0 and b"name: tenant-a\n" in ordered.stdout, ordered.stderr
    # the old order names the fix
    swapped = cozy("template", "charts/tenant", "tenant-a", "-n", "tenant-root", cwd=ROOT)
    line = one_error_line(swapped, "template")
    assert "the chart comes last, as for helm: cozyrender template tenant-a charts/tenant" in line
    # one argument is the chart, released as helm's "release-name" (refused by this chart's rule)
    default = cozy("template", "charts/tenant", "-n", "tenant-root", cwd=ROOT)
    assert "release-name" in default.stderr.decode()
    generated = cozy("template", "-g", "charts/tenant", "-n", "tenant-root", "--raw", cwd=ROOT)
    assert generated.returncode == 0, generated.stderr
    assert re.search(rb"\n  name: tenant-\d{10}\n", generated.stdout), generated.stdout[:400]
    both = cozy("template", "-g", "tenant-a", "charts/tenant", "-n", "tenant-root", cwd=ROOT)
    assert "either a release name or --generate-name" in one_error_line(both, "template")


def test_bundled_charts_by_name_outside_the_repository(tmp_path):
    by_name = cozy("template", "tenant-a", "tenant", "-n", "tenant-root", "--raw", cwd=tmp_path)
    by_path = cozy("template", "tenant-a", ROOT / "charts" / "tenant", "-n", "tenant-root", "--raw", cwd=tmp_path)
    assert by_name.returncode == 0 and by_name.stdout == by_path.stdout, by_name.stderr


@pytest.mark.parametrize(("args", "rule"), [
    (["tenant-a", "charts/tenant", "-n", "tenant-Root"], "namespace name 'tenant-Root' is not a DNS-1123 label"),
    (["tenant-a", "charts/tenant", "-n", "tenant-" + "x" * 60], "namespace name 'tenant-xxx"),
    (["Tenant-A", "charts/tenant", "-n", "tenant-root"], "release name 'Tenant-A' is not a DNS-1123 subdomain"),
])
def test_names_are_checked_against_kubernetes_rules(args, rule):
    line = one_error_line(cozy("template", *args, cwd=ROOT), "template")
    assert rule in line, line


def test_api_versions_and_kube_version_reach_the_chart(tmp_path):
    chart = tmp_path / "cap"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: cap\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cap}\ndata:\n"
        "  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        "  gpuclass: {{ .Capabilities.APIVersions.Has \"cozystack.io/v1alpha1/GPUClass\" | quote }}\n"
        "  other: {{ .Capabilities.APIVersions.Has \"example.org/v1\" | quote }}\n")
    plain = cozy("template", "r", chart, "--raw")
    given = cozy("template", "r", chart, "--raw", "-a", "cozystack.io/v1alpha1/GPUClass,example.org/v1",
                 "--kube-version", "1.31.2")
    assert plain.returncode == given.returncode == 0, given.stderr
    assert yaml.safe_load(plain.stdout)["data"]["gpuclass"] == "false"
    assert yaml.safe_load(given.stdout)["data"] == {"kube": "v1.31.2", "gpuclass": "true", "other": "true"}
    bad = one_error_line(cozy("template", "r", chart, "--kube-version", "bogus"), "template")
    assert "bogus" in bad


# ---------------------------------------------------------------- completion and help

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell):
    result = cozy("completion", shell)
    assert result.returncode == 0 and b"_COZYRENDER_COMPLETE" in result.stdout


def test_completion_completes_commands_and_options():
    env = {"_COZYRENDER_COMPLETE": "bash_complete", "COMP_WORDS": "cozyrender gpu", "COMP_CWORD": "1"}
    assert cozy(env=env).stdout.decode().split() == ["plain,gpuclass"]
    env = {"_COZYRENDER_COMPLETE": "bash_complete", "COMP_WORDS": "cozyrender template --kube", "COMP_CWORD": "2"}
    assert "plain,--kube-version" in cozy(env=env).stdout.decode().split()


HELP_PAGES = [[], ["post-render"], ["template"], ["golden"], ["check"], ["catalog"], ["gpuclass"],
              ["gpuclass", "validate"], ["completion"]]


@pytest.mark.parametrize("command", HELP_PAGES, ids=lambda c: " ".join(c) or "cozyrender")
def test_every_help_page_has_an_example_and_uncut_summaries(command):
    result = cozy(*command, "--help")
    text = result.stdout.decode()
    assert result.returncode == 0 and "Examples:" in text, text
    cut = [line for line in text.splitlines() if line.rstrip().endswith("...") and "[" not in line]
    assert not cut, cut  # click cuts summaries with "..."


def test_post_render_help_goes_through_click():
    result = cozy("post-render", "--help")
    assert result.returncode == 0 and b"Helm post-renderer" in result.stdout


def test_gpuclass_crd_from_stdin(tmp_path):
    from cozyrender.resources import crd_path

    piped = cozy("gpuclass", "validate", CLUSTER / "gpuclasses.yaml", "--crd", "-", stdin=crd_path().read_bytes())
    assert piped.returncode == 0 and b"gpuclass/a100-4c: valid (create)" in piped.stdout, piped.stderr
    missing = one_error_line(cozy("gpuclass", "validate", CLUSTER / "gpuclasses.yaml", "--crd", "nope.yaml"),
                             "gpuclass validate")
    assert "nope.yaml: no such file" in missing


def test_catalog_wide_adds_the_class_fields():
    wide = cozy("catalog", "--state", CLUSTER, "-o", "wide")
    table = cozy("catalog", "--state", CLUSTER)
    assert wide.returncode == 0, wide.stderr
    lines = wide.stdout.decode().splitlines()
    assert lines[0].split() == ["NAME", "VENDOR/MODEL", "MODE/PROFILE", "MEMORY", "SOURCE", "LICENSE",
                                "TOLERATIONS", "RESOURCE", "FREE", "ALLOCATABLE", "NODES", "STATUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    classes = {c["metadata"]["name"]: c["spec"] for c in yaml.safe_load((CLUSTER / "gpuclasses.yaml").read_text())["items"]}
    assert rows.keys() == classes.keys() == {line.split()[0] for line in table.stdout.decode().splitlines()[1:]}
    for name, spec in classes.items():
        assert rows[name][4] == spec["sourceKind"]
        assert rows[name][5] == str(spec.get("license", {}).get("featureType", "-"))
        assert rows[name][6] == str(len(spec.get("tolerations", [])))


# ---------------------------------------------------------------- state_errors: one mapping, our words

@pytest.mark.parametrize("raised,expected", [
    (RecursionError("maximum recursion depth exceeded while calling a Python object"),
     "cannot read the input: it is nested too deeply to be a Kubernetes object"),
    (OverflowError("int too large to convert to float"), "cannot read the input: a number in it is out of range"),
    (ZeroDivisionError("division by zero"), "cannot read the input: a number in it is out of range"),
    (ValueError("something odd"), "cannot read the input: something odd"),
])
def test_state_errors_speak_in_the_commands_words(raised, expected):
    """`check`, `tree` and `catalog` share one mapping of what reading a state
    can raise (commands.state_errors); Python's exception names never reach
    the user (issue 19, the final review's finding)."""
    import click

    from cozyrender.commands import CommandError, state_errors

    with click.Context(click.Command("check")):
        with pytest.raises(CommandError) as caught:
            with state_errors():
                raise raised
    assert caught.value.exit_code == 2 and caught.value.format_message() == expected
    assert type(raised).__name__ not in caught.value.format_message()


def test_state_errors_name_the_file_of_the_object():
    import click

    from cozyrender.commands import CommandError, state_errors
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import Objects

    objects = Objects()
    bad = {"kind": "Pod"}
    objects.add("pods.yaml", [bad])
    with click.Context(click.Command("tree")):
        with pytest.raises(CommandError) as caught:
            with state_errors() as loaded:
                loaded.append(objects)
                raise ShapeError("Pod ?: metadata is required", bad)
    assert caught.value.format_message() == "pods.yaml: Pod ?: metadata is required"


# ---------------------------------------------------------------- nesting past Python's stack

def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


def test_a_helmrelease_with_values_hundreds_of_levels_deep_is_one_line(tmp_path):
    """Found by review after issue 19: `flux --helmrelease` walked inline
    values of 500 levels into a 2,000-line RecursionError."""
    hr = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
          "metadata": {"name": "tenant-a", "namespace": "tenant-root"},
          "spec": {"chart": {"spec": {"chart": "charts/tenant", "sourceRef": {"kind": "GitRepository",
                                                                                "name": "cozystack"}}},
                   "values": {"deep": _nested(500)}}}
    (tmp_path / "hr.yaml").write_text(json.dumps(hr))
    err = one_error_line(cozy("flux", "--helmrelease", tmp_path / "hr.yaml", "--chart-dir", ROOT), "flux")
    assert f"{tmp_path / 'hr.yaml'}: " in err and "nested too deeply" in err


def test_values_hundreds_of_levels_deep_are_one_line_naming_the_file(tmp_path):
    (tmp_path / "values.yaml").write_text("a: " + "[" * 990 + "0" + "]" * 990 + "\n")
    for command in ("template", "flux"):
        err = one_error_line(cozy(command, "tenant-a", "tenant", "-n", "tenant-root", "-f", tmp_path / "values.yaml"),
                             command)
        assert err.endswith(f"failed to parse {tmp_path / 'values.yaml'}: nested too deeply\n"), err
    err = one_error_line(cozy("template", "tenant-a", "tenant", "-n", "tenant-root",
                              "--set-json", "x=" + "[" * 3000 + "0" + "]" * 3000), "template")
    assert "nested too deeply" in err


def test_a_long_typed_value_is_shortened_in_a_usage_error():
    err = one_error_line(cozy("tree", "--state", ROOT / "examples" / "budgets" / "state", "--depth", "9" * 5000), "tree")
    assert "(5000 characters)" in err and len(err) < 300, err


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--listen", "127.0.0.1:" + "9" * 5000, "--listen 127.0.0.1:9999999999…99999999 (5010 characters): expected HOST:PORT"),
    ("--reservation-ttl", "9" * 5000, "is not a number of seconds from 1 to 3600"),
    ("--reservation-ttl", "nan", "'nan' is not a number of seconds from 1 to 3600"),
    ("--reservation-ttl", "5000", "'5000' is not a number of seconds from 1 to 3600"),
])
def test_webhook_numbers_in_its_own_words(flag, value, says, tmp_path):
    err = one_error_line(cozy("webhook", "--tls-cert", tmp_path / "c", "--tls-key", tmp_path / "k", flag, value),
                         "webhook")
    assert says in err and "inf" not in err and "digits" not in err and len(err) < 300, err
