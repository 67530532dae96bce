"""Edge cases found by an adversarial review of the post-renderer; each was
wrong once (invalid output, an internal error, or a rule bypassed)."""

from __future__ import annotations

import base64

import pytest
import yaml

from cozyrender.postrender import PostRenderError, post_render

INPUTS = '  annotations:\n    render.cozystack.io/vgpu-requested: "true"\n    render.cozystack.io/vgpu-parent: "true"\n'


def namespace(labels: str) -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: t\n{labels}{INPUTS}"


def rendered(text: str) -> tuple[str, list[dict]]:
    out = post_render(text.encode()).output
    assert post_render(out).output == out, "idempotent"
    return out.decode(), [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize(
    "labels",
    [
        "  labels:\n    namespace.cozystack.io/vgpu: |\n      false\n    other: x\n",
        "  labels:\n    namespace.cozystack.io/vgpu: >-\n      false\n    other: x\n",
        "  labels:\n    namespace.cozystack.io/vgpu:\n    other: x\n",
        "  labels:\n    other: x\n    namespace.cozystack.io/vgpu: |\n      false\n",
    ],
)
def test_label_value_in_any_scalar_style_is_replaced(labels):
    _, (ns,) = rendered(namespace(labels))
    assert ns["metadata"]["labels"] == {"namespace.cozystack.io/vgpu": "true", "other": "x"}


def test_empty_labels_value_gets_the_label():
    _, (ns,) = rendered("kind: Namespace\nmetadata:\n  name: t\n  labels:\n" + INPUTS)
    assert ns["metadata"] == {"name": "t", "labels": {"namespace.cozystack.io/vgpu": "true"}}


def test_label_value_that_is_a_mapping_is_an_error_not_a_crash():
    with pytest.raises(PostRenderError, match="document 1: .*not a scalar"):
        post_render(namespace("  labels:\n    namespace.cozystack.io/vgpu: {a: b}\n").encode())


def secret_values(docs: list[dict]) -> dict:
    secret = next(d for d in docs if d["kind"] == "Secret")
    if "data" in secret:
        return yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))
    return yaml.safe_load(secret["stringData"]["values.yaml"])


@pytest.mark.parametrize(
    "values",
    [
        "_namespace:\n  vgpu: |\n    x\n  other: 1\n",
        "_namespace:\n_cluster:\n  x: 1\n",
        "_namespace:\n  vgpu:\n",
        "_namespace: {}\n",
        "_namespace: {other: 1}\n",
    ],
)
def test_entitled_values_in_any_shape(values):
    body = "\n".join("    " + line for line in values.splitlines())
    stream = namespace("") + f"---\nkind: Secret\nmetadata: {{name: cozystack-values, namespace: t}}\nstringData:\n  values.yaml: |\n{body}\n"
    _, docs = rendered(stream)
    assert secret_values(docs)["_namespace"]["vgpu"] is True


@pytest.mark.parametrize(("style", "lines"), [("|-", 2), ("|", 2), (">-", 1)])  # folding would join with a space
def test_base64_data_in_a_block_scalar(style, lines):
    encoded = base64.b64encode(b"_namespace:\n  host: a\n").decode()
    body = f"    {encoded[:12]}\n    {encoded[12:]}\n" if lines == 2 else f"    {encoded}\n"
    stream = namespace("") + (
        f"---\nkind: Secret\nmetadata: {{name: cozystack-values, namespace: t}}\ndata:\n"
        f"  values.yaml: {style}\n{body}  other: eA==\n"
    )
    _, docs = rendered(stream)
    assert secret_values(docs) == {"_namespace": {"host": "a", "vgpu": True}}
    assert next(d for d in docs if d["kind"] == "Secret")["data"]["other"] == "eA=="


def test_duplicate_keys_in_values_are_an_error():
    stream = namespace("") + (
        "---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\nstringData:\n"
        "  values.yaml: |\n    _namespace:\n      vgpu: true\n    _namespace:\n      other: 1\n"
    )
    with pytest.raises(PostRenderError, match="document 2: .*duplicate key '_namespace'"):
        post_render(stream.encode())


def test_aliases_in_a_document_no_rule_edits_pass_through():
    stream = b"kind: Deployment\nmetadata:\n  name: d\n  labels: &l\n    app: d\nspec:\n  selector:\n    matchLabels: *l\n"
    assert post_render(stream).output == stream
    merged = b"kind: ConfigMap\nmetadata: {name: c}\ndata: &base {a: '1'}\nextra: {<<: *base, b: '2'}\n"
    assert post_render(merged).output == merged


def test_recursive_alias_is_refused():
    with pytest.raises(PostRenderError, match="alias bomb"):
        post_render(b"kind: ConfigMap\nmetadata: {name: c}\ndata: &a [*a]\n")


def test_merge_keys_in_a_document_a_rule_edits_are_an_error():
    stream = "kind: ResourceQuota\nmetadata: &m {name: q}\nx: {<<: *m}\nspec:\n  hard:\n    cpu: 1\n    gpuclass.cozystack.io/devices: 1\n"
    with pytest.raises(PostRenderError, match="merge keys"):
        post_render(stream.encode())


@pytest.mark.parametrize(
    "kind",
    ['"ResourceQuot\\x61"', '"Resource\\u0051uota"', '"Resource\\\n  Quota"'],
)
def test_an_escaped_kind_does_not_bypass_the_rules(kind):
    stream = f"kind: {kind}\nmetadata: {{name: q, namespace: t}}\nspec:\n  hard:\n    cpu: 1\n    gpuclass.cozystack.io/devices: 4\n"
    _, (quota,) = rendered(stream)
    assert quota["spec"]["hard"] == {"cpu": 1}


def test_escaped_namespace_kind_still_gets_its_label():
    stream = namespace("  labels:\n    namespace.cozystack.io/vgpu: 'true'\n").replace("kind: Namespace", 'kind: "Namesp\\x61ce"')
    stream = stream.replace('vgpu-parent: "true"', 'vgpu-parent: "false"')
    _, (ns,) = rendered(stream)
    assert ns["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "false"


def test_crlf_documents_stay_crlf_and_lone_cr_is_refused():
    crlf = namespace("  labels:\n    a: b\n").replace("\n", "\r\n")
    out, (ns,) = rendered(crlf)
    assert ns["metadata"]["labels"] == {"a": "b", "namespace.cozystack.io/vgpu": "true"}
    assert "\n" not in out.replace("\r\n", "")
    with pytest.raises(PostRenderError, match="lone CR"):
        post_render(crlf.replace("\r\n", "\r").encode())


def test_error_messages_stay_on_one_line():
    stream = 'kind: Namespace\nmetadata:\n  name: "evil\\nsecond line"\n  annotations: {render.cozystack.io/vgpu-requested: "x", render.cozystack.io/vgpu-parent: "true"}\n'
    with pytest.raises(PostRenderError) as err:
        post_render(stream.encode())
    assert "\n" not in err.value.message and "evil\\nsecond line" in err.value.message


def test_explicit_keys_are_removed_whole():
    _, (quota,) = rendered("kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    cpu: \"1\"\n    ? gpuclass.cozystack.io/devices\n    : 2\n")
    assert quota["spec"]["hard"] == {"cpu": "1"}


def test_non_string_quota_keys_count_as_ordinary():
    _, (quota,) = rendered("kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    1: 2\n    gpuclass.cozystack.io/devices: 2\n")
    assert quota["spec"]["hard"] == {1: 2}


def test_a_directive_belongs_to_the_document_it_precedes():
    stream = b"kind: ConfigMap\nmetadata: {name: a}\n...\n%YAML 1.1\n---\nkind: ConfigMap\nmetadata: {name: b}\n"
    assert post_render(stream).output == stream


# -- second review round ---------------------------------------------------------


@pytest.mark.parametrize(
    "stream",
    [
        "kind: Namespace\nmetadata:\n  name: t\n  annotations: &a\n    render.cozystack.io/vgpu-requested: \"true\"\n"
        "    render.cozystack.io/vgpu-parent: \"false\"\nspec:\n  x: *a\n",
        "kind: ResourceQuota\nmetadata: {name: q, namespace: t}\nspec:\n  hard:\n    gpuclass.cozystack.io/devices: &n \"4\"\n"
        "    requests.nvidia.com/gpu: *n\n",
        "kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard: &h {cpu: 1, gpuclass.cozystack.io/devices: 1}\nstatus: {hard: *h}\n",
    ],
)
def test_an_edit_of_a_document_with_aliases_is_refused(stream):
    with pytest.raises(PostRenderError, match="aliases and merge keys are not supported"):
        post_render(stream.encode())


def test_an_edit_of_values_with_aliases_is_refused():
    stream = namespace("").replace('parent: "true"', 'parent: "false"') + (
        "---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\nstringData:\n"
        "  values.yaml: |\n    _cluster: &c {gpu-vgpu: false}\n    copy: *c\n"
    )
    with pytest.raises(PostRenderError, match="document 2: .*aliases and merge keys"):
        post_render(stream.encode())


@pytest.mark.parametrize(
    "labels",
    ["  labels: {namespace.cozystack.io/vgpu}\n", "  labels: {? namespace.cozystack.io/vgpu}\n",
     "  labels:\n    ? namespace.cozystack.io/vgpu\n    app: x\n"],
)
def test_a_label_key_without_a_value_gets_one(labels):
    _, (ns,) = rendered(namespace(labels))
    assert ns["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"


def test_a_values_key_without_a_value_gets_one():
    stream = namespace("") + (
        "---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\nstringData:\n"
        "  values.yaml: |\n    _namespace: {vgpu, host: a}\n"
    )
    _, docs = rendered(stream)
    assert secret_values(docs)["_namespace"] == {"vgpu": True, "host": "a"}


def test_comments_next_to_edited_keys_stay():
    stream = ("kind: Namespace\nmetadata:\n  name: t\n" + INPUTS + "  # the labels\n  labels:\n    a: b\n"
              "---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\nstringData:\n"
              "  values.yaml: |  # platform values\n    _cluster:\n      gpu-vgpu: false\n    # keep me\n    foo: 1\n")
    out, docs = rendered(stream)
    assert "  # the labels\n" in out and "    # keep me\n" in out and "values.yaml: |  # platform values\n" in out
    assert secret_values(docs) == {"_cluster": {}, "foo": 1, "_namespace": {"vgpu": True}}


def test_a_list_item_whose_content_starts_below_its_dash_is_removed_whole():
    stream = ("kind: List\nitems:\n-\n  apiVersion: v1\n  kind: ResourceQuota\n  metadata: {name: q, namespace: t}\n"
              "  spec:\n    hard: {gpuclass.cozystack.io/devices: 1}\n- kind: ConfigMap\n  metadata: {name: c}\n")
    out, (doc,) = rendered(stream)
    assert doc["items"] == [{"kind": "ConfigMap", "metadata": {"name": "c"}}]
