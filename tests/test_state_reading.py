"""Issue 19 item 2: an empty or unread state is never audited green; what was
read is said; suffixes are read in any letter case; every skipped file is named."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from cozyrender.kube.client import state_export

STATE_KUBECTL = state_export()
from tests.conftest import ROOT

TENANT = ("apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: a\n  namespace: tenant-root\n"
          "spec:\n  resourceQuotas:\n    gpuclass.cozystack.io/devices: 1\n")
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-a\n"
VM = ("apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata: {name: v, namespace: tenant-a}\n"
      "spec: {runStrategy: Always}\n")
GPUCLASS = ("apiVersion: cozystack.io/v1alpha1\nkind: GPUClass\nmetadata: {name: a100}\nspec: {vendor: nvidia, "
            "model: A100, mode: passthrough, memory: 40Gi, sourceKind: PCIHostDevice, "
            "resourceName: nvidia.com/GA100_A100}\n")


def cozy(*args, stderr_tty: bool = False) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not stderr_tty:
        result = subprocess.run([sys.executable, "-m", "cozyrender", *map(str, args)], capture_output=True,
                                text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        return result.returncode, result.stdout, result.stderr
    leader, follower = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "cozyrender", *map(str, args)], stdout=subprocess.PIPE,
                                stderr=follower, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        os.close(follower)
        err = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(leader)
    return result.returncode, result.stdout, err.decode().replace("\r\n", "\n")


def test_an_empty_folder_is_not_audited_green(tmp_path):
    code, out, err = cozy("check", "--state", tmp_path)
    assert code == 2 and out == ""
    assert err == (f"cozyrender check: error: the state holds no Tenant and no Namespace (no YAML or JSON file "
                   f"in {tmp_path}); an audit checks the tenants' budgets and the Namespaces' vGPU labels: "
                   f"read the cluster with --kubeconfig, or export it with `{STATE_KUBECTL} > live.yaml`\n")


def test_a_state_without_tenants_is_not_audited_green(tmp_path):
    (tmp_path / "ns.yaml").write_text(NAMESPACE)
    code, out, err = cozy("check", "--state", tmp_path)
    assert code == 2 and out == "" and "the state holds no Tenant (1 file read (" in err and "1 object)" in err


@pytest.mark.parametrize("command", [["check"], ["check", "--write", "{write}"], ["tree"]])
def test_a_state_without_namespaces_is_bad_input(tmp_path, command):
    """`kubectl get tenants,vminstances,...` without `namespaces`: no tenant's
    vGPU label was read, and a cluster always has the Namespaces."""
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "tenants.yaml").write_text(TENANT)
    (tmp_path / "vm.yaml").write_text(VM)
    args = [part.format(write=tmp_path / "vm.yaml") for part in command]
    code, out, err = cozy(*args, "--state", tmp_path / "state")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"cozyrender {command[0]}: error: the state holds no Namespace (1 file read "
                          f"({tmp_path / 'state' / 'tenants.yaml'}), 1 object); ")
    assert STATE_KUBECTL in err
    # With the Namespace the same state is an answer.
    (tmp_path / "state" / "ns.yaml").write_text(NAMESPACE)
    assert cozy(*args, "--state", tmp_path / "state")[0] == 0


def test_a_gpuclass_write_needs_only_the_classes(tmp_path):
    (tmp_path / "classes.yaml").write_text(GPUCLASS)
    (tmp_path / "new.yaml").write_text(GPUCLASS.replace("name: a100", "name: h100").replace("A100", "H100"))
    code, out, err = cozy("check", "--state", tmp_path / "classes.yaml", "--write", tmp_path / "new.yaml")
    assert code == 0 and out.startswith("admitted"), err
    assert err == "cozyrender check: read 1 file (1 GPUClass)\n"


def test_suffixes_are_read_in_any_letter_case(tmp_path):
    (tmp_path / "tenants.YAML").write_text(TENANT)
    (tmp_path / "ns.Yml").write_text(NAMESPACE)
    code, out, err = cozy("check", "--state", tmp_path, "-o", "json")
    assert code == 0 and err == "cozyrender check: read 2 files (1 Namespace, 1 Tenant)\n", err


def test_every_skipped_file_is_named_with_why(tmp_path):
    (tmp_path / "tenants.yaml").write_text(TENANT)
    (tmp_path / "ns.yaml").write_text(NAMESPACE)
    (tmp_path / "notes.txt").write_text("kind: Tenant\n")
    (tmp_path / ".hidden.yaml").write_text(TENANT)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_text(TENANT)
    code, out, err = cozy("check", "--state", tmp_path, "-o", "json")
    assert code == 0, err
    assert err.splitlines() == [
        f"cozyrender check: warning: skipped {tmp_path}/.git/: a hidden folder",
        f"cozyrender check: warning: skipped {tmp_path}/.hidden.yaml: a hidden file",
        f"cozyrender check: warning: skipped {tmp_path}/notes.txt: not .yaml, .yml or .json",
        "cozyrender check: read 2 files (1 Namespace, 1 Tenant)",
    ]


@pytest.mark.parametrize("tty", [False, True], ids=["piped", "terminal"])
def test_what_was_read_is_said(tmp_path, tty):
    """Issue 19 item 2, on a terminal and off it (a CI log shows what a green
    answer was computed over); stdout stays the answer alone."""
    (tmp_path / "tenants.yaml").write_text(TENANT + "---\n" + TENANT.replace("name: a", "name: b"))
    (tmp_path / "ns.json").write_text('{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}}')
    code, out, err = cozy("check", "--state", tmp_path, stderr_tty=tty)
    assert code == 0 and out == "0 errors, 0 warnings\n", err
    assert err == "cozyrender check: read 2 files (1 Namespace, 2 Tenant)\n"
    code, out, err = cozy("tree", "--state", tmp_path, "-o", "json", stderr_tty=tty)
    assert code == 0 and out.startswith("{") and err == "cozyrender tree: read 2 files (1 Namespace, 2 Tenant)\n"
    code, out, err = cozy("catalog", "--state", ROOT / "examples" / "cluster", stderr_tty=tty)
    assert code == 0 and err == "cozyrender catalog: read 3 files (5 GPUClass, 7 Node, 8 Pod)\n"


def test_an_empty_catalog_state_is_bad_input(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    code, out, err = cozy("catalog", "--state", tmp_path)
    assert code == 2 and out == "" and "the state holds no object (1 file read" in err


def test_an_empty_folder_given_beside_a_state_is_named(tmp_path):
    """Found by review: `check --state state --state empty/` read nothing from
    empty/ without a word (a mistyped folder is not silently nothing)."""
    (tmp_path / "empty").mkdir()
    code, out, err = cozy("check", "--state", ROOT / "examples" / "budgets" / "state", "--state", tmp_path / "empty")
    assert code == 0, err
    assert err.splitlines()[0] == f"cozyrender check: warning: skipped {tmp_path / 'empty'}/: an empty folder"
    code, out, err = cozy("catalog", "--state", ROOT / "examples" / "cluster", "--state", tmp_path / "empty")
    assert code == 0 and f"skipped {tmp_path / 'empty'}/: an empty folder" in err
