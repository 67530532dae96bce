"""The render's own reading of its documents stands in for reading its text
again (issue 26 item 4: Flux injection reads the rendered release once).

`Rendered.documents()` must be exactly what SafeLoader's `load_all` reads
from `Rendered.text()`: the same values of the same types, document for
document; or None where it cannot stand in (a byte order mark in a document).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import flux
from cozyrender.flux.objects import load_documents
from cozyrender.render.manifests import sort_manifests
from cozyrender.render.values import merge_values
from cozyrender.yamlio import SafeLoader, dump_readable

ROOT = Path(__file__).resolve().parent.parent
PARENT = yaml.safe_load((ROOT / "examples" / "flux" / "parent-values.yaml").read_text())


def same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down (`1`, `1.0` and `True` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def read_again(text: str) -> list:
    return list(yaml.load_all(text, Loader=SafeLoader))


@pytest.mark.parametrize("values", [
    {},
    {"gpu": {"vgpu": True}, "resourceQuotas": {"gpuclass.cozystack.io/devices": 4,
                                               "a100.gpuclass.cozystack.io/devices": 2}},
    {"gpu": {"vgpu": True}, "resourceQuotas": {"cpu": "8", "memory": "32Gi",
                                               "a100.gpuclass.cozystack.io/devices": 2}},
    {"etcd": True, "monitoring": True, "ingress": True, "seaweedfs": True, "host": "a.example.org"},
], ids=["defaults", "gpu-only", "mixed", "services"])
def test_the_tenant_charts_render_reads_its_documents_as_reading_its_text_does(values):
    raw, documents = flux.render_release(ROOT / "charts" / "tenant", merge_values(PARENT, values), "tenant-a",
                                         "tenant-root")
    assert documents is not None and len(documents) > 3
    assert raw == flux.render_values(ROOT / "charts" / "tenant", merge_values(PARENT, values), "tenant-a",
                                     "tenant-root")
    assert same(documents, read_again(raw.decode()))
    assert same(documents, load_documents(raw))


def test_odd_documents_read_alike():
    files = {
        "templates/a.yaml": "# only a comment\n---\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  n: 1\n"
                            "  f: 1.0\n  b: yes\n  t: true\n  z: ~\n  s: '1'\n...\n",
        "templates/b.yaml": "kind: Secret\nmetadata:\n  name: &n b\n  labels: {x: *n}\nstringData:\n  v: |\n"
                            "    line one\n    line two\n",
        "templates/c.yaml": "kind: Job\nmetadata:\n  name: c\n  annotations:\n    helm.sh/hook: pre-install\n",
        "templates/d.yaml": "---\n# comments\n# only\n",
    }
    rendered = sort_manifests(files)
    documents = rendered.documents()
    assert documents is not None
    assert same(documents, read_again(rendered.text()))
    assert None in documents  # a document of comments only reads as None in both


def test_a_byte_order_mark_inside_a_document_leaves_the_reading_to_the_text():
    rendered = sort_manifests({"templates/a.yaml": "\ufeffkind: ConfigMap\nmetadata: {name: a}\n"})
    assert rendered.documents() is None  # alone it drops the mark; in the stream the key would keep it


_lines = st.tuples(st.lists(st.text("ab :#-", max_size=5), min_size=2, max_size=4), st.sampled_from(["", "\n", "\n\n"]))
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
                     _lines.map(lambda parts: "\n".join(parts[0]) + parts[1]))  # a values.yaml, a script
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.text(min_size=1, max_size=8), _values, min_size=1, max_size=4),
                          st.sampled_from(["block", "flow", "literal"]), st.booleans()), min_size=1, max_size=4))
def test_any_documents_a_template_writes_read_alike(docs):
    """Maps of any scalars (strings of any characters, numbers, booleans,
    null) written in block or flow style or with literal blocks, with or
    without a comment line:
    the render's reading equals the text's, or the render refuses them as
    the text's reading would."""
    parts = []
    for value, style, comment in docs:
        if style == "literal":  # strings with line breaks as literal blocks, the last one's chomping too
            text = dump_readable(value)
        else:
            text = yaml.safe_dump(value, default_flow_style=style == "flow", allow_unicode=True)
        parts.append(("# a comment\n" if comment else "") + text)
    try:
        rendered = sort_manifests({"templates/x.yaml": "\n---\n".join(parts)})
    except Exception:  # noqa: BLE001 - the render refuses it (a document it cannot read); nothing to compare
        return
    documents = rendered.documents()
    if documents is not None:
        assert same(documents, read_again(rendered.text()))


def test_a_document_that_cannot_be_read_is_named_where_it_breaks():
    """The render reads each document with the line break the release prints after it; an error
    still names the place inside the document, as reading the document alone does."""
    from cozyrender.render.errors import RenderError

    with pytest.raises(RenderError) as err:
        sort_manifests({"templates/a.yaml": 'kind: A\nx: "abc'})
    assert str(err.value).startswith("YAML parse error on templates/a.yaml:") and "line 2" in str(err.value)
