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


class _Redefining(yaml.SafeLoader):
    """YAML's rule PyYAML's composers do not keep: an anchor defined again
    names the new node (the suite's 3GZX; Helm's reader keeps it)."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if not isinstance(event, yaml.events.AliasEvent) and getattr(event, "anchor", None):
            self.anchors.pop(event.anchor, None)
        return super().compose_node(parent, index)


def libyaml_documents(data: bytes) -> list:
    try:
        return list(yaml.load_all(data, Loader=Loader))
    except yaml.composer.ComposerError as err:
        if "duplicate anchor" not in f"{err.context} {err.problem}":
            raise
        return list(yaml.load_all(data, Loader=_Redefining))


def test_3gzx_an_anchor_defined_twice_is_read_as_the_suite_says():
    """Issue 19 item 5: accepted, byte for byte, and read as the suite's
    3GZX/in.json says (yaml/yaml-test-suite, data branch; not stored here)."""
    data = (SUITE / "3GZX" / "in.yaml").read_bytes()
    assert refused(data) is None and post_render(data).output == data
    assert libyaml_documents(data) == [{"First occurrence": "Foo", "Second occurrence": "Foo",
                                        "Override anchor": "Bar", "Reuse anchor": "Bar"}]


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
    (original,) = libyaml_documents(text.encode()) or [None]  # the post-renderer accepted it: libyaml must too
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


def _base64_values_secret(text: bytes) -> bytes:
    import base64

    return (b"---\n# Source: tenant/templates/values.yaml\napiVersion: v1\nkind: Secret\n"
            b"metadata: {name: cozystack-values, namespace: tenant-suite}\n"
            b"data:\n  values.yaml: " + base64.b64encode(text) + b"\n")


@pytest.mark.parametrize("case", ["L24T/00", "L24T/01"])
def test_l24t_a_values_yaml_ending_in_a_line_of_spaces_is_edited(case):
    """Issue 19 item 5: L24T/01 (the last line, spaces, has no line break) was
    refused by the verifier: ending that line changes the block scalar as
    libyaml reads it. The entry is added first instead; the rest is as written."""
    import base64

    text = (SUITE / case / "in.yaml").read_bytes()
    out = post_render(TENANT + _base64_values_secret(text)).output
    (written,) = [doc for doc in libyaml_documents(out[len(TENANT_OUT):]) if doc is not None]
    new_text = base64.b64decode(written["data"]["values.yaml"])
    assert text in new_text  # every byte of the original, in order
    expected = {**yaml.load(text, Loader=Loader), "_namespace": {"vgpu": True}}
    assert yaml.load(new_text, Loader=Loader) == expected
