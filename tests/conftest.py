"""Shared fixtures: the repository layout and the pinned binaries.

The binaries come from `make binaries` (tools/fetch_binaries.py). A missing
binary is an error, never a skip: CI must run every test.
"""

from __future__ import annotations

import os
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
