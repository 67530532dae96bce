"""`cozyrender check` as a command: modes, output formats, exit codes, and
bad input as a clear error with exit 2 (never a traceback)."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner
from test_budgets_builders import as_listed, classes, klist, run_check, tenant, vm, write_json

from cozyrender.commands.check import command

A100 = "a100.gpuclass.cozystack.io/devices"


def _invoke(*args):
    return CliRunner().invoke(command, list(args))


@pytest.mark.parametrize("write_text,why", [
    ("kind: [unclosed", "not valid YAML"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\n", "cannot check this kind"),
    ("apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata: {name: v, namespace: tenant-a}\n"
     "spec: {gpus: [{class: a100, count: -1}]}\n", "spec.gpus[0].count"),
    ("apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata: {name: v, namespace: tenant-a}\n"
     "spec: {gpus: [{class: a100, count: 0.5}]}\n", "spec.gpus[0].count"),
    ("apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata: {name: v, namespace: tenant-a}\n"
     "spec: {gpus: [{count: 1}]}\n", "neither a class nor a device name"),
    ("a: 1\n---\nb: 2\n", "exactly one"),
    ("- 1\n", "not an object"),
])
def test_bad_write_is_exit_2_with_a_clear_error(tmp_path, write_text, why):
    state = write_json(tmp_path / "state.json", klist(as_listed([tenant("a", quotas={A100: 1})])))
    (tmp_path / "write.yaml").write_text(write_text)
    result = _invoke("--state", str(state), "--write", str(tmp_path / "write.yaml"))
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error:" in result.output and why in result.output and "Traceback" not in result.output


def test_bad_state_is_exit_2(tmp_path):
    (tmp_path / "state.yaml").write_text("apiVersion: apps.cozystack.io/v1alpha1\nkind: KubernetesNodes\n"
                                         "metadata: {name: p, namespace: tenant-a}\nspec: {gpus: [{class: a100}]}\n")
    result = _invoke("--state", str(tmp_path / "state.yaml"))
    assert result.exit_code == 2 and "spec.maxReplicas is required" in result.output
    result = _invoke("--state", str(tmp_path / "missing"))
    assert result.exit_code == 2 and "no such file or folder" in result.output
    assert _invoke().exit_code == 2


def test_state_paths_after_one_state_flag_and_folders(tmp_path):
    (tmp_path / "repo").mkdir()
    write_json(tmp_path / "repo" / "a.json", tenant("a", quotas={A100: 1}))
    write_json(tmp_path / "repo" / "classes.json", klist(classes()))
    write_json(tmp_path / "repo" / "cluster.json", klist(as_listed([])))  # the root Tenant, its Namespace
    write_json(tmp_path / "vm.json", vm("tenant-a", "v", [{"class": "a100"}]))
    write_json(tmp_path / "new.json", vm("tenant-a", "w", [{"class": "a100"}]))
    result = _invoke("--state", str(tmp_path / "repo"), str(tmp_path / "vm.json"), "--write", str(tmp_path / "new.json"))
    assert result.exit_code == 1 and result.stdout.startswith("refused")
    assert "exceeded GPU budget" in result.output and "GPUClass" not in result.stdout


def test_audit_json_and_exit_codes(tmp_path):
    clean = run_check(tmp_path, [tenant("a", quotas={A100: 1})], None, "-o", "json")
    assert clean.exit_code == 0 and json.loads(clean.output) == []
    over = run_check(tmp_path, [tenant("a", quotas={A100: 1}), vm("tenant-a", "v", [{"class": "a100", "count": 2}])])
    assert over.exit_code == 1 and "over its GPU budget" in over.output and "1 error," in over.output


def test_the_installed_command(tmp_path, repo_root):
    state = write_json(tmp_path / "state.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    write = write_json(tmp_path / "vm.json", vm("tenant-a", "v", [{"class": "a100", "count": 5}]))
    run = subprocess.run(
        [str(repo_root / ".venv" / "bin" / "cozyrender"), "check", "--state", str(state), "--write", str(write), "-o", "json"],
        capture_output=True, text=True, check=False,
    )
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["reasons"][0]["field"] == "spec.gpus[0].count"
    # Issue 19 item 2: what was read, on stderr (stdout is the answer alone).
    assert run.stderr == ("cozyrender check: read 1 file (2 GPUClass, 2 Namespace, 2 Tenant)\n")


def test_bundled_example(repo_root):
    example = repo_root / "examples" / "budgets"
    audit = _invoke("--state", str(example / "state"))
    # Issue 19 item 10: the one warning is the one its comments announce (web
    # declares only cpu); ml follows the recommended pattern and is not warned about.
    assert audit.exit_code == 0 and "0 errors, 1 warning" in audit.output
    assert "Tenant tenant-acme/web declares its own quotas but not" in audit.output
    assert "tenant-acme/ml" not in audit.output
    assert _invoke("--state", str(example / "state"), "--write", str(example / "vm-admitted.yaml")).exit_code == 0
    refused = _invoke("--state", str(example / "state"), "--write", str(example / "vm-refused.yaml"))
    assert refused.exit_code == 1
    assert _invoke("--state", str(example / "state"), "--write", str(example / "tenant-refused.yaml")).exit_code == 1


def test_unreadable_pod_resources_in_the_state_are_exit_2(tmp_path):
    from test_budgets_builders import pod

    state = [tenant("a", quotas={"cpu": 4}), pod("tenant-a", "p", {"cpu": "lots"})]
    result = run_check(tmp_path, state)
    assert result.exit_code == 2, result.output
    assert ("state.json: Pod tenant-a/p (in the namespace of Tenant tenant-root/a): "
            "spec.containers[0].resources.limits.cpu") in result.output
    assert "'lots'" in result.output and result.output.count("\n") == 1
