"""Shared fixtures: the repository layout, the pinned binaries, the session's
control planes, and the markers that sort the suite by what a test starts.

The binaries come from `make binaries` (tools/fetch_binaries.py). A missing
binary is an error, never a skip: CI must run every test.

Markers are applied here, never by hand, from the source of the test and of
every fixture it uses (LIVE_STARTERS): a new live test is marked `live` by the
plane, container, browser or image it uses, so `make test-fast` (`-m "not
live"`) leaves it out without anyone remembering to mark it; one that starts the
node (`node=True`) is marked `node` too. A control plane started by a test not
marked `live` (a starter this table does not know) fails that test, naming the
table.

Under pytest-xdist (`make test`: `--dist loadgroup`) every test gets an
`xdist_group`: the node's tests share one (the machine has one node), so do the
modules sharing other machine-wide state (SHARED_STATE); the users of a session
plane (`apiserver`, `cluster`) one per plane, started once, not once per worker;
every other test its module's, whose module-scoped fixtures then run once. The
groups that wait on live planes run first, the node's before all. Each plane's
start time goes into the JUnit report as the property `plane-start`
(tools/test_times.py).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ROOT / "charts"
BIN = ROOT / ".cache" / "bin"


def _binary(env: str, name: str) -> Path:
    path = Path(os.environ.get(env) or BIN / name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: run `make binaries` (or `make test`)")
    return path


@pytest.fixture(scope="session")
def helm3() -> Path:
    return _binary("COZYRENDER_HELM3", "helm3")


@pytest.fixture(scope="session")
def helm4() -> Path:
    return _binary("COZYRENDER_HELM4", "helm4")


@pytest.fixture(scope="session")
def kubectl() -> Path:
    return _binary("COZYRENDER_KUBECTL", "kubectl")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def replaced(obj: dict, path: tuple, value) -> dict:
    """A deep copy of `obj` with the field at `path` set to `value` (for bad-input cases)."""
    import copy

    obj = copy.deepcopy(obj)
    cursor = obj
    for key in path[:-1]:
        cursor = cursor[key]
    cursor[path[-1]] = value
    return obj


def _control_plane(tmp_path_factory, replicas: int, **options):
    """A real etcd + kube-apiserver (tools/controlplane), stopped at the end of
    the session; `replicas` webhook replicas behind the balancer."""
    import sys

    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    from cluster import ControlPlane

    for binary in ("kube-apiserver", "etcd"):
        _binary("COZYRENDER_" + binary.upper().replace("-", "_"), binary)
    plane = ControlPlane(tmp_path_factory.mktemp("cluster"), BIN, webhook_replicas=replicas, **options)
    plane.start()
    return plane


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory):
    """The control plane without the webhook: for what the API server itself
    decides (CRD rules, objects the charts render, Helm releases). No tenant
    namespace exists: `cozystack-basics` creates tenant-root, as in Cozystack."""
    plane = _control_plane(tmp_path_factory, 0, namespaces=("cozy-system", "cozy-monitoring", "cozyrender-system"))
    yield plane
    plane.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """The control plane with two webhook replicas registered, as `make cluster` gives."""
    plane = _control_plane(tmp_path_factory, 2)
    yield plane
    plane.stop()


# --------------------------------------------------------------- markers and groups

# What makes a test live, read in the source of the test and of the fixtures it uses.
LIVE_STARTERS = {
    "a control plane (tools/controlplane)": re.compile(r"\b(ControlPlane|start_plane|_control_plane)\("),
    "a runc container": re.compile(r"\bContainer\("),
    "Chromium (Playwright)": re.compile(r"\bsync_playwright\("),
    "the image `make image` builds": re.compile(r"cozyrender-image\b"),
}
NODE_STARTER = re.compile(r"\bnode=True\b")
# Machine-wide state besides the node, one xdist group each: modules that use it never overlap.
SHARED_STATE = {
    # setuptools builds in the checkout itself (build/, cozyrender.egg-info): `make dist`, the image's wheel
    "checkout-build": re.compile(r'"make", "-s", "dist"|"build\.py"|"-m", "build"'),
}
SESSION_PLANES = ("apiserver", "cluster")  # the session fixtures below: one xdist group each
_SOURCES: dict = {}
_CURRENT: list = [None]  # the test being set up, run or torn down (whose fixture starts a plane)


def _source(func) -> str:
    if func not in _SOURCES:
        try:
            _SOURCES[func] = inspect.getsource(func)
        except (OSError, TypeError):
            _SOURCES[func] = ""
    return _SOURCES[func]


def _used_functions(item) -> list:
    functions = [getattr(item, "function", None)]
    for name in item.fixturenames:
        functions += [definition.func for definition in item._fixtureinfo.name2fixturedefs.get(name, ())]
    return [f for f in functions if f is not None]


def live_reasons(item) -> list[str]:
    """What `item` starts, by the starters' patterns (empty for a test that starts nothing)."""
    sources = [_source(f) for f in _used_functions(item)]
    return [what for what, pattern in LIVE_STARTERS.items() if any(pattern.search(s) for s in sources)]


@pytest.hookimpl(tryfirst=True)  # before xdist's loadgroup reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if live_reasons(item):
            item.add_marker(pytest.mark.live)
        if any(NODE_STARTER.search(_source(f)) for f in _used_functions(item)):
            item.add_marker(pytest.mark.node)
        if item.get_closest_marker("xdist_group"):
            continue
        shared = [name for name, pattern in SHARED_STATE.items()  # anywhere in the module: its helpers too
                  if pattern.search(_source(getattr(item, "module", None)))]
        planes = [name for name in SESSION_PLANES  # this file's fixture, not a parameter of that name
                  if any(inspect.getsourcefile(d.func) == __file__ for d in item._fixtureinfo.name2fixturedefs.get(name, ()))]
        group = ("node" if item.get_closest_marker("node") else shared[0] if shared
                 else "plane-" + "+".join(planes) if planes else item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(group))
    # The node's group, then the others that wait on live planes, first (xdist hands the groups out
    # in this order): the long ones start at once and the short ones fill the gaps after them.
    waiting = {item.get_closest_marker("xdist_group").args[0] for item in items if item.get_closest_marker("live")}
    items.sort(key=lambda item: (item.get_closest_marker("xdist_group").args[0] not in waiting,
                                 item.get_closest_marker("xdist_group").args[0] != "node"))


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown to a run without xdist
def pytest_xdist_node_collection_finished(node, ids):
    """A run whose groups xdist lost (pytest-xdist issue 1386: pytest 9.2 with xdist 3.8) is refused,
    said on the controller: two node tests on two workers would each claim the machine's one node.
    Every test has a group here, and loadgroup sends it as the ID's `@group` suffix."""
    if node.config.getoption("dist", None) == "loadgroup" and ids and not any("@" in i for i in ids):
        raise pytest.UsageError(f"pytest-xdist's --dist loadgroup lost the tests' groups ({ids[0]} has none): "
                                "see the pytest pin in pyproject.toml")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _CURRENT[0] = item
    try:
        return (yield)
    finally:
        _CURRENT[0] = None


def pytest_configure(config):
    """Every ControlPlane.start: refused for a test not marked live, timed into the report."""
    sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
    import cluster

    start = cluster.ControlPlane.start
    if getattr(start, "timed_by_conftest", False):
        return

    def timed_start(plane):
        item = _CURRENT[0]
        if item is not None and not item.get_closest_marker("live"):
            raise RuntimeError(f"{item.nodeid} starts a control plane but is not marked live: teach "
                               "tests/conftest.py LIVE_STARTERS how it starts it")
        if item is not None and plane.with_node and not item.get_closest_marker("node"):
            raise RuntimeError(f"{item.nodeid} starts the node but is not marked node (NODE_STARTER)")
        began = time.monotonic()
        try:
            return start(plane)
        finally:
            if item is not None:
                kind = "+".join(["node"] * plane.with_node + ["flux"] * plane.flux) or "control plane"
                item.user_properties.append(("plane-start", f"{plane.dir.name} {kind} "
                                             f"{plane.webhook_replicas} {time.monotonic() - began:.2f}"))

    timed_start.timed_by_conftest = True
    cluster.ControlPlane.start = timed_start
