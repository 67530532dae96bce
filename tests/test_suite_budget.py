"""The suite within its budget (issue 36): the tools that measure and sort it, held to their rules.

- tests/conftest.py marks a test `live` from what it and its fixtures start (a new live test is
  caught unmarked), `node` when it starts the node, and gives every test an xdist group: the
  node's tests one, the modules building in the checkout one, each session plane's users one,
  every other test its module's; a control
  plane started by a test not marked live is refused before anything starts.
- tools/test_times.py turns the JUnit report into the per-module table, with each plane's start.
- tools/cached_build.py rebuilds only when its inputs' bytes change, never for a timestamp, and a
  second clone copies from the store what the first built from identical inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT


def pytest_run(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


COLLECT_PLUGIN = """
import json, os
def pytest_collection_finish(session):
    found = {item.nodeid: [item.get_closest_marker("xdist_group").args[0], bool(item.get_closest_marker("live")),
                           bool(item.get_closest_marker("node"))] for item in session.items}
    with open(os.environ["COLLECTED_OUT"], "w") as out:
        json.dump(found, out)
"""
MODULES = ["tests/test_webhook_live.py", "tests/test_node_cluster.py", "tests/test_node_certmanager.py",
           "tests/test_tree_html.py", "tests/test_yamledit.py", "tests/test_postrender.py",
           "tests/test_webhook_ledger_live.py", "tests/test_cluster_helm.py", "tests/test_image.py",
           "tests/test_packaging.py"]


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> dict[str, dict[str, list]]:
    """module -> {test id: [xdist group, live, node]}, as one collection of MODULES gives them."""
    folder = tmp_path_factory.mktemp("collect")
    (folder / "collect_plugin.py").write_text(COLLECT_PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
           "COLLECTED_OUT": str(folder / "collected.json")}
    result = pytest_run("--collect-only", "-q", "-p", "collect_plugin", *MODULES, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    by_module: dict[str, dict[str, list]] = {}
    for nodeid, marks in json.loads((folder / "collected.json").read_text()).items():
        by_module.setdefault(nodeid.split("::")[0], {})[nodeid] = marks
    assert set(by_module) == set(MODULES)
    return by_module


def test_the_live_marker_follows_the_fixtures_a_test_uses(collection):
    # every test of a plane's module uses its plane; the browser's tests use Chromium
    for module in ("tests/test_webhook_live.py", "tests/test_node_cluster.py"):
        assert all(live for _, live, _ in collection[module].values()), module
    assert any(live for _, live, _ in collection["tests/test_tree_html.py"].values())
    # (test_postrender has tests with a parameter named `cluster`: a name alone makes nothing live)
    for module in ("tests/test_yamledit.py", "tests/test_postrender.py"):
        assert not any(live or node for _, live, node in collection[module].values()), module
    noded = {nodeid for tests in collection.values() for nodeid, (_, _, node) in tests.items() if node}
    assert noded == set(collection["tests/test_node_cluster.py"]) | set(collection["tests/test_node_certmanager.py"])


def test_every_test_has_its_group(collection):
    groups = {module: {group for group, _, _ in tests.values()} for module, tests in collection.items()}
    assert groups["tests/test_node_cluster.py"] == groups["tests/test_node_certmanager.py"] == {"node"}
    assert groups["tests/test_webhook_ledger_live.py"] == {"plane-cluster"}
    assert "plane-apiserver" in groups["tests/test_cluster_helm.py"]
    assert groups["tests/test_yamledit.py"] == {"tests/test_yamledit.py"}
    # both build in the checkout's build/ (setuptools): never at once
    assert groups["tests/test_image.py"] == groups["tests/test_packaging.py"] == {"checkout-build"}


def test_a_plane_started_by_a_test_not_marked_live_is_refused(tmp_path):
    """A starter the table does not know (the class reached through getattr) is refused at
    ControlPlane.start, before any process starts."""
    (tmp_path / "test_hidden_plane.py").write_text(textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import cluster

        def test_starts_a_plane_unmarked(tmp_path):
            plane = getattr(cluster, "Control" + "Plane")(tmp_path, tmp_path / "no-bin", webhook_replicas=0)
            plane.start()
        """ % str(ROOT / "tools" / "controlplane")))
    result = pytest_run("-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-p", "tests.conftest",
                        str(tmp_path / "test_hidden_plane.py"), "-q",
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "starts a control plane but is not marked live" in result.stdout
    assert "is missing: run `make controlplane binaries`" not in result.stdout  # refused before start ran


# ---------------------------------------------------------------- test_times

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="4" time="30.5">
<testcase classname="tests.test_a" name="test_one@plane-cluster" time="20.0">
<properties><property name="plane-start" value="cluster0 control plane 2 8.4"/></properties></testcase>
<testcase classname="tests.test_a" name="test_two@plane-cluster" time="1.5"/>
<testcase classname="tests.test_b" name="test_three[x]@tests/test_b.py" time="4.0"><failure message="no"/></testcase>
<testcase classname="tests.test_b.TestC" name="test_four@tests/test_b.py" time="0.5"/>
</testsuite></testsuites>
"""


def times(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "test_times.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_the_table_sums_each_module_with_its_planes(tmp_path):
    (tmp_path / "report.xml").write_text(REPORT)
    result = times(str(tmp_path / "report.xml"), "--top", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "4 tests (1 failure, 3 passed); tests' time 26 s, run's wall time 30 s"
    assert "| test_a.py | 2 | 21.5 | 82.7 % | 1 |" in lines
    assert "| test_b.py | 2 | 4.5 | 17.3 % |  |" in lines
    assert lines.index("| test_a.py | 2 | 21.5 | 82.7 % | 1 |") < lines.index("| test_b.py | 2 | 4.5 | 17.3 % |  |")
    assert "| cluster0 control plane 2 | test_a.py | 8.4 |" in lines
    assert "| test_a.py::test_one | 20.0 |" in lines and "| test_b.py::test_three[x] | 4.0 |" in lines
    assert not any("test_two" in line for line in lines[lines.index("| slowest 2 tests (setup + call + teardown) "
                                                                  "| seconds |"):])


def test_a_report_it_cannot_read_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "broken.xml").write_text("<testsuites><testsuite>")
    (tmp_path / "empty.xml").write_text("<testsuites><testsuite time='1'/></testsuites>")
    for name in ("broken.xml", "empty.xml", "missing.xml"):
        result = times(str(tmp_path / name))
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith("test_times: error: ") and result.stderr.count("\n") == 1, result.stderr


# ---------------------------------------------------------------- cached_build

def cached_build(clone: Path, store: Path, *extra: str) -> subprocess.CompletedProcess:
    """A build in `clone` whose command counts its runs in clone/runs."""
    return subprocess.run([sys.executable, str(ROOT / "tools" / "cached_build.py"), "thing", "--out", "out/thing",
                           "--in", "src", "--store", str(store), *extra, "--",
                           "cat src/* > out/thing && echo run >> runs"],
                          cwd=clone, capture_output=True, text=True, timeout=60)


def clone_at(folder: Path, text: str) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "out").mkdir()
    (folder / "src" / "main.go").write_text(text)
    return folder


def runs(clone: Path) -> int:
    return len((clone / "runs").read_text().splitlines()) if (clone / "runs").exists() else 0


def test_only_changed_bytes_rebuild_never_a_timestamp(tmp_path):
    clone, store = clone_at(tmp_path / "one", "package main\n"), tmp_path / "store"
    assert cached_build(clone, store).returncode == 0 and runs(clone) == 1
    assert cached_build(clone, store).returncode == 0 and runs(clone) == 1
    later = (clone / "out" / "thing").stat().st_mtime + 100
    os.utime(clone / "src" / "main.go", (later, later))  # as a fresh checkout leaves it: newer, same bytes
    assert cached_build(clone, store).returncode == 0 and runs(clone) == 1
    (clone / "src" / "main.go").write_text("package main // changed\n")
    assert cached_build(clone, store).returncode == 0 and runs(clone) == 2
    assert (clone / "out" / "thing").read_text() == "package main // changed\n"
    assert cached_build(clone, store, "--key", "go1.99").returncode == 0 and runs(clone) == 3  # the key counts


def test_a_second_clone_copies_what_the_first_built_from_the_same_inputs(tmp_path):
    store = tmp_path / "store"
    first, second = clone_at(tmp_path / "first", "package main\n"), clone_at(tmp_path / "second", "package main\n")
    other = clone_at(tmp_path / "other", "package other\n")
    assert cached_build(first, store).returncode == 0 and runs(first) == 1
    copied = cached_build(second, store)
    assert copied.returncode == 0 and runs(second) == 0 and "built before; copied from" in copied.stderr
    assert (second / "out" / "thing").read_text() == "package main\n"
    assert cached_build(other, store).returncode == 0 and runs(other) == 1  # other inputs: built
    assert (other / "out" / "thing").read_text() == "package other\n"


def test_a_failed_build_records_nothing_and_bad_input_is_one_line(tmp_path):
    clone = clone_at(tmp_path / "one", "x\n")
    failed = subprocess.run([sys.executable, str(ROOT / "tools" / "cached_build.py"), "thing", "--out", "out/thing",
                             "--in", "src", "--", "exit 3"], cwd=clone, capture_output=True, text=True)
    assert failed.returncode == 3 and not (clone / "out" / ".thing.digest").exists()
    for argv in (["thing", "--out", "out/thing", "--in", "nowhere", "--", "true"],
                 ["thing", "--out", "out/thing", "--in", "src"]):
        result = subprocess.run([sys.executable, str(ROOT / "tools" / "cached_build.py"), *argv], cwd=clone,
                                capture_output=True, text=True)
        assert result.returncode == 2 and result.stderr.startswith("cached_build: error: "), result.stderr
        assert result.stderr.count("\n") == 1
