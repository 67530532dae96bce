"""The official YAML test suite's inputs through the post-renderer.

Data: tests/data/yaml-test-suite/ (yaml/yaml-test-suite, `data` branch, MIT;
see the README there). Each input is run three ways:

- bare, as a whole stream;
- wrapped in a Helm-style stream, after a tenant's documents the rules edit
  (`---\\n# Source: ...\\n` before it);
- as the `values.yaml` of an entitled tenant's values Secret.

Each run either passes the input through byte for byte (and then libyaml
reads the same stream without complaint), edits exactly what the rules say,
or is refused with one clear line. Nothing else: no other exception, no
output that differs from the contract.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cozyrender.postrender import PostRenderError, post_render
from cozyrender.postrender.yamledit import quote

SUITE = Path(__file__).parent / "data" / "yaml-test-suite"
CASES = sorted(SUITE.glob("**/in.yaml"))
IDS = [str(path.parent.relative_to(SUITE)) for path in CASES]
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

TENANT = b"""\
---
# Source: tenant/templates/namespace.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-suite
  annotations:
    render.cozystack.io/vgpu-requested: "true"
    render.cozystack.io/vgpu-parent: "true"
---
# Source: tenant/templates/quota.yaml
apiVersion: v1
kind: ResourceQuota
metadata: {name: tenant-quota, namespace: tenant-suite}
spec:
  hard: {requests.cpu: "1", gpuclass.cozystack.io/devices: "2"}
"""
TENANT_OUT = TENANT.replace(
    b'  annotations:\n    render.cozystack.io/vgpu-requested: "true"\n    render.cozystack.io/vgpu-parent: "true"\n',
    b'  labels:\n    namespace.cozystack.io/vgpu: "true"\n',
).replace(b', gpuclass.cozystack.io/devices: "2"', b"")


def test_the_suite_is_there():
    assert len(CASES) > 300 and (SUITE / "LICENSE").is_file()


def refused(data: bytes) -> str | None:
    """The one-line error, or None when the post-renderer wrote output."""
    try:
        post_render(data)
    except PostRenderError as err:
        assert err.message and "\n" not in err.message and "\r" not in err.message
        return err.message
    return None


def libyaml_documents(data: bytes) -> list:
    return list(yaml.load_all(data, Loader=Loader))


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_bare(path):
    data = path.read_bytes()
    if refused(data) is None:
        out = post_render(data).output
        assert out == data, "an input no rule reads comes out byte for byte"
        documents = [doc for doc in libyaml_documents(data) if doc is not None]
        assert all(isinstance(doc, dict) for doc in documents)


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_in_a_helm_stream(path):
    case = path.read_bytes()
    data = TENANT + b"---\n# Source: chart/templates/case.yaml\n" + case
    if refused(data) is None:
        out = post_render(data).output
        assert out == TENANT_OUT + data[len(TENANT):], "the tenant edited exactly, the case byte for byte"
        libyaml_documents(data)


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_as_tenant_values(path):
    text = path.read_bytes().decode("utf-8")  # every case is (test_every_case_is_utf8)
    secret = (b"---\n# Source: tenant/templates/values.yaml\napiVersion: v1\nkind: Secret\n"
              b"metadata: {name: cozystack-values, namespace: tenant-suite}\n"
              b"stringData:\n  values.yaml: " + quote(text).encode() + b"\n")
    data = TENANT + secret
    if refused(data) is not None:
        return
    out = post_render(data).output
    assert out.startswith(TENANT_OUT)
    (written,) = [doc for doc in libyaml_documents(out[len(TENANT_OUT):]) if doc is not None]
    new_text = written["stringData"]["values.yaml"]
    original = yaml.load(text, Loader=Loader)  # the post-renderer accepted it: libyaml must too
    assert original is None or isinstance(original, dict)
    expected = dict(original or {})
    namespace = dict(expected.get("_namespace") or {})
    namespace["vgpu"] = True
    expected["_namespace"] = namespace
    cluster = expected.get("_cluster")
    if isinstance(cluster, dict) and "gpu-vgpu" in cluster and cluster["gpu-vgpu"] not in (True, "true"):
        expected["_cluster"] = {k: v for k, v in cluster.items() if k != "gpu-vgpu"}
    assert yaml.load(new_text, Loader=Loader) == expected


def test_every_case_is_utf8():
    for path in CASES:
        path.read_bytes().decode("utf-8")
