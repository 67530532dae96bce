"""The post-render rules, one by one, through `post_render`."""

from __future__ import annotations

import base64
import textwrap

import pytest
import yaml

from cozyrender.postrender import PostRenderError, post_render


def render(text: str) -> tuple[str, list[str]]:
    result = post_render(textwrap.dedent(text).encode())
    return result.output.decode(), result.warnings


def objects(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


NAMESPACE = """\
---
# Source: tenant/templates/namespace.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-foo
  labels:
    tenant.cozystack.io/tenant-root: ""
  annotations:
    render.cozystack.io/vgpu-requested: "{requested}"
    render.cozystack.io/vgpu-parent: "{parent}"
"""

QUOTA = """\
---
# Source: tenant/templates/quota.yaml
apiVersion: v1
kind: ResourceQuota
metadata:
  name: tenant-quota
  namespace: tenant-foo
spec:
  hard:
{keys}
"""

LIMITRANGE = """\
---
# Source: tenant/templates/limitrange.yaml
apiVersion: v1
kind: LimitRange
metadata:
  name: tenant-range-limits
  namespace: tenant-foo
spec:
  limits:
  - type: Container
    default:
      cpu: 250m
"""

SECRET = """\
---
# Source: tenant/templates/values.yaml
apiVersion: v1
kind: Secret
metadata:
  name: cozystack-values
  namespace: tenant-foo
stringData:
  values.yaml: |
{values}
"""


def quota(*pairs: str) -> str:
    return QUOTA.format(keys="\n".join(f"    {pair}" for pair in pairs))


def values(text: str) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n"), "    ")


# -- budget keys leave ResourceQuota ------------------------------------------


def test_budget_keys_leave_the_quota_and_ordinary_keys_stay_as_written():
    stream = quota(
        'requests.cpu: "2"   # two cores',
        "requests.a100.gpuclass.cozystack.io/devices: '2'",
        "limits.a100.gpuclass.cozystack.io/devices: '2'",
        "nvidia.com/gpu: 1",
        "requests.nvidia.com/gpu: 1",
        "evilgpuclass.cozystack.io/devices: 3",
        "gpuclass.cozystack.io.example.com/devices: 4",
        "gpuclass.cozystack.io/devices: 5",
    )
    out, warnings = render(stream)
    # One dot from a budget key (issue 27 item 3): kept as written, and named.
    assert len(warnings) == 1 and "'evilgpuclass.cozystack.io/devices' is not a GPU budget key" in warnings[0]
    assert "('evil.gpuclass.cozystack.io/devices'?)" in warnings[0]
    assert out == quota(
        'requests.cpu: "2"   # two cores',
        "nvidia.com/gpu: 1",
        "requests.nvidia.com/gpu: 1",
        "evilgpuclass.cozystack.io/devices: 3",
        "gpuclass.cozystack.io.example.com/devices: 4",
    )


def test_malformed_budget_key_is_removed_with_a_warning_naming_it():
    out, warnings = render(quota("cpu: 1", "x.y.gpuclass.cozystack.io/memory: 1", "A100.GPUClass.cozystack.io/devices: 1"))
    assert objects(out)[0]["spec"]["hard"] == {"cpu": 1}
    assert len(warnings) == 2
    assert "x.y.gpuclass.cozystack.io/memory" in warnings[0] and "document 1" in warnings[0]
    assert "A100.GPUClass.cozystack.io/devices" in warnings[1]


def test_gpu_only_tenant_gets_no_quota_and_no_limitrange():
    stream = NAMESPACE.format(requested="false", parent="false") + quota(
        "requests.gpuclass.cozystack.io/devices: 2", "limits.gpuclass.cozystack.io/devices: 2"
    ) + LIMITRANGE
    out, _ = render(stream)
    kinds = [obj["kind"] for obj in objects(out)]
    assert kinds == ["Namespace"]


def test_mixed_tenant_keeps_quota_and_limitrange():
    stream = quota("requests.cpu: 1", "requests.a100.gpuclass.cozystack.io/devices: 2") + LIMITRANGE
    out, _ = render(stream)
    assert [obj["kind"] for obj in objects(out)] == ["ResourceQuota", "LimitRange"]
    assert out.endswith(LIMITRANGE)


def test_limitrange_before_its_quota_and_other_namespaces_untouched():
    other = LIMITRANGE.replace("namespace: tenant-foo", "namespace: tenant-bar")
    stream = LIMITRANGE + other + quota("gpuclass.cozystack.io/devices: 1")
    out, _ = render(stream)
    assert out == other


def test_quota_with_nothing_declared_is_not_dropped():
    stream = QUOTA.replace("  hard:\n{keys}\n", "  hard: {{}}\n").format() + LIMITRANGE
    out, _ = render(stream)
    assert out == textwrap.dedent(stream)


def test_flow_style_quota_from_json():
    stream = (
        '{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "n"}, '
        '"spec": {"hard": {"a100.gpuclass.cozystack.io/devices": "1", "cpu": "1", '
        '"requests.gpuclass.cozystack.io/devices": "2"}}}\n'
    )
    out, _ = render(stream)
    assert objects(out)[0]["spec"]["hard"] == {"cpu": "1"}
    assert out.startswith('{"apiVersion": "v1"')


# -- the vGPU entitlement -------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "parent", "label"),
    [("true", "true", "true"), ("true", "false", "false"), ("false", "true", "false"), ("false", "false", "false")],
)
def test_namespace_label_from_both_inputs(requested, parent, label):
    out, _ = render(NAMESPACE.format(requested=requested, parent=parent))
    (namespace,) = objects(out)
    assert namespace["metadata"]["labels"] == {
        "tenant.cozystack.io/tenant-root": "",
        "namespace.cozystack.io/vgpu": label,
    }
    assert "annotations" not in namespace["metadata"]
    assert "render.cozystack.io" not in out


def test_label_replaces_whatever_was_there_and_other_annotations_stay():
    stream = """\
    apiVersion: v1
    kind: Namespace
    metadata:
      name: tenant-foo
      labels: {namespace.cozystack.io/vgpu: "true", keep: me}
      annotations:
        render.cozystack.io/vgpu-requested: "true"
        postrenderer.helm.sh/postrender-filename: tenant/templates/namespace.yaml
        render.cozystack.io/vgpu-parent: "false"
    """
    out, _ = render(stream)
    metadata = objects(out)[0]["metadata"]
    assert metadata["labels"] == {"namespace.cozystack.io/vgpu": "false", "keep": "me"}
    assert metadata["annotations"] == {"postrenderer.helm.sh/postrender-filename": "tenant/templates/namespace.yaml"}


def test_namespace_without_labels_gets_them():
    stream = """\
    kind: Namespace
    metadata:
      annotations:
        render.cozystack.io/vgpu-requested: "true"
        render.cozystack.io/vgpu-parent: "true"
      name: tenant-foo
    """
    out, _ = render(stream)
    assert objects(out)[0]["metadata"] == {"labels": {"namespace.cozystack.io/vgpu": "true"}, "name": "tenant-foo"}


def test_namespace_without_inputs_is_left_alone():
    stream = "kind: Namespace\nmetadata:\n  name: other\n  labels:\n    namespace.cozystack.io/vgpu: 'true'\n"
    out, _ = render(stream)
    assert out == stream


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [
        ('render.cozystack.io/vgpu-requested: "true"', "vgpu-parent is missing"),
        ('render.cozystack.io/vgpu-parent: "true"', "vgpu-requested is missing"),
        ('render.cozystack.io/vgpu-requested: "yes"\n    render.cozystack.io/vgpu-parent: "true"', "'yes'"),
        ('render.cozystack.io/vgpu-requested: true\n    render.cozystack.io/vgpu-parent: "true"', "True"),
        ('render.cozystack.io/vgpu-requested: "true"\n    render.cozystack.io/vgpu-parent: "True"', "'True'"),
    ],
)
def test_bad_render_inputs_are_errors(annotations, problem):
    stream = f"---\n# Source: tenant/templates/ns.yaml\nkind: Namespace\nmetadata:\n  name: tenant-foo\n  annotations:\n    {annotations}\n"
    with pytest.raises(PostRenderError) as err:
        post_render(stream.encode())
    assert problem in err.value.message
    assert err.value.message.startswith("document 1 (tenant/templates/ns.yaml): Namespace tenant-foo")


# -- _namespace.vgpu and _cluster.gpu-vgpu ---------------------------------------


def secret_values(out: str) -> dict:
    secret = next(obj for obj in objects(out) if obj["kind"] == "Secret")
    if "stringData" in secret:
        return yaml.safe_load(secret["stringData"]["values.yaml"])
    return yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))


BASE_VALUES = """\
# platform values
_cluster:
  root-host: example.org
  gpu-vgpu: {cluster}
_namespace:
  host: foo.example.org   # the tenant's host
  etcd: tenant-root
"""


@pytest.mark.parametrize("cluster", ["true", '"true"'])
def test_entitled_tenant_gets_namespace_vgpu_and_keeps_cluster_flag(cluster):
    stream = NAMESPACE.format(requested="true", parent="true") + SECRET.format(values=values(BASE_VALUES.format(cluster=cluster)))
    out, _ = render(stream)
    got = secret_values(out)
    assert got["_namespace"] == {"host": "foo.example.org", "etcd": "tenant-root", "vgpu": True}
    assert got["_cluster"]["gpu-vgpu"] in (True, "true")
    # the rest of values.yaml as written: comments, spacing, quoting
    assert "    # platform values\n" in out and "host: foo.example.org   # the tenant's host" in out
    assert f"gpu-vgpu: {cluster}\n" in out


@pytest.mark.parametrize("cluster", ["false", '"false"', "null", "off-ish"])
def test_cluster_flag_removed_unless_on_and_stale_vgpu_removed(cluster):
    spoofed = BASE_VALUES.format(cluster=cluster) + "  vgpu: true\n"
    stream = NAMESPACE.format(requested="true", parent="false") + SECRET.format(values=values(spoofed))
    out, _ = render(stream)
    got = secret_values(out)
    assert "vgpu" not in got["_namespace"]
    assert got["_cluster"] == {"root-host": "example.org"}


def test_cluster_left_empty_becomes_an_empty_mapping():
    text = "_cluster:\n  gpu-vgpu: false\n_namespace:\n  host: a\n"
    stream = NAMESPACE.format(requested="false", parent="false") + SECRET.format(values=values(text))
    got = secret_values(render(stream)[0])
    assert got == {"_cluster": {}, "_namespace": {"host": "a"}}


@pytest.mark.parametrize("empty", ['""', "[]", "0", "false", "null"])
def test_empty_cluster_of_any_type_passes_as_written(empty):
    # Cozystack's tenant chart copies any empty _cluster verbatim (an empty
    # value reads as none), so the Secret can hold `_cluster: ""`.
    text = f"_cluster: {empty}\n_namespace:\n  host: a\n"
    stream = NAMESPACE.format(requested="true", parent="true") + SECRET.format(values=values(text))
    got = secret_values(render(stream)[0])
    assert got == {"_cluster": yaml.safe_load(empty), "_namespace": {"host": "a", "vgpu": True}}


@pytest.mark.parametrize("section, value", [("_cluster", "x"), ("_cluster", "[1]"),
                                            ("_namespace", '""'), ("_namespace", "[]")])
def test_non_mapping_sections_are_refused(section, value):
    other = "_namespace" if section == "_cluster" else "_cluster"
    text = f"{section}: {value}\n{other}: {{}}\n"
    stream = NAMESPACE.format(requested="true", parent="true") + SECRET.format(values=values(text))
    with pytest.raises(PostRenderError, match=f"{section} is not a mapping"):
        render(stream)


def test_values_without_namespace_section_get_one():
    stream = NAMESPACE.format(requested="true", parent="true") + SECRET.format(values=values("_cluster:\n  a: b\n"))
    assert secret_values(render(stream)[0]) == {"_cluster": {"a": "b"}, "_namespace": {"vgpu": True}}


def test_base64_data_is_edited_too():
    text = "_cluster:\n  gpu-vgpu: 'no'\n_namespace:\n  host: a\n"
    encoded = base64.b64encode(text.encode()).decode()
    stream = NAMESPACE.format(requested="true", parent="true") + (
        f"---\nkind: Secret\nmetadata:\n  name: cozystack-values\n  namespace: tenant-foo\ndata:\n  values.yaml: {encoded}\n"
    )
    assert secret_values(render(stream)[0]) == {"_cluster": {}, "_namespace": {"host": "a", "vgpu": True}}


def test_quoted_values_string_as_helm4_restyles_it():
    inner = "_cluster:\n  gpu-vgpu: false\n_namespace:\n  host: a\n"
    stream = NAMESPACE.format(requested="true", parent="true") + (
        "---\nkind: Secret\nmetadata:\n  name: cozystack-values\n  namespace: tenant-foo\nstringData:\n"
        f"  values.yaml: {yaml.safe_dump(inner, default_style=chr(39)).strip()}\n"
    )
    out, _ = render(stream)
    assert secret_values(out) == {"_cluster": {}, "_namespace": {"host": "a", "vgpu": True}}


def test_secret_outside_a_tenant_namespace_is_left_alone():
    stream = SECRET.format(values=values(BASE_VALUES.format(cluster="false") + "  vgpu: true\n"))
    out, _ = render(stream)
    assert out == textwrap.dedent(stream)


def test_values_that_do_not_parse_are_an_error():
    stream = NAMESPACE.format(requested="true", parent="true") + SECRET.format(values=values("_namespace: [\n"))
    with pytest.raises(PostRenderError, match=r"document 2 \(tenant/templates/values.yaml\): .*does not parse"):
        post_render(stream.encode())


# -- kind: List, passthrough, idempotence ---------------------------------------


def test_list_items_follow_the_rules():
    stream = """\
    apiVersion: v1
    kind: List
    items:
    - apiVersion: v1
      kind: ResourceQuota
      metadata: {name: q, namespace: tenant-foo}
      spec:
        hard:
          gpuclass.cozystack.io/devices: "1"
    - apiVersion: v1
      kind: LimitRange
      metadata: {name: l, namespace: tenant-foo}
    - apiVersion: v1
      kind: ConfigMap
      metadata: {name: c, namespace: tenant-foo}
    """
    out, _ = render(stream)
    (doc,) = objects(out)
    assert [item["kind"] for item in doc["items"]] == ["ConfigMap"]
    out_again, _ = render(out)
    assert out_again == out


def test_untouched_documents_come_out_byte_for_byte():
    stream = (
        "# leading comment\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    ---\n    not a separator\n"
        "---   # a comment on the separator\n"
        "# only a comment\n"
        "---\n"
        "---\n# Source: chart/templates/b.json\n"
        '{"kind": "ConfigMap", "metadata": {"name": "b"}}\n'
        "...\n"
        "--- {kind: ServiceAccount, metadata: {name: c}}\n"
    )
    assert post_render(stream.encode()).output == stream.encode()


def test_core_tags_are_fine():
    stream = b"kind: ConfigMap\ndata: !!str 1\nmeta: !!map {a: !!seq [1]}\n"  # !!binary: tests/test_postrender_review.py
    assert post_render(stream).output == stream


def test_empty_input_gives_empty_output():
    assert post_render(b"").output == b""


def test_edited_document_keeps_everything_but_the_edited_keys():
    stream = NAMESPACE.format(requested="true", parent="true").replace(
        "  name: tenant-foo\n", "  name: 'tenant-foo'  # quoted on purpose\n"
    )
    out, _ = render(stream)
    assert out == (
        "---\n# Source: tenant/templates/namespace.yaml\napiVersion: v1\nkind: Namespace\nmetadata:\n"
        "  name: 'tenant-foo'  # quoted on purpose\n  labels:\n    tenant.cozystack.io/tenant-root: \"\"\n"
        '    namespace.cozystack.io/vgpu: "true"\n'
    )
