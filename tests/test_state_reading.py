"""Issue 19 item 2: an empty or unread state is never audited green; what was
read is said; suffixes are read in any letter case; every skipped file is named."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from tests.conftest import ROOT

TENANT = ("apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: a\n  namespace: tenant-root\n"
          "spec:\n  resourceQuotas:\n    gpuclass.cozystack.io/devices: 1\n")
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-a\n"


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
    assert err == (f"cozyrender check: error: the state holds no Tenant (no YAML or JSON file in {tmp_path}); "
                   "an audit checks the tenants' budgets (kubectl get tenants,namespaces,resourcequotas,pods,... "
                   "-A -o yaml)\n")


def test_a_state_without_tenants_is_not_audited_green(tmp_path):
    (tmp_path / "ns.yaml").write_text(NAMESPACE)
    code, out, err = cozy("check", "--state", tmp_path)
    assert code == 2 and out == "" and "the state holds no Tenant (1 file read (" in err and "1 object)" in err


def test_suffixes_are_read_in_any_letter_case(tmp_path):
    (tmp_path / "tenants.YAML").write_text(TENANT)
    (tmp_path / "ns.Yml").write_text(NAMESPACE)
    code, out, err = cozy("check", "--state", tmp_path, "-o", "json")
    assert code == 0 and err == "", err


def test_every_skipped_file_is_named_with_why(tmp_path):
    (tmp_path / "tenants.yaml").write_text(TENANT)
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
    ]


def test_what_was_read_is_said_on_a_terminal(tmp_path):
    (tmp_path / "tenants.yaml").write_text(TENANT + "---\n" + TENANT.replace("name: a", "name: b"))
    (tmp_path / "ns.json").write_text('{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}}')
    code, out, err = cozy("check", "--state", tmp_path, stderr_tty=True)
    assert code == 0, err
    assert "cozyrender check: read 2 files (1 Namespace, 2 Tenant)\n" in err
    code, out, err = cozy("catalog", "--state", ROOT / "examples" / "cluster", stderr_tty=True)
    assert code == 0 and "cozyrender catalog: read 3 files (" in err and "GPUClass" in err


def test_an_empty_catalog_state_is_bad_input(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    code, out, err = cozy("catalog", "--state", tmp_path)
    assert code == 2 and out == "" and "the state holds no object (1 file read" in err
