"""The YAML-writing helpers `yamledit` shares with `cozyrender flux`:
literal_safe, literal_block, flow_value and the Editor's line_end,
colon_after, insert_lines and add_flow_entry. Each test spells out the
expected text."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.postrender.errors import EditError
from cozyrender.postrender.yamledit import (
    Editor,
    find_entry,
    flow_value,
    literal_block,
    literal_safe,
)
from cozyrender.yamlio import SafeLoader

# ---------------------------------------------------------------- literal_safe


@pytest.mark.parametrize("value", [
    "a", "a\nb", "a\n", "a\n\n\n", "\na", "a\n  b\n", "a\tb\n", "é\n", "a\n  ",
])
def test_literal_safe_accepts(value):
    assert literal_safe(value)


@pytest.mark.parametrize("value", [
    "",          # no content
    "\n\n",      # no content
    " a\n",      # a leading blank would set the indentation
    "\n\ta",     # the same after leading line breaks
    "a\n  \nb",  # a line of only blanks (not the last)
    "a\n\t\n",   # the same, a tab
    "a\x85b",    # NEL reads as a line break
    "a\u2028b",  # so does LINE SEPARATOR
    "a\x7fb",    # DEL cannot stand in a block scalar
    "a\rb",      # nor a carriage return
    "a\x00b",    # nor a control character
    "a\ufeff",   # nor a byte order mark
    "a\x80b",    # nor a C1 control (PyYAML's reader refuses it)
    "a\ud800b",  # nor a surrogate
    "a\ufffe",   # nor a non-character
])
def test_literal_safe_refuses(value):
    assert not literal_safe(value)


# ---------------------------------------------------------------- literal_block


@pytest.mark.parametrize(("value", "indent", "comment", "expected"), [
    ("a\nb", 2, "", "|-\n  a\n  b\n"),                 # no trailing break: strip
    ("a\n\nb\n", 4, "", "|\n    a\n\n    b\n"),         # one: clip; the empty line stays empty
    ("a\n\n\n", 2, "", "|+\n  a\n\n\n"),                # more: keep
    ("\na", 2, "", "|-\n\n  a\n"),                      # leading line breaks
    ("a\n", 2, "  # why", "|  # why\n  a\n"),          # the header comment as given
])
def test_literal_block_exact(value, indent, comment, expected):
    assert literal_block(value, indent, comment) == expected


_LINES = st.text(alphabet=st.sampled_from("ab #:-|>'\"\t \n\x85\u2028é"), min_size=1, max_size=40)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_LINES, st.text(min_size=1, max_size=40)).filter(literal_safe))
def test_literal_block_reads_back(value):
    text = "key: " + literal_block(value, 2)
    assert yaml.safe_load(text) == {"key": value}
    assert yaml.load(text, Loader=SafeLoader) == {"key": value}  # libyaml where PyYAML has it


# ---------------------------------------------------------------- flow_value


def test_flow_value_exact():
    value = {"a": [1, None, True, False, 2.5, "x\ny"], 3: {}, "e": [], "n": -7}
    assert flow_value(value) == '{"a": [1, null, true, false, 2.5, "x\\ny"], 3: {}, "e": [], "n": -7}'


@pytest.mark.parametrize(("value", "expected"), [
    (float("nan"), ".nan"), (float("inf"), ".inf"), (float("-inf"), "-.inf"),
    (1e17, "1.0e+17"), (1.5e-7, "1.5e-07"), (-0.0, "-0.0"),
])
def test_flow_value_floats_as_pyyaml_spells_them(value, expected):
    assert flow_value(value) == expected
    assert yaml.safe_dump(value).split("\n", 1)[0] == expected


def test_flow_value_reads_back():
    value = {"s": "é\t\"q\"\\", "l": [0, [None]], "d": {"k": False}}
    assert yaml.safe_load(flow_value(value)) == value


def test_flow_value_refuses_other_types():
    with pytest.raises(TypeError):
        flow_value(object())  # type: ignore[arg-type]


# ---------------------------------------------------------------- Editor helpers


def test_line_end():
    editor = Editor("a: 1\nb: 2")
    assert editor.line_end(0) == 5
    assert editor.line_end(4) == 5  # at the line break: past it
    assert editor.line_end(5) == 9  # the last line has no break: the text's end


def test_colon_after():
    text = "a  : 1\n? b\n: 2\n"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    editor = Editor(text)
    assert editor.colon_after(find_entry(root, "a")[1]) == 3
    assert editor.colon_after(find_entry(root, "b")[1]) == 11


def test_colon_after_refuses_a_key_without_one():
    text = "{a}"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    with pytest.raises(EditError):
        Editor(text).colon_after(find_entry(root, "a")[1])


@pytest.mark.parametrize(("text", "at", "expected"), [
    ("a: 1\n", 5, "a: 1\nb: 2\n"),       # at a line start: as is
    ("a: 1", 4, "a: 1\nb: 2\n"),         # mid-line (no final break): the line is ended first
    ("", 0, "b: 2\n"),                   # the empty text
    ("a: 1\r\n", 6, "a: 1\r\nb: 2\r\n"),  # CRLF stays CRLF
])
def test_insert_lines(text, at, expected):
    editor = Editor(text)
    editor.insert_lines(at, "b: 2\n")
    assert editor.result() == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("spec: {a: 1}\n", "spec: {a: 1, b: [2]}\n"),
    ("spec: {}\n", "spec: {b: [2]}\n"),
    ("spec: { a: 1 }\n", "spec: { a: 1, b: [2] }\n"),
])
def test_add_flow_entry(text, expected):
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    editor = Editor(text)
    editor.add_flow_entry(find_entry(root, "spec")[2], "b: [2]")
    assert editor.result() == expected


def test_add_entry_flow_quotes_the_key_and_uses_flow_value():
    text = "spec: {a: 1}\n"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    editor = Editor(text)
    editor.add_entry(find_entry(root, "spec")[2], "b", {"c": True})
    assert editor.result() == 'spec: {a: 1, "b": {"c": true}}\n'


# ----------------------------------------- shapes from issue 13, at the Editor


def composed(text: str):
    return yaml.compose(text.lstrip("\ufeff"), Loader=SafeLoader)


def test_a_leading_bom_is_held_apart_and_put_back():
    text = "\ufeffa: {x: 1}\n"
    editor = Editor(text)
    assert editor.prefix == "\ufeff" and editor.text == "a: {x: 1}\n"
    mapping = composed(text).value[0][1]
    editor.add_flow_entry(mapping, "y: 2")
    assert editor.result() == "\ufeffa: {x: 1, y: 2}\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("a: !!map {}\n", "a: !!map {k: v}\n"),
    ("a: &x {}\n", "a: &x {k: v}\n"),
    ("a: &x !!map { }\n", "a: &x !!map { k: v}\n"),
])
def test_an_entry_added_to_an_empty_flow_mapping_goes_inside_its_braces(text, expected):
    editor = Editor(text)
    editor.add_flow_entry(composed(text).value[0][1], "k: v")
    assert editor.result() == expected


def test_an_emptied_flow_mapping_keeps_its_tag_and_anchor():
    text = "a: &x !!map {k: 1}\n"
    editor = Editor(text)
    mapping = composed(text).value[0][1]
    editor.delete_entries(mapping, [0], owner=None)
    assert editor.result() == "a: &x !!map {}\n"


def test_an_entry_added_after_an_explicit_key_starts_at_the_question_mark():
    text = "m:\n  ? a\n  : b\n"
    editor = Editor(text)
    editor.add_entry(composed(text).value[0][1], "c", "d")
    assert editor.result() == 'm:\n  ? a\n  : b\n  c: "d"\n'


@pytest.mark.parametrize(("text", "end"), [
    ("a: |\n  x\n   \nb: 1\n", len("a: |\n  x\n   \n")),
    ("a: |\n  x\n  \n\nb: 1\n", len("a: |\n  x\n")),
    ("a: |+\n  x\n\nb: 1\n", len("a: |+\n  x\n\n")),
    ("a: |2\n    x\n   \nb: 1\n", len("a: |2\n    x\n   \n")),
    ("a: >-\n  x\n\n  y\n\n", len("a: >-\n  x\n\n  y\n")),
])
def test_a_block_scalar_ends_after_its_last_line_of_content(text, end):
    assert Editor(text).content_end(composed(text).value[0][1]) == end


@pytest.mark.parametrize("between", ["  # a-b\n", "  # ---\n", "\n", "  # x\n\n  # y\n"])
def test_a_dash_is_found_above_comment_and_blank_lines(between):
    text = f"s:\n-\n{between}  k: v\n- w\n"
    sequence = composed(text).value[0][1]
    editor = Editor(text)
    assert editor.item_dash(sequence, 0) == text.index("-\n")
    editor.delete_items(sequence, [0], owner=None)
    assert editor.result() == "s:\n- w\n"
