"""`dump_readable_fast` (libyaml's emitter, for Flux's patches): whatever the
values, reading its text back gives them exactly, types included. (PyYAML's
own emitter, `dump_readable`, does not always: a string holding U+0085 comes
back with a space there, which this property found.)"""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.yamlio import SafeLoader, dump_readable, dump_readable_fast
from test_render_documents import same

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(), st.text("ab \n\t:#|>-'\"\x85\u2028é").map(str))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_the_fast_writer_reads_back_the_same_values(value):
    fast = dump_readable_fast(value)
    assert same(yaml.load(fast, Loader=SafeLoader), value)


def test_a_patch_reads_as_the_python_writer_writes_it():
    """The usual patch (JSON Patch operations, a values.yaml as a literal block): the same text."""
    ops = [{"op": "test", "path": "/metadata/name", "value": "tenant-a"},
           {"op": "replace", "path": "/stringData/values.yaml", "value": "_namespace:\n  vgpu: true\n"},
           {"op": "remove", "path": "/spec/hard/requests.nvidia.com~1GA100"}]
    assert dump_readable_fast(ops) == dump_readable(ops)


def test_a_values_file_holding_an_emoji_stays_a_literal_block():
    """libyaml escapes characters beyond the Basic Multilingual Plane and then writes no literal
    block: such a text is written by PyYAML's emitter, readable in the HelmRelease."""
    ops = [{"op": "replace", "path": "/stringData/values.yaml",
            "value": "_namespace:\n  vgpu: true\ndescription: GPU team \U0001F680\n"}]
    text = dump_readable_fast(ops)
    assert "value: |\n    _namespace:\n" in text and "\U0001F680" in text
    assert same(yaml.load(text, Loader=SafeLoader), ops)
