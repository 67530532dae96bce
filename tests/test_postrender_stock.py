"""Stock Cozystack output (issue 9, item 4): Cozystack's own charts render no
vGPU inputs. A tenant namespace they render is treated as not entitled
(labelled "false", `_namespace.vgpu` removed from its values Secret) with a
warning naming it; once labelled it passes unchanged.

The real inputs are Cozystack's renders at commit 3c780acd (tests/data/cozystack-3c780acd/).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cozyrender.keys import in_budget_domain
from cozyrender.postrender import post_render
from cozyrender.postrender.rules import is_stock_tenant_namespace

STOCK = sorted((Path(__file__).parent / "data" / "cozystack-3c780acd").glob("*.yaml"))
VGPU = "namespace.cozystack.io/vgpu"


def objects(data: bytes) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(data) if doc is not None]


def tenant_namespaces(docs: list[dict]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"].startswith("tenant-")]


@pytest.mark.parametrize("path", STOCK, ids=[p.stem for p in STOCK])
def test_stock_renders_label_every_tenant_namespace_false_with_a_warning(path):
    data = path.read_bytes()
    result = post_render(data)
    before, after = objects(data), objects(result.output)
    names = tenant_namespaces(before)
    assert names, "each reference render holds a tenant namespace"
    assert len(result.warnings) == len(names)
    for name, warning in zip(names, result.warnings):
        assert f"Namespace {name} is a Cozystack tenant namespace without the vGPU render inputs" in warning
        assert "does not render them" in warning
    expected = []
    for doc in before:
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] in names:
            doc["metadata"]["labels"][VGPU] = "false"
        if doc["kind"] == "ResourceQuota":
            doc["spec"]["hard"] = {k: v for k, v in doc["spec"]["hard"].items() if not in_budget_domain(k)}
        expected.append(doc)
    assert after == expected


@pytest.mark.parametrize("path", STOCK, ids=[p.stem for p in STOCK])
def test_stock_output_post_rendered_again_is_unchanged_and_silent(path):
    once = post_render(path.read_bytes()).output
    again = post_render(once)
    assert again.output == once
    assert again.warnings == []


def test_stock_output_keeps_the_rest_of_the_namespace_byte_for_byte():
    data = (Path(__file__).parent / "data" / "cozystack-3c780acd" / "tenant-plain.yaml").read_bytes()
    out = post_render(data).output
    assert out == data.replace(b'    alpha.kubevirt.io/auto-memory-limits-ratio: "1.0"\n',
                               b'    alpha.kubevirt.io/auto-memory-limits-ratio: "1.0"\n    namespace.cozystack.io/vgpu: "false"\n', 1)


STOCK_NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
  labels:
{labels}
---
apiVersion: v1
kind: Secret
metadata:
  name: cozystack-values
  namespace: {name}
stringData:
  values.yaml: |
    _cluster:
      root-host: demo.example
      gpu-vgpu: false
    _namespace:
      host: acme.demo.example
      vgpu: true
"""


def stock(name: str, labels: str) -> bytes:
    return STOCK_NAMESPACE.format(name=name, labels=labels).encode()


@pytest.mark.parametrize("label", ['    tenant.cozystack.io/tenant-root: ""', '    namespace.cozystack.io/host: "a.example"'])
@pytest.mark.parametrize("name", ["tenant-root", "tenant-acme"])
def test_a_stock_tenant_loses_a_spoofed_namespace_vgpu(name, label):
    result = post_render(stock(name, label))
    namespace, secret = objects(result.output)
    assert namespace["metadata"]["labels"][VGPU] == "false"
    assert yaml.safe_load(secret["stringData"]["values.yaml"]) == {
        "_cluster": {"root-host": "demo.example"}, "_namespace": {"host": "acme.demo.example"}}
    assert len(result.warnings) == 1 and f"Namespace {name} " in result.warnings[0]


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("tenant-acme", '    namespace.cozystack.io/vgpu: "true"\n    tenant.cozystack.io/tenant-root: ""'),  # post-rendered output
        ("cozy-public", '    namespace.cozystack.io/host: "a.example"'),  # not a tenant name
        ("tenant-acme", '    app: x'),  # neither the ancestor nor the host label
        ("tenantacme", '    tenant.cozystack.io/tenant-root: ""'),
    ],
)
def test_namespaces_that_are_not_stock_tenants_pass_unchanged(name, labels):
    data = stock(name, labels)
    result = post_render(data)
    assert result.output == data and result.warnings == []


@pytest.mark.parametrize(
    ("name", "labels", "annotations", "stock_tenant"),
    [
        ("tenant-root", {"namespace.cozystack.io/host": "x"}, None, True),
        ("tenant-a", {"tenant.cozystack.io/tenant-root": ""}, {}, True),
        ("tenant-a", {"tenant.cozystack.io/tenant-root": "", VGPU: "false"}, None, False),
        ("tenant-a", {"tenant.cozystack.io/tenant-root": ""}, {"render.cozystack.io/vgpu-requested": "true"}, False),
        ("tenant-a", {"tenant.cozystack.io/tenant-root": ""}, {"render.cozystack.io/vgpu-parent": "true"}, False),
        ("tenant-a", {"tenant.cozystack.io/tenant-a": ""}, None, False),
        ("root", {"namespace.cozystack.io/host": "x"}, None, False),
        ("tenant-", {"namespace.cozystack.io/host": "x"}, None, True),
        (None, {"namespace.cozystack.io/host": "x"}, None, False),
        ("tenant-a", None, None, False),
    ],
)
def test_is_stock_tenant_namespace(name, labels, annotations, stock_tenant):
    assert is_stock_tenant_namespace(name, labels, annotations) is stock_tenant
