"""YAML shapes that once made the post-renderer write wrong output with exit 0
or refuse a valid stream (issue 13), one regression test each; the
verification step every edit passes; and the cost of removing many keys."""

from __future__ import annotations

import base64
import sys

from pathlib import Path

import pytest
import yaml

from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.keys import quota_key_problem
from cozyrender.postrender import PostRenderError, post_render
from cozyrender.postrender import yamledit
from cozyrender.postrender.rules import _WELL_FORMED, decide_quota
from cozyrender.postrender.errors import EditError
from cozyrender.postrender.verify import Intent, check_edit, model

INPUTS = '  annotations:\n    render.cozystack.io/vgpu-requested: "true"\n    render.cozystack.io/vgpu-parent: "true"\n'
LABEL = "namespace.cozystack.io/vgpu"


def namespace(labels: str = "", name: str = "t") -> str:
    return f"kind: Namespace\nmetadata:\n  name: {name}\n{labels}{INPUTS}"


def secret(values: str, name: str = "t") -> str:
    return (f"---\nkind: Secret\nmetadata: {{name: cozystack-values, namespace: {name}}}\n"
            f"stringData:\n  values.yaml: {yamledit.quote(values)}\n")


def run(data: str | bytes) -> bytes:
    data = data.encode() if isinstance(data, str) else data
    out = post_render(data).output
    assert post_render(out).output == out, "idempotent"
    return out


def docs(out: bytes) -> list[dict]:
    return [d for d in yaml.safe_load_all(out) if d is not None]


def values_of(out: bytes) -> dict:
    return yaml.safe_load(next(d for d in docs(out) if d["kind"] == "Secret")["stringData"]["values.yaml"])


# -- 1. a byte order mark, in every document position --------------------------

BOM = b"\xef\xbb\xbf"


def test_bom_at_the_stream_start_keeps_edits_in_place():
    data = BOM + b"kind: ResourceQuota\nspec: {hard: {cpu: 1, gpuclass.cozystack.io/devices: 2}}\n"
    assert run(data) == BOM + b"kind: ResourceQuota\nspec: {hard: {cpu: 1}}\n"


def test_bom_before_a_namespace_label_edit():
    out = run(BOM + namespace("  labels:\n    a: b\n").encode())
    assert out.startswith(BOM + b"kind: Namespace\n")
    assert docs(out)[0]["metadata"] == {"name": "t", "labels": {"a": "b", LABEL: "true"}}


def test_bom_inside_a_document_at_column_zero():
    # libyaml skips a BOM at column 0 before a token, counting it in its marks
    data = b"kind: ResourceQuota\n" + BOM + b"# c\nspec:\n  hard:\n    cpu: 1\n    gpuclass.cozystack.io/devices: 2\n"
    assert run(data) == b"kind: ResourceQuota\n" + BOM + b"# c\nspec:\n  hard:\n    cpu: 1\n"
    data = b"---\n" + BOM + b"{kind: ResourceQuota, spec: {hard: {cpu: 1, gpuclass.cozystack.io/devices: 2}}}\n"
    assert run(data) == b"---\n" + BOM + b"{kind: ResourceQuota, spec: {hard: {cpu: 1}}}\n"
    with pytest.raises(PostRenderError):  # the BOM takes a column: `kind` and `spec` are not aligned (libyaml agrees)
        post_render(b"---\n" + BOM + b"kind: ResourceQuota\nspec: 1\n")


def test_bom_after_a_document_end_marker():
    data = (b"kind: ConfigMap\n...\n" + BOM + b"---\nkind: ResourceQuota\nspec: {hard: {cpu: 1, gpuclass.cozystack.io/devices: 2}}\n")
    with pytest.raises(PostRenderError):  # libyaml: the BOM takes a column, so this `---` is no marker
        post_render(data)
    data = b"kind: ConfigMap\n...\n" + BOM + b"# c\n---\nkind: ResourceQuota\nspec: {hard: {cpu: 1, gpuclass.cozystack.io/devices: 2}}\n"
    assert run(data) == data.replace(b", gpuclass.cozystack.io/devices: 2", b"")
    yaml.load_all(data, Loader=yaml.CSafeLoader)


def test_bom_in_values_yaml():
    out = run(namespace() + secret("\ufeff_cluster:\n  gpu-vgpu: false\nfoo: 1\n"))
    text = next(d for d in docs(out) if d["kind"] == "Secret")["stringData"]["values.yaml"]
    assert text == "\ufeff_cluster: {}\nfoo: 1\n_namespace:\n  vgpu: true\n"


def test_bom_in_base64_values():
    encoded = base64.b64encode("\ufeff_namespace:\n  host: a\n".encode()).decode()
    data = namespace() + f"---\nkind: Secret\nmetadata: {{name: cozystack-values, namespace: t}}\ndata:\n  values.yaml: {encoded}\n"
    secret_doc = docs(run(data))[1]
    assert base64.b64decode(secret_doc["data"]["values.yaml"]).decode() == "\ufeff_namespace:\n  host: a\n  vgpu: true\n"


# -- 2. an explicit `? key` as the last entry of a mapping that gets a new one -

def test_explicit_key_last_in_labels():
    out = run(namespace("  labels:\n    ? a\n    : b\n"))
    assert docs(out)[0]["metadata"]["labels"] == {"a": "b", LABEL: "true"}
    assert b'    ? a\n    : b\n    namespace.cozystack.io/vgpu: "true"\n' in out


def test_explicit_key_last_in_values():
    assert values_of(run(namespace() + secret("? a\n: b\n"))) == {"a": "b", "_namespace": {"vgpu": True}}


def test_explicit_key_without_a_value_last_in_labels():
    assert docs(run(namespace("  labels:\n    x: y\n    ? a\n")))[0]["metadata"]["labels"] == {"x": "y", "a": None, LABEL: "true"}


# -- 3. a tag or anchor before an empty flow mapping ---------------------------

@pytest.mark.parametrize("labels", ["!!map {}", "&l {}", "&l !!map {}", "!!map { }", "!!map {\n    }"])
def test_tag_or_anchor_before_empty_labels(labels):
    out = run(namespace(f"  labels: {labels}\n"))
    assert docs(out)[0]["metadata"]["labels"] == {LABEL: "true"}
    assert out.decode().count(labels.split(" ")[0]) == 1, "the property stays before the mapping"


@pytest.mark.parametrize("section", ["!!map {}", "&n {}"])
def test_tag_or_anchor_before_an_empty_namespace_section(section):
    assert values_of(run(namespace() + secret(f"_namespace: {section}\n"))) == {"_namespace": {"vgpu": True}}


def test_tag_before_a_flow_mapping_emptied_by_removal():
    out = run("kind: ResourceQuota\nspec: {hard: !!map {gpuclass.cozystack.io/devices: 2}, x: 1}\nmetadata: {name: q}\n"
              "---\nkind: ResourceQuota\nmetadata: {name: r}\nspec: {hard: {cpu: 1}}\n")
    assert [d["metadata"]["name"] for d in docs(out)] == ["r"]
    quota = "kind: Namespace\nmetadata:\n  name: t\n  annotations: !!map {render.cozystack.io/vgpu-requested: \"true\", render.cozystack.io/vgpu-parent: \"true\", x: y}\n"
    assert docs(run(quota))[0]["metadata"] == {"name": "t", "annotations": {"x": "y"}, "labels": {LABEL: "true"}}


# -- 4. trailing whitespace-only lines in a block scalar -------------------------

@pytest.mark.parametrize(
    ("values", "foo"),
    [
        ("foo: |\n  x\n   \n", "x\n \n"),
        ("foo: |\n  x\n   \n\n", "x\n \n"),
        ("foo: |-\n  x\n    \n  \n", "x\n  "),
        ("foo: >\n  x\n   \n", "x\n \n"),
        ("foo: |2\n    x\n   \n", "  x\n \n"),
        ("foo: |+\n  x\n\n", "x\n\n"),
        ("foo: |\n  x\n  \n", "x\n"),
        ("foo: |\n\n  \n  x\n", "\n\nx\n"),
    ],
)
def test_values_block_scalar_with_trailing_blank_lines(values, foo):
    expected = yaml.safe_load(values)
    assert expected["foo"] == foo
    assert values_of(run(namespace() + secret(values))) == {"foo": foo, "_namespace": {"vgpu": True}}


def test_quota_key_after_a_block_scalar_with_trailing_spaces():
    data = "kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    a: |\n      x\n       \n    gpuclass.cozystack.io/devices: 1\n"
    assert docs(run(data))[0]["spec"]["hard"] == {"a": "x\n \n"}


# -- 5. a comment between a List item's dash and its content ---------------------

@pytest.mark.parametrize("comment", ["# a-b", "# ---", "# - x", "", "#"])
def test_comment_between_dash_and_content_of_a_dropped_item(comment):
    data = ("kind: List\nitems:\n- kind: ResourceQuota\n  metadata: {name: q, namespace: n}\n"
            "  spec: {hard: {gpuclass.cozystack.io/devices: 1}}\n"
            f"-\n  {comment}\n  kind: LimitRange\n  metadata: {{name: l, namespace: n}}\n"
            "- # on the dash line\n  kind: ConfigMap\n  metadata: {name: c}\n")
    out = run(data)
    assert docs(out)[0]["items"] == [{"kind": "ConfigMap", "metadata": {"name": "c"}}]
    assert out.endswith(b"- # on the dash line\n  kind: ConfigMap\n  metadata: {name: c}\n")


# -- 6. stream-level shapes libyaml accepts ---------------------------------------

@pytest.mark.parametrize(
    "data",
    [
        b"kind: ConfigMap\r---\nkind: ConfigMap\n",
        b"kind: ConfigMap\r---\rkind: Secret\rmetadata: {name: s}\r",
        b"kind: ConfigMap\xc2\x85---\nkind: ConfigMap\n",
        b"%YAML 1.1\n\n---\nkind: ConfigMap\n",
        b"%YAML 1.1\n# why\n%TAG ! tag:example.com,2000:\n\n---\nkind: ConfigMap\n",
        b"kind: ConfigMap\n...\n%YAML 1.1\n# c\n---\nkind: ConfigMap\n",
        b"kind: ConfigMap\n...\n...\n",
        b"kind: ConfigMap\n...\n# c\n...\n",
        b"kind: ConfigMap\n... # end\n\n...\n---\nkind: Secret\nmetadata: {name: s}\n",
        b"kind: ConfigMap\n%YAML 1.1\n---\nkind: ConfigMap\n",
    ],
)
def test_stream_shapes_libyaml_accepts_pass_byte_for_byte(data):
    assert len([d for d in yaml.load_all(data, Loader=yaml.CSafeLoader) if d]) >= 1
    assert post_render(data).output == data


def test_stream_shapes_next_to_edited_documents():
    quota = b"kind: ResourceQuota\nmetadata: {name: q}\nspec: {hard: {cpu: 1, gpuclass.cozystack.io/devices: 2}}\n"
    data = b"kind: ConfigMap\r---\n" + quota + b"...\n# c\n...\n%YAML 1.1\n\n---\n" + quota
    out = post_render(data).output
    assert out == data.replace(b", gpuclass.cozystack.io/devices: 2", b"")
    assert len(list(yaml.load_all(out, Loader=yaml.CSafeLoader))) == 3


def test_a_document_after_an_end_marker_needs_a_start_marker_as_in_libyaml():
    data = b"kind: ConfigMap\n...\nkind: ConfigMap\n"
    with pytest.raises(yaml.YAMLError):
        list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    with pytest.raises(PostRenderError, match="after a '...' line must start with '---'"):
        post_render(data)


def test_a_drop_that_would_change_how_the_next_document_reads_is_refused():
    data = (b"kind: ConfigMap\n...\n---\nkind: ResourceQuota\nmetadata: {name: q, namespace: n}\n"
            b"spec: {hard: {gpuclass.cozystack.io/devices: 1}}\nkind2: x\n")
    post_render(data)  # the quota is dropped; nothing follows it
    data = (b"kind: ConfigMap\n...\n---\nkind: ResourceQuota\nmetadata: {name: q, namespace: n}\n"
            b"spec: {hard: {gpuclass.cozystack.io/devices: 1}}\n...\n---\nkind: LimitRange\nmetadata: {name: l, namespace: m}\n")
    assert docs(post_render(data).output) == [{"kind": "ConfigMap"}, {"kind": "LimitRange", "metadata": {"name": "l", "namespace": "m"}}]


def test_lone_cr_in_a_document_a_rule_edits_stays_a_clear_error():
    with pytest.raises(PostRenderError, match="lone CR"):
        post_render(namespace().replace("\n", "\r").encode())
    with pytest.raises(PostRenderError, match="NEL"):
        post_render(namespace("  labels: {a: \"x\u2028y\"}\n").encode())


# -- 7. one rule for every document ---------------------------------------------

@pytest.mark.parametrize("kind", ["ConfigMap", "Namespace", "ResourceQuota"])
@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("? [a, b]\n: c\n", "a mapping key that is a sequence is not supported"),
        ("? {a: b}\n: c\n", "a mapping key that is a mapping is not supported"),
        ("a: &s [1]\n*s : c\n", "a mapping key that is an alias of a collection"),
        ("a: 2001-13-45\n", "unsupported YAML"),
        ("a: !!binary x\n", "a !!binary node (line 3) is not supported"),
        ("a: !!int x\n", "unsupported YAML"),
        ("a: !!map [1]\n", "does not fit a sequence"),
        ("a: " + "1" * 5000 + "\n", "unsupported YAML"),
        ("a: {<<: 1}\n", "unsupported YAML"),
    ],
)
def test_every_document_is_held_to_the_same_rule(kind, body, problem):
    data = f"kind: {kind}\nmetadata: {{name: x}}\n{body}"
    with pytest.raises(PostRenderError) as err:
        post_render(data.encode())
    assert problem in err.value.message
    assert "\n" not in err.value.message


YAML_SUITE = Path(__file__).parent / "data" / "yaml-test-suite"


@pytest.mark.parametrize("kind", ["ConfigMap", "Namespace", "ResourceQuota"])
def test_an_anchor_defined_twice_is_yaml_and_passes_where_no_rule_edits(kind):
    """Issue 19 item 5: the YAML test suite's 3GZX (an anchor defined again
    names the new node) is valid YAML that Helm reads; it was refused."""
    suite = (YAML_SUITE / "3GZX" / "in.yaml").read_bytes()
    assert post_render(suite).output == suite
    data = f"kind: {kind}\nmetadata: {{name: x}}\ndata:\n".encode() + b"".join(
        b"  " + line + b"\n" for line in suite.splitlines())
    assert post_render(data).output == data
    # what the rules read follows the latest definition, as Helm's reader does
    from cozyrender.postrender.document import compose_text, construct

    assert construct(compose_text(suite.decode()))["Reuse anchor"] == "Bar"


def test_an_anchor_defined_twice_in_a_document_a_rule_edits_is_refused_when_aliased():
    data = (b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-a\n  annotations:\n"
            b"    render.cozystack.io/vgpu-requested: &t \"true\"\n    render.cozystack.io/vgpu-parent: &t \"true\"\n"
            b"    other: *t\n")
    with pytest.raises(PostRenderError, match="alias"):
        post_render(data)


def test_a_kind_named_only_in_a_comment_changes_nothing():
    data = b"# a Namespace, a ResourceQuota\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: '2001-01-01'}\n"
    assert post_render(data).output == data


# -- 8. removing many keys is linear -----------------------------------------------

def operations(n: int) -> int:
    """Python and C function calls post-rendering a quota of n budget keys
    and n ordinary ones: a deterministic measure of the work."""
    hard = "".join(f"    a{i}.gpuclass.cozystack.io/devices: 1\n    k{i}/x: 1\n" for i in range(n))
    data = ("kind: ResourceQuota\nmetadata: {name: q, namespace: t}\nspec:\n  hard:\n" + hard).encode()
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += 1

    sys.setprofile(profile)
    try:
        out = post_render(data).output
    finally:
        sys.setprofile(None)
    assert b"gpuclass" not in out and out.count(b"/x: 1") == n
    return count


def test_removing_n_keys_takes_work_linear_in_n():
    small, large = operations(500), operations(4000)
    assert large < 8 * small * 1.15, (small, large)  # quadratic work would be 64 times


# -- the verification step -----------------------------------------------------------

def test_an_edit_that_would_not_read_back_is_refused(monkeypatch):
    def misplaced(self, mapping, key, value):  # a broken editor: the entry one column off
        last_key, last_value = mapping.value[-1]
        self.insert_lines(self.content_end(last_value), yamledit._block_entry(key, value, self.entry_column(last_key) + 1))

    monkeypatch.setattr(yamledit.Editor, "add_entry", misplaced)
    with pytest.raises(PostRenderError, match="document 1: the edited text does not (parse|read back)"):
        post_render(namespace("  labels:\n    a: b\n").encode())


def test_an_edit_that_changes_another_value_is_refused(monkeypatch):
    original = yamledit.Editor.result

    def tampered(self):
        return original(self).replace("name: t", "name: u")

    monkeypatch.setattr(yamledit.Editor, "result", tampered)
    with pytest.raises(PostRenderError, match=r"does not read back as intended \(at metadata.name\)"):
        post_render(namespace().encode())


def compose(text: str):
    return yaml.compose(text, Loader=yaml.CSafeLoader)


def test_models_tell_types_apart_and_ignore_style_and_order():
    assert model(compose("a: 1")) != model(compose("a: '1'"))
    assert model(compose("a: true")) != model(compose("a: 'true'"))
    assert model(compose("{a: 1, b: [x]}")) == model(compose("b:\n- x\na: 1\n"))
    assert model(compose("a: &x 1\nb: *x\n")) == model(compose("a: 1\nb: 1\n"))
    assert model(compose("a: 1\na: 1\n")) != model(compose("a: 1\n"))


def test_check_edit_applies_exactly_the_intent():
    intent = Intent()
    intent.remove(("spec", "hard"), ["x"])
    intent.set(("metadata",), "labels", {"l": "true"})
    check_edit(compose("spec: {hard: {x: 1, y: 2}}\nmetadata: {}\n"), compose("spec: {hard: {y: 2}}\nmetadata: {labels: {l: 'true'}}\n"), intent)
    with pytest.raises(EditError, match="spec.hard.x is unexpected"):
        check_edit(compose("spec: {hard: {x: 1, y: 2}}\nmetadata: {}\n"), compose("spec: {hard: {x: 1, y: 2}}\nmetadata: {labels: {l: 'true'}}\n"), intent)
    with pytest.raises(EditError, match="metadata.labels.l"):
        check_edit(compose("spec: {hard: {x: 1, y: 2}}\nmetadata: {}\n"), compose("spec: {hard: {y: 2}}\nmetadata: {labels: {l: true}}\n"), intent)
    items = Intent()
    items.remove_items(("items",), [0, 2])
    check_edit(compose("items: [a, b, c, d]"), compose("items: [b, d]"), items)
    with pytest.raises(EditError, match="items: 3 items instead of 2"):
        check_edit(compose("items: [a, b, c, d]"), compose("items: [b, c, d]"), items)


@pytest.mark.parametrize(
    "key",
    ["gpuclass.cozystack.io/devices", "a100.gpuclass.cozystack.io/devices", "requests.a100.gpuclass.cozystack.io/devices",
     "limits.gpuclass.cozystack.io/devices", "requests.requests.gpuclass.cozystack.io/devices",
     "limits.requests.gpuclass.cozystack.io/devices", "requests.gpuclass.cozystack.io/devices",
     "REQUESTS.a.gpuclass.cozystack.io/devices", "a-.gpuclass.cozystack.io/devices", "-a.gpuclass.cozystack.io/devices",
     ("x" * 63) + ".gpuclass.cozystack.io/devices", ("x" * 64) + ".gpuclass.cozystack.io/devices",
     "a.b.gpuclass.cozystack.io/devices", "a.gpuclass.cozystack.io/memory", "A.gpuclass.cozystack.io/devices",
     "requests.limits.a.gpuclass.cozystack.io/devices", "requests.requestsx.gpuclass.cozystack.io/devices"],
)
def test_the_fast_well_formed_match_agrees_with_the_key_rules(key):
    assert dict(decide_quota([key, "cpu"]).malformed).get(key) == quota_key_problem(key)
    if _WELL_FORMED.match(key):
        assert quota_key_problem(key) is None


@settings(max_examples=400)
@given(st.from_regex(r"((requests|limits|REQUESTS)\.)*([a-z0-9A-Z.-]{0,70}\.)?gpuclass\.cozystack\.io/(devices|x)", fullmatch=True))
def test_the_fast_match_never_passes_a_malformed_key(key):
    assert dict(decide_quota([key, "cpu"]).malformed).get(key) == quota_key_problem(key)


@settings(max_examples=600)
@given(st.from_regex(r"[-+.]?[0-9][-+.0-9_a-fxobeE:TZ ]{0,14}", fullmatch=True))
def test_a_plain_scalar_the_constructor_refuses_is_always_flagged_for_a_tree(value):
    from cozyrender.postrender.syntax import _plain_may_fail

    text = f"a: {value}\n"
    try:
        node = yaml.compose(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return  # not a plain scalar there
    scalar = node.value[0][1]
    if not isinstance(scalar, yaml.ScalarNode) or scalar.style is not None:
        return
    try:
        yaml.SafeLoader(text).construct_document(node)
    except Exception:  # noqa: BLE001 - any refusal must be caught by the tree path
        assert _plain_may_fail(scalar.value), scalar.value


def test_values_of_comments_and_an_end_marker_are_refused_not_misread():
    # appending `_namespace` after a `...` line would start a document libyaml refuses
    with pytest.raises(PostRenderError, match="the edited text does not parse"):
        post_render((namespace() + secret("---\n# only a comment\n...\n")).encode())
