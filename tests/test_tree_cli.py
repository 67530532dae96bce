"""`cozyrender tree` through the real entry point: golden terminal output
for the bundled example and a state with over-commits (filters included),
reviewed by hand; colour only on a terminal and never with NO_COLOR; the
JSON of the command equal to the library's; bad input as one error line.

Regenerate the golden files after a reviewed change with
COZYRENDER_UPDATE_GOLDEN=1 (then read the diff)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest
from pathlib import Path

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "budgets" / "state"
OVERCOMMIT = ROOT / "tests" / "data" / "tree" / "overcommit.yaml"
GOLDEN = ROOT / "tests" / "data" / "tree" / "golden"
COMMAND = [sys.executable, "-m", "cozyrender", "tree"]


def tree(*args, stdin: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run([*COMMAND, *map(str, args)], input=stdin, capture_output=True,
                          env={**environment, **(env or {})}, timeout=120, cwd=ROOT)


CASES = {
    "example": [EXAMPLE],
    "example-tenant-ml": [EXAMPLE, "--tenant", "ml"],
    "example-class-a100": [EXAMPLE, "--class", "a100"],
    "example-depth-1": [EXAMPLE, "--depth", "1"],
    "overcommit": [OVERCOMMIT],
    "overcommit-acme-depth-1": [OVERCOMMIT, "--tenant", "tenant-acme", "--depth", "1"],
    "overcommit-platform-off": [OVERCOMMIT, "--platform-vgpu", "false", "--tenant", "tenant-acme-ml"],
    # Issue 19 item 9: the table/wide columns check and catalog print.
    "example-table": [EXAMPLE, "-o", "table"],
    "overcommit-table": [OVERCOMMIT, "-o", "table"],
    "overcommit-wide": [OVERCOMMIT, "-o", "wide"],
    "overcommit-wide-class-a100": [OVERCOMMIT, "-o", "wide", "--class", "a100"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_terminal_output(name):
    state, *options = CASES[name]
    result = tree("--state", state, *options)
    assert result.returncode == 0, result.stderr
    # Issue 19 item 2: what was read, the one line on stderr.
    assert re.fullmatch(rb"cozyrender tree: read \d+ files? \(.*\d+ Namespace.*\d+ Tenant.*\)\n", result.stderr)
    text = result.stdout.decode()
    assert "\x1b[" not in text  # piped: no colour
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("COZYRENDER_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_table_rows_are_the_json_figures():
    """-o table and -o wide lay out the JSON's figures, row for row: one row
    per key, one for a tenant declaring none; wide only adds columns."""
    data = json.loads(tree("--state", OVERCOMMIT, "-o", "json").stdout)
    table = tree("--state", OVERCOMMIT, "-o", "table").stdout.decode().splitlines()
    wide = tree("--state", OVERCOMMIT, "-o", "wide").stdout.decode().splitlines()
    expected = []  # (namespace, key, budget, used, carved out, left) per row
    for node in data["tenants"]:
        expected += [(node["namespace"], key["key"], *(str(key[name]) for name in ("budget", "used", "carvedOut", "left")))
                     for key in node["keys"]] or [(node["namespace"], "-", "-", "-", "-", "-")]
    rows = [line.split() for line in table[1:]]
    assert len(rows) == len(expected) == len(wide) - 1
    assert [(row[0], *row[2:7]) for row in rows] == expected
    assert table[0].split() == ["NAMESPACE", "TENANT", "KEY", "BUDGET", "USED", "CARVED", "OUT", "LEFT", "STATUS"]
    assert wide[0].startswith(table[0]) and "LIMIT ABOVE" in wide[0]
    over = [row for row in rows if "OVER" in row]
    assert len(over) == data["summary"]["overCommitted"] > 0


def test_the_example_agrees_with_check():
    """The issue's "done when": the example's headroom per key, and the
    numbers agree with check's messages for the same state."""
    text = tree("--state", EXAMPLE).stdout.decode()
    acme = [line.split() for line in text.splitlines() if "acme" in line or line.lstrip("│ ").startswith(("cpu", "memory"))]
    assert ["└──", "acme", "[pool]", "gpuclass.cozystack.io/devices", "8", "2", "4", "2"] in acme
    # check's refusal of tenant-refused.yaml: "budget 32, carved out 8, used 4 (limits.cpu) (available 20)"
    refused = subprocess.run([sys.executable, "-m", "cozyrender", "check", "--state", EXAMPLE, "--write",
                              ROOT / "examples" / "budgets" / "tenant-refused.yaml"], capture_output=True, cwd=ROOT)
    assert "budget 32, carved out 8, used 4 (limits.cpu) (available 20)" in refused.stdout.decode()
    assert any(row[-5:] == ["cpu", "32", "4", "8", "20"] for row in acme)


def test_json_is_the_library_tree():
    from cozyrender.budgets import audit, index_state
    from cozyrender.commands import load_state
    from cozyrender.tree import build_tree
    from cozyrender.tree.jsonout import tree_data

    state = index_state(load_state([str(OVERCOMMIT)]))
    expected = tree_data(build_tree(state, audit(state)))
    result = tree("--state", OVERCOMMIT, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert expected["schemaVersion"] == 1


def test_state_from_stdin_equals_files():
    stdin = b"\n---\n".join(p.read_bytes() for p in sorted(EXAMPLE.iterdir()))
    assert tree("--state", "-", stdin=stdin).stdout == tree("--state", EXAMPLE).stdout


def _in_terminal(*args, env: dict) -> str:
    """Run the command with its stdout on a pseudo-terminal; what it wrote."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    process = subprocess.Popen([*COMMAND, *map(str, args)], stdout=follower, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env={**environment, **env}, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    assert process.returncode == 0, process.stderr.read()
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_only_and_never_with_no_color():
    coloured = _in_terminal("--state", OVERCOMMIT, env={})
    assert "\x1b[31m" in coloured or "\x1b[31;1m" in coloured or "\x1b[1;31m" in coloured  # over-commits in red
    plain = _in_terminal("--state", OVERCOMMIT, env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain
    # the same text once the escapes are gone (the terminal writes CRLF)
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


@pytest.mark.parametrize(("args", "says"), [
    ([], "give the state with --state PATH"),
    (["--state", "missing.yaml"], "missing.yaml: no such file or folder"),
    (["--state", EXAMPLE, "--tenant", "nobody"], "no tenant 'nobody' in the state"),
    (["--state", EXAMPLE, "--class", "A100"], "'A100' is not a GPU class name"),
    (["--state", EXAMPLE, "--depth", "-1"], "--depth must be 0 or more"),
    (["--state", EXAMPLE, "--kubeconfig", "kc"], "not both"),
    (["--kubeconfig", "kc"], "kc: no such file or folder"),
    # an empty state is refused as check's audit refuses it: a tree of nothing would look healthy
    (["--state", "-"], "the state holds no Tenant"),
])
def test_bad_input_is_one_error_line(args, says):
    result = tree(*args)
    if says is None:
        assert result.returncode == 0 and b"tenant-root" in result.stdout, result.stderr
        return
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert result.stdout == b""
    assert err.count("\n") == 1 and err.startswith("cozyrender tree: error: "), err
    assert says in err, err
    assert "Traceback" not in err


def test_a_state_that_cannot_be_read_is_bad_input(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: A, namespace: tenant-root}\n")
    result = tree("--state", bad)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().startswith("cozyrender tree: error: ") and "not a tenant name" in result.stderr.decode()


def test_two_tenants_of_one_name_need_the_namespace(tmp_path):
    state = tmp_path / "s.yaml"
    state.write_text("\n---\n".join(
        f"apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{}}"
        for name, ns in [("a", "tenant-root"), ("b", "tenant-root"), ("x", "tenant-a"), ("x", "tenant-b")])
        + "\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-root}\n")
    err = tree("--state", state, "--tenant", "x").stderr.decode()
    assert "2 tenants are named 'x' (tenant-a-x, tenant-b-x): give the namespace instead" in err
    assert tree("--state", state, "--tenant", "tenant-b-x").returncode == 0


def test_help_has_examples_and_the_group_lists_tree():
    helped = tree("--help")
    assert helped.returncode == 0 and b"Examples:" in helped.stdout and b"--kubeconfig" in helped.stdout
    listed = subprocess.run([sys.executable, "-m", "cozyrender", "--help"], capture_output=True, cwd=ROOT)
    assert b"tree  " in listed.stdout and b"The pool tree" in listed.stdout


def test_a_leaf_namespace_is_a_subtree():
    result = tree("--state", EXAMPLE, "--tenant", "tenant-acme-web")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[2].startswith("web (tenant-acme-web) [pool]")


def test_a_live_cluster_gives_the_tree_of_what_it_holds(cluster, tmp_path):
    """`--kubeconfig` reads the cluster with the webhook's client; the tree
    equals the one drawn from the same objects given as a file."""
    import json as _json

    from cozyrender.kube.client import make_client, read_state

    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "treeview", "namespace": "tenant-root"},
        "spec": {"resourceQuotas": {"gpuclass.cozystack.io/devices": 3, "cpu": 4}}}))
    live = subprocess.run([sys.executable, "-m", "cozyrender", "tree", "--kubeconfig", str(cluster.kubeconfig),
                           "-o", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert live.returncode == 0, live.stderr
    state = tmp_path / "state.json"
    state.write_text(_json.dumps({"apiVersion": "v1", "kind": "List",
                                  "items": read_state(make_client(str(cluster.kubeconfig)))}))
    offline = subprocess.run([sys.executable, "-m", "cozyrender", "tree", "--state", str(state), "-o", "json"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert offline.returncode == 0, offline.stderr
    assert _json.loads(live.stdout) == _json.loads(offline.stdout)
    # The tenant created above is in the tree read from the cluster, with its budget
    # (issue 27 item 8: equal trees alone would pass over a cluster read as empty).
    tenants = {t["namespace"]: t for t in _json.loads(live.stdout)["tenants"]}
    created = tenants["tenant-treeview"]
    assert created["tenant"] == "treeview" and created["createdIn"] == "tenant-root"
    budgets = {k["key"]: k["budget"] for k in created["keys"]}
    assert budgets["gpuclass.cozystack.io/devices"] == 3 and budgets["cpu"] == "4"


def test_check_reads_the_cluster_as_tree_does_and_the_export_line_gives_the_same_state(cluster, tmp_path):
    """Issue 27 item 5: `check --kubeconfig` audits the cluster itself, and the
    one export line the help and docs give (run by bash with the pinned
    kubectl) writes a file `check --state` answers the same from."""
    import json as _json

    from cozyrender.kube.client import state_export
    from tests.conftest import BIN

    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "exported", "namespace": "tenant-root"},
        "spec": {"resourceQuotas": {"gpuclass.cozystack.io/devices": 2}}}))
    write = tmp_path / "vm.yaml"
    write.write_text(json.dumps({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "VMInstance",
                                 "metadata": {"name": "big", "namespace": "tenant-exported"},
                                 "spec": {"gpus": [{"name": "nvidia.com/x"}, {"name": "nvidia.com/y"}]}}))
    live = subprocess.run([sys.executable, "-m", "cozyrender", "check", "--kubeconfig", str(cluster.kubeconfig),
                           "-o", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert live.returncode in (0, 1), live.stderr
    assert live.stderr.startswith(f"cozyrender check: read the cluster of {cluster.kubeconfig} (") and "Tenant" in live.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(Path(os.environ.get("COZYRENDER_KUBECTL") or BIN / "kubectl"))
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    exported = subprocess.run(["bash", "-c", f"{state_export()} > live.yaml"], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
    assert exported.returncode == 0, exported.stderr
    offline = subprocess.run([sys.executable, "-m", "cozyrender", "check", "--state", "live.yaml", "-o", "json"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert offline.returncode == live.returncode, offline.stderr
    assert _json.loads(offline.stdout) == _json.loads(live.stdout)
    assert "Tenant" in offline.stderr and "Namespace" in offline.stderr
    # One write, against the cluster and against the export: the same answer, naming the namespace's pool.
    answers = [subprocess.run([sys.executable, "-m", "cozyrender", "check", *source, "--write", str(write), "-o", "json"],
                              capture_output=True, text=True, cwd=tmp_path) for source in
               (["--kubeconfig", str(cluster.kubeconfig)], ["--state", "live.yaml"])]
    assert [a.returncode for a in answers] == [1, 1], [a.stderr for a in answers]
    assert _json.loads(answers[0].stdout) == _json.loads(answers[1].stdout)
    assert "tenant-exported" in answers[0].stdout
