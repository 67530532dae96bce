"""Printing post-renderer entries as block YAML at a file's own indentation.

The editor writes the entry into a user's file, so it is printed the way that
file indents (see `Layout`), with keys in the order derived and multi-line
patch text as literal blocks: what a person would have written there.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from cozyrender.postrender.yamledit import flow_value, literal_block, literal_safe, quote


@dataclass(frozen=True)
class Layout:
    """How a file indents block YAML, in columns: a nested mapping's keys
    beyond their parent key, a sequence's dashes beyond their key, an item's
    content beyond its dash. (Line breaks: the Editor writes CRLF into a CRLF
    document.)"""

    mapping: int = 2
    sequence: int = 2
    content: int = 2


def _scalar(value: object) -> str:
    """A one-line scalar as PyYAML spells it (plain when it can be)."""
    if value is None:
        return "null"
    text = yaml.dump(value, Dumper=yaml.SafeDumper, allow_unicode=True, width=1 << 16)
    return text.split("\n", 1)[0]


def _lines(value: object, column: int, layout: Layout, head: str) -> list[str]:
    """`head` (an indented `key:` or `-`) followed by `value` in block style,
    nested lines indented from `column`, the head's column."""
    if isinstance(value, dict) and value:
        return [head, *_mapping(value, column + layout.mapping, layout)]
    if isinstance(value, list) and value:
        return [head, *_sequence(value, column + layout.sequence, layout)]
    if isinstance(value, str) and "\n" in value and literal_safe(value):
        first, *rest = literal_block(value, column + layout.mapping)[:-1].split("\n")
        return [f"{head} {first}", *rest]
    if isinstance(value, str) and "\n" in value:
        return [f"{head} {quote(value)}"]
    if isinstance(value, (dict, list)):
        return [f"{head} {'{}' if isinstance(value, dict) else '[]'}"]
    return [f"{head} {_scalar(value)}"]


def _mapping(mapping: dict, column: int, layout: Layout) -> list[str]:
    lines: list[str] = []
    for key, value in mapping.items():
        lines.extend(_lines(value, column, layout, f"{' ' * column}{_scalar(key)}:"))
    return lines


def _sequence(items: list, dash: int, layout: Layout) -> list[str]:
    """Items with their dash at column `dash`; a mapping item's first key on the dash's line."""
    content = dash + layout.content
    lines: list[str] = []
    for item in items:
        prefix = " " * dash + "-" + " " * (layout.content - 1)
        if isinstance(item, (dict, list)) and item:
            inner = _mapping(item, content, layout) if isinstance(item, dict) else _sequence(item, content, layout)
            lines.append(prefix + inner[0][content:])
            lines.extend(inner[1:])
        else:
            lines.extend(_lines(item, content - layout.mapping, layout, prefix.rstrip()))
    return lines


def render_item(entry: dict, dash: int, layout: Layout) -> str:
    """One block-sequence item, its dash at column `dash`, as whole lines."""
    return "\n".join(_sequence([entry], dash, layout)) + "\n"


# `value` as one flow node (for a file that writes postRenderers in flow style).
flow = flow_value


def format_post_renderers(post_renderers: list[dict]) -> str:
    """`postRenderers:` as it goes into a HelmRelease's spec."""
    if not post_renderers:
        return "postRenderers: []\n"
    return "postRenderers:\n" + "".join(render_item(e, 2, Layout()) for e in post_renderers)
