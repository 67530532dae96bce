"""The sequence-item operations `cozyrender flux` added to the post-renderer's
text editor (`yamledit.Editor`): content_end, item_dash/item_columns/item_span,
replace_item, insert_item. Each test spells out the expected text."""

from __future__ import annotations

import pytest
import yaml

from cozyrender.postrender.errors import EditError
from cozyrender.postrender.yamledit import Editor, child, find_entry

DOC = """\
list:
  # above the first
  - name: a   # trailing comment on a
    note: |
      line one

      line two


  # above b
  - name: b
    tags: [x, y]
  -   name: c
      keep: |+
        kept

  # last
after: 1
"""


def compose(text: str):
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    _, key, sequence = find_entry(root, "list")
    return key, sequence


def test_content_end_stops_before_comments_and_blank_lines():
    key, sequence = compose(DOC)
    editor = Editor(DOC)
    a, b, c = sequence.value
    # a literal block (clip): its trailing blank lines and the next item's comment are outside
    assert DOC[:editor.content_end(a)].endswith("      line two\n")
    assert DOC[:editor.content_end(b)].endswith("    tags: [x, y]\n")
    # keep chomping: the blank line is content; the comment after it is not
    assert DOC[editor.content_end(c):].startswith("  # last\n")
    assert editor.content_end(key) == DOC.index("  # above")


def test_item_columns_and_span():
    _, sequence = compose(DOC)
    editor = Editor(DOC)
    assert editor.item_columns(sequence, 0) == (2, 4)
    assert editor.item_columns(sequence, 2) == (2, 6)
    start, end = editor.item_span(sequence, 1)
    assert DOC[start:end] == "  - name: b\n    tags: [x, y]\n"
    text = "list:\n  -\n    k: v\n"
    assert Editor(text).item_columns(compose(text)[1], 0) == (2, 4)


def test_replace_item_keeps_comments_between_items():
    _, sequence = compose(DOC)
    editor = Editor(DOC)
    editor.replace_item(sequence, 0, "  - name: A\n")
    assert editor.result() == DOC.replace(
        "  - name: a   # trailing comment on a\n    note: |\n      line one\n\n      line two\n",
        "  - name: A\n")
    editor = Editor(DOC)
    editor.replace_item(sequence, 1, "")
    assert editor.result() == DOC.replace("  - name: b\n    tags: [x, y]\n", "")


def test_insert_item_first_goes_above_the_first_items_comment():
    key, sequence = compose(DOC)
    editor = Editor(DOC)
    editor.insert_item(sequence, 0, "  - name: new\n", key)
    assert editor.result() == DOC.replace("list:\n", "list:\n  - name: new\n")
    editor = Editor(DOC)
    editor.insert_item(sequence, 2, "  - name: new\n", key)
    assert editor.result() == DOC.replace("    tags: [x, y]\n", "    tags: [x, y]\n  - name: new\n")
    editor = Editor(DOC)
    editor.insert_item(sequence, 3, "  - name: new\n", key)
    assert editor.result() == DOC.replace("        kept\n\n", "        kept\n\n  - name: new\n")
    assert yaml.safe_load(editor.result())["list"][3] == {"name": "new"}


def test_flow_sequences():
    text = "list: [a, {b: 1}]  # c\nempty: []\n"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    key, sequence = find_entry(root, "list")[1:]
    editor = Editor(text)
    editor.insert_item(sequence, 0, "new", key)
    editor.replace_item(sequence, 1, "{b: 2}")
    assert editor.result() == "list: [new, a, {b: 2}]  # c\nempty: []\n"
    editor = Editor(text)
    editor.insert_item(sequence, 2, "z", key)
    key, empty = find_entry(root, "empty")[1:]
    editor.insert_item(empty, 0, "first", key)
    assert editor.result() == "list: [a, {b: 1}, z]  # c\nempty: [first]\n"


def test_crlf_lines_stay_crlf():
    text = DOC.replace("\n", "\r\n")
    key, sequence = compose(text)
    editor = Editor(text)
    editor.insert_item(sequence, 0, "  - name: new\n", key)
    editor.replace_item(sequence, 1, "  - name: B\n")
    assert editor.result() == text.replace("list:\r\n", "list:\r\n  - name: new\r\n").replace(
        "  - name: b\r\n    tags: [x, y]\r\n", "  - name: B\r\n")


@pytest.mark.parametrize("text", [
    "list: [1]\n",  # flow: no dash
    "list:\n- - a\n  - b\n",  # a compact nested sequence: the inner items share a line
])
def test_item_dash_refuses_what_is_not_a_block_item_line(text):
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    sequence = child(root, "list")
    if not sequence.flow_style:
        sequence = sequence.value[0]
    with pytest.raises(EditError):
        Editor(text).item_dash(sequence, 0)
