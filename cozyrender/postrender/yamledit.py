"""Surgical edits of YAML text at the positions libyaml's composer reports.

A rule that changes a document changes only the bytes of the keys it edits:
everything else (comments, key order, quoting, indentation) stays as written.
Edits are collected as (start, end, replacement) spans over the document text
and applied once, in `Editor.result()`.

Block and flow (JSON) styles are both handled. Pure text manipulation, no I/O;
the text written for values comes from `scalars`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.postrender.errors import EditError

# The spellings live in `scalars`; these names stay importable from here (flux uses them).
from cozyrender.postrender.scalars import (  # noqa: F401
    Value,
    _block_entry,
    flow_value,
    format_string_scalar,
    literal_block,
    literal_safe,
    quote,
)

STR_TAG = "tag:yaml.org,2002:str"
# A block scalar's header from its start mark: properties, then | or > and its indicators.
_BLOCK_HEADER = re.compile(r"(?:[&!][^ \t\r\n]*[ \t]+)*[|>]([-+0-9]*)")
NULL_TAG = "tag:yaml.org,2002:null"


def find_entry(mapping: MappingNode, key: str) -> tuple[int, ScalarNode, Node] | None:
    """The entry whose key is the string `key`: (index, key node, value node)."""
    for index, (key_node, value_node) in enumerate(mapping.value):
        if isinstance(key_node, ScalarNode) and key_node.value == key and key_node.tag == STR_TAG:
            return index, key_node, value_node
    return None


def child(node: Node | None, *path: str) -> Node | None:
    """The node at a path of string keys below a mapping node, or None."""
    for key in path:
        if not isinstance(node, MappingNode):
            return None
        entry = find_entry(node, key)
        if entry is None:
            return None
        node = entry[2]
    return node


def last_content(node: Node) -> Node:
    """The node written last inside `node`: down the last value of block
    mappings and the last item of block sequences (a flow collection or a
    scalar is its own last content)."""
    while True:
        if isinstance(node, MappingNode) and node.value and not node.flow_style:
            node = node.value[-1][1]
        elif isinstance(node, SequenceNode) and node.value and not node.flow_style:
            node = node.value[-1]
        else:
            return node


def _ends_in_block_scalar(node: Node) -> bool:
    """The last content of `node` is a literal or folded block scalar."""
    last = last_content(node)
    return isinstance(last, ScalarNode) and last.style in ("|", ">")


def is_null(node: Node | None) -> bool:
    return node is None or (isinstance(node, ScalarNode) and node.tag == NULL_TAG)


class Editor:
    """Collects non-overlapping text edits over one YAML text."""

    def __init__(self, text: str) -> None:
        # A byte order mark at the start is not counted in libyaml's marks
        # (its reader takes it as the encoding's signature): it is held apart
        # and put back in front of the result, so edits land where the marks say.
        self.prefix = "\ufeff" if text.startswith("\ufeff") else ""
        self.text = text[len(self.prefix):]
        self._edits: list[tuple[int, int, str]] = []
        # New lines follow the document's own line breaks (CRLF stays CRLF).
        self.newline = "\r\n" if "\r\n" in text else "\n"

    @property
    def changed(self) -> bool:
        return bool(self._edits)

    def replace(self, start: int, end: int, replacement: str) -> None:
        if self.newline != "\n":
            replacement = replacement.replace("\n", self.newline)
        self._edits.append((start, end, replacement))

    def result(self) -> str:
        pieces: list[str] = []
        cursor = 0
        for start, end, replacement in sorted(self._edits, key=lambda edit: (edit[0], edit[1])):
            if start < cursor:
                raise EditError("overlapping edits")  # a bug in a rule, never user input
            pieces.append(self.text[cursor:start])
            pieces.append(replacement)
            cursor = end
        pieces.append(self.text[cursor:])
        return self.prefix + "".join(pieces)

    # -- positions ---------------------------------------------------------

    def _line_start(self, pos: int) -> int:
        return self.text.rfind("\n", 0, pos) + 1

    def line_end(self, pos: int) -> int:
        """The offset just past the line break ending the line at `pos` (or the text's end)."""
        newline = self.text.find("\n", pos)
        return len(self.text) if newline < 0 else newline + 1

    def colon_after(self, key_node: Node) -> int:
        """The offset of the `:` that ends the block-mapping key `key_node`."""
        colon = self.text.find(":", key_node.end_mark.index)
        if colon < 0:
            raise EditError("unexpected mapping layout")
        return colon

    def insert_lines(self, at: int, text: str) -> None:
        """Insert whole lines `text` at `at`, first ending the line there if
        `at` is not already at the start of a line."""
        prefix = "" if at == 0 or self.text[at - 1] == "\n" else "\n"
        self.replace(at, at, prefix + text)

    def entry_column(self, key_node: Node) -> int:
        """The column where the block-mapping entry of `key_node` starts: its
        key's, or that of the `?` of an explicit key."""
        start = key_node.start_mark.index
        before = self.text[self._line_start(start):start].rstrip(" \t")
        if before.endswith("?"):
            return len(before) - 1
        return key_node.start_mark.column

    def _block_entry_start(self, key_node: Node) -> int:
        start = key_node.start_mark.index
        start_of_line = self._line_start(start)
        if self.text[start_of_line:start].strip() in ("", "?"):  # "?" starts an explicit key
            return start_of_line
        return start  # the first entry of a sequence item: keep the "- "

    # -- mappings ----------------------------------------------------------

    def delete_entries(self, mapping: MappingNode, indices: Iterable[int], owner: Node | None) -> None:
        """Delete the entries at `indices`. `owner` is the key node whose value
        the mapping is (None at a document root); a mapping left empty becomes `{}`."""
        doomed = set(indices)
        if not doomed:
            return
        if mapping.flow_style:
            self._delete_flow(mapping, [(k, v) for k, v in mapping.value], doomed, "{}")
            return
        if len(doomed) == len(mapping.value):
            self._empty_block(mapping, owner, "{}")
            return
        # One span per run of entries with nothing between them (comment or
        # blank lines between removed entries stay): tens of thousands of
        # removed keys make a few edits, not one each.
        text, entries = self.text, mapping.value
        run_start = run_end = -1
        for index in sorted(doomed):
            key_node, value_node = entries[index]
            key_start = key_node.start_mark.index
            if type(value_node) is ScalarNode and value_node.style is None and value_node.end_mark.index > key_start \
                    and value_node.end_mark.line == key_node.start_mark.line and "\n" not in text[key_start:value_node.end_mark.index]:
                # `key: value` on one line: its line, found without the general walk
                start = text.rfind("\n", 0, key_start) + 1
                if text[start:key_start].strip() not in ("", "?"):
                    start = key_start
                newline = text.find("\n", value_node.end_mark.index)
                end = len(text) if newline < 0 else newline + 1
            else:
                start, end = self._block_entry_start(key_node), self.content_end(value_node)
            if start == run_end:
                run_end = end
                continue
            if run_start >= 0:
                self.replace(run_start, run_end, "")
            run_start, run_end = start, end
        self.replace(run_start, run_end, "")

    def set_entry(self, mapping: MappingNode, key: str, value: Value) -> None:
        """Set `key` to `value`: replace the scalar in place, or add the entry."""
        entry = find_entry(mapping, key)
        if entry is None:
            self.add_entry(mapping, key, value)
            return
        index, _, value_node = entry
        if isinstance(value, dict) or not isinstance(value_node, ScalarNode):
            raise EditError(f"{key!r} is not a scalar")
        self.set_value(mapping, index, value)

    def set_value(self, mapping: MappingNode, index: int, value: Value) -> None:
        """Give entry `index` a new scalar or mapping value. A value with no
        text (`key:`, `{key}`, `? key`) has nowhere to write into: the whole
        entry is written again."""
        key_node, value_node = mapping.value[index]
        if value_node.start_mark.index == value_node.end_mark.index:
            self.replace_entry(mapping, index, key_node.value, value)
        else:
            self.replace_node(value_node, value)

    def add_entry(self, mapping: MappingNode, key: str, value: Value) -> None:
        if mapping.flow_style:
            self.add_flow_entry(mapping, f"{quote(key)}: {flow_value(value)}")
            return
        if not mapping.value:
            raise EditError("cannot add to an empty block mapping")
        last_key, last_value = mapping.value[-1]
        indent = self.entry_column(last_key)
        at = self.content_end(last_value)
        if at == len(self.text) and not self.text.endswith("\n") and _ends_in_block_scalar(last_value):
            # The text ends inside a block scalar without a line break (the YAML test suite's
            # L24T/01): ending that line would change the scalar as libyaml reads it ('x\n ' to
            # 'x\n \n'). The entry goes first instead: a mapping's order is not its content.
            first_key = mapping.value[0][0]
            start = self._block_entry_start(first_key)
            if start == self._line_start(first_key.start_mark.index):
                self.insert_lines(start, _block_entry(key, value, self.entry_column(first_key)))
                return
        self.insert_lines(at, _block_entry(key, value, indent))

    def add_flow_entry(self, mapping: MappingNode, text: str) -> None:
        """Append the entry `text` (`key: value`, as written) to a flow mapping."""
        if mapping.value:
            at = mapping.value[-1][1].end_mark.index
            self.replace(at, at, ", " + text)
        else:  # before the closing brace: an anchor or tag stands before the opening one
            self.replace(self._flow_close(mapping), self._flow_close(mapping), text)

    def replace_entry(self, mapping: MappingNode, index: int, key: str, value: Value) -> None:
        """Put a new entry where entry `index` stood."""
        key_node, value_node = mapping.value[index]
        if mapping.flow_style:
            self.replace(key_node.start_mark.index, value_node.end_mark.index,
                         f"{quote(key)}: {flow_value(value)}")
        else:
            self.replace(self._block_entry_start(key_node), self.content_end(value_node),
                         _block_entry(key, value, self.entry_column(key_node)))

    def replace_string(self, node: ScalarNode, new_value: str) -> None:
        """Replace a string scalar, keeping a literal block a literal block."""
        formatted = format_string_scalar(node, self.text, new_value)
        if formatted.startswith("|") and node.style == "|":
            self.replace(node.start_mark.index, self.content_end(node), formatted)
        else:
            self.replace_scalar_text(node, formatted)

    def replace_node(self, node: ScalarNode, value: Value) -> None:
        """Replace a scalar value node that has text (null included) by a new flow value."""
        self.replace_scalar_text(node, flow_value(value))

    def replace_scalar_text(self, node: ScalarNode, text: str) -> None:
        """Put `text` where a scalar with text stands. A block scalar (| or >)
        runs to the end of its lines, which the new flow text replaces."""
        start, end = node.start_mark.index, node.end_mark.index
        if start == end:
            raise EditError("a value with no text cannot be replaced in place")  # set_value's job
        if node.style in ("|", ">"):
            self.replace(start, self.content_end(node), text + "\n")
        else:
            self.replace(start, end, text)

    # -- sequences ---------------------------------------------------------

    def delete_items(self, sequence: SequenceNode, indices: Iterable[int], owner: Node | None) -> None:
        doomed = set(indices)
        if not doomed:
            return
        if sequence.flow_style:
            self._delete_flow(sequence, [(item, item) for item in sequence.value], doomed, "[]")
            return
        if len(doomed) == len(sequence.value):
            self._empty_block(sequence, owner, "[]")
            return
        for index in sorted(doomed):
            self.replace(*self.item_span(sequence, index), "")  # from the dash's line, wherever the item starts

    # -- sequence items, exactly (the comments between items stay) --------

    def content_end(self, node: Node) -> int:
        """The end of the line (past its line break) holding the last content
        of `node`: a trailing comment on that line is included; the comment
        and blank lines after it, which libyaml's end marks run over, are not."""
        node = last_content(node)
        end = node.end_mark.index
        if isinstance(node, ScalarNode) and node.style in ("|", ">"):
            return self._block_scalar_end(node)
        elif isinstance(node, ScalarNode) and node.start_mark.index == end:
            # an empty value (`key:`, `? key`): its mark is where the next token
            # starts, maybe lines below; its content ended with what came before
            while end > 0 and self.text[end - 1] in " \t\r\n":
                end -= 1
        elif end > 0 and end == self._line_start(end) and self.text[end - 1] == "\n":
            end -= 1  # a block collection's mark at the next line: its content ended before
        return self.line_end(end)

    def _block_scalar_end(self, node: ScalarNode) -> int:
        """`content_end` of a block scalar (| or >). Keep chomping (+): its
        end mark, trailing blank lines included. Clip and strip: past the last
        line holding content, that is more than the scalar's indentation;
        lines of no more than that many spaces are not content, a line of more
        spaces is (`"x\\n \\n"`)."""
        text, start, end = self.text, node.start_mark.index, node.end_mark.index
        header_end = self.line_end(start)
        indicator = _BLOCK_HEADER.match(text, start, header_end)
        if indicator is None:
            raise EditError("a block scalar whose header this editor cannot read")
        if "+" in indicator.group(1):
            return end if end == self._line_start(end) else self.line_end(end)
        lines = []
        at = header_end
        while at < end:
            next_at = self.line_end(at)
            lines.append((at, text[at:next_at].rstrip("\r\n")))
            at = next_at
        explicit = next((ch for ch in indicator.group(1) if ch.isdigit()), None)
        first = next((line for _, line in lines if line.strip(" ")), None)
        if first is None:
            return header_end  # no line holds more than spaces: nothing but blank lines
        if explicit is None:
            leading = 0
            for _, line in lines:
                if line.strip(" "):
                    break
                leading = max(leading, len(line))
            indent = max(leading, len(first) - len(first.lstrip(" ")))
        else:
            value_first = next((line for line in node.value.split("\n") if line.strip(" ")), None)
            if value_first is None:
                raise EditError("a block scalar whose indentation this editor cannot tell")
            indent = (len(first) - len(first.lstrip(" "))) - (len(value_first) - len(value_first.lstrip(" ")))
        last = header_end
        for line_start, line in lines:
            if len(line) > indent:
                last = self.line_end(line_start)
        return last

    def item_dash(self, sequence: SequenceNode, index: int) -> int:
        """The offset of block-sequence item `index`'s `-`, which must begin its
        line. Comment and blank lines may stand between the dash and the
        item's content (`-\\n  # why\\n  kind: X`)."""
        if sequence.flow_style:
            raise EditError("not an item of a block sequence")
        item = sequence.value[index]
        pos = item.start_mark.index
        line_start = self._line_start(pos)
        before = self.text[line_start:pos]
        while not before.strip(" \t"):  # the content starts its line: look at the lines above
            if line_start == 0:
                raise EditError("not an item of a block sequence")
            line_start = self._line_start(line_start - 1)
            line = self.text[line_start:self.line_end(line_start)].rstrip("\r\n")
            body = line.lstrip(" \t")
            if body.startswith("-") and (len(body) == 1 or body[1] in " \t"):
                if body[1:].strip(" \t") and not body[1:].lstrip(" \t").startswith("#"):
                    raise EditError("not an item of a block sequence")
                return line_start + len(line) - len(body)
            if body and not body.startswith("#"):
                raise EditError("not an item of a block sequence")
        stripped = before.rstrip(" \t")
        if not stripped.endswith("-"):
            raise EditError("not an item of a block sequence")
        dash = line_start + len(stripped) - 1
        if stripped[:-1].strip(" \t"):
            raise EditError("a sequence item shares its line with another node")
        return dash

    def item_columns(self, sequence: SequenceNode, index: int) -> tuple[int, int]:
        """(column of the `-`, column of the content after it) of a block item;
        the content column is the dash's plus 2 when the content starts on a later line."""
        dash = self.item_dash(sequence, index)
        dash_column = dash - self._line_start(dash)
        item = sequence.value[index]
        if self._line_start(item.start_mark.index) != self._line_start(dash):
            return dash_column, dash_column + 2
        return dash_column, item.start_mark.column

    def item_span(self, sequence: SequenceNode, index: int) -> tuple[int, int]:
        """The lines of block-sequence item `index`: from the start of its dash's
        line to `content_end` of the item."""
        dash = self.item_dash(sequence, index)
        return self._line_start(dash), self.content_end(sequence.value[index])

    def replace_item(self, sequence: SequenceNode, index: int, text: str) -> None:
        """Put `text` where item `index` stands. In a block sequence `text` is
        whole lines (indented, each ending with a line break), or "" to delete
        the item's lines; in a flow sequence it is one flow node."""
        if sequence.flow_style:
            item = sequence.value[index]
            self.replace(item.start_mark.index, item.end_mark.index, text)
            return
        start, end = self.item_span(sequence, index)
        self.replace(start, end, text)

    def insert_item(self, sequence: SequenceNode, index: int, text: str, owner: Node) -> None:
        """Insert an item before item `index` (at the end when it is the length).
        Block: `text` is whole lines, placed right after the previous item's
        content, or after the line of `owner` (the key whose value the sequence
        is) for index 0, so comments above an existing item stay above it.
        Flow: `text` is one flow node, separated by ", "."""
        items = sequence.value
        if sequence.flow_style:
            if not items:
                at = self._flow_close(sequence)
                self.replace(at, at, text)
            elif index < len(items):
                at = items[index].start_mark.index
                self.replace(at, at, text + ", ")
            else:
                at = items[-1].end_mark.index
                self.replace(at, at, ", " + text)
            return
        if not items:
            raise EditError("a block sequence without items")
        at = self.content_end(items[index - 1]) if index else self.line_end(owner.end_mark.index)
        if index == 0 and at > self._line_start(self.item_dash(sequence, 0)):
            raise EditError("a sequence item shares its line with its key")
        self.insert_lines(at, text)

    # -- helpers -----------------------------------------------------------

    def _delete_flow(self, node: Node, entries: list[tuple[Node, Node]], doomed: set[int], empty: str) -> None:
        """Delete flow entries (first node, last node) with their separators,
        touching no byte of a kept entry, so edits inside kept entries stand."""
        if len(doomed) == len(entries):  # from the bracket: an anchor or tag before it stays
            self.replace(self._flow_open(node), node.end_mark.index, empty)
            return
        index = 0
        while index < len(entries):
            if index not in doomed:
                index += 1
                continue
            last = index
            while last + 1 in doomed:
                last += 1
            if last + 1 < len(entries):  # up to the next kept entry
                self.replace(entries[index][0].start_mark.index, entries[last + 1][0].start_mark.index, "")
            else:  # a tail run: from the end of the kept entry before it
                self.replace(entries[index - 1][1].end_mark.index, entries[last][1].end_mark.index, "")
            index = last + 1

    def _flow_close(self, node: Node) -> int:
        """The offset of a flow collection's closing bracket."""
        at = node.end_mark.index - 1
        if at < 0 or self.text[at] not in "}]":
            raise EditError("unexpected flow collection layout")
        return at

    def _flow_open(self, node: Node) -> int:
        """The offset of a flow collection's opening bracket, past the anchor
        and tag (and the blanks, line breaks and comments) before it."""
        text, at, end = self.text, node.start_mark.index, node.end_mark.index
        while at < end:
            ch = text[at]
            if ch in "{[":
                return at
            if ch in "&!":
                while at < end and text[at] not in " \t\r\n":
                    at += 1
            elif ch == "#":
                at = self.line_end(at)
            elif ch in " \t\r\n":
                at += 1
            else:
                break
        raise EditError("unexpected flow collection layout")

    def _empty_block(self, node: Node, owner: Node | None, empty: str) -> None:
        end = self.content_end(node)
        if owner is None:
            self.replace(self._line_start(node.start_mark.index), end, empty + "\n")
            return
        colon = self.colon_after(owner)
        if colon > node.start_mark.index:
            raise EditError("unexpected mapping layout")
        self.replace(colon + 1, end, f" {empty}\n")
