"""Checking every document cheaply: libyaml's event parser, no node trees.

Each chunk is run through the parser's events to prove it is well-formed YAML
holding at most one document, whose top level is a mapping without duplicate
keys. Only chunks a rule needs (or that use aliases) are composed into trees.
"""

from __future__ import annotations

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

try:
    from yaml.cyaml import CParser as _Parser
except ImportError:  # PyYAML without libyaml
    from yaml import SafeLoader as _Parser


# Explicit tags a safe loader knows; anything else (language-specific tags
# such as !!python/object, local !tags) is refused in every document.
_CORE = "tag:yaml.org,2002:"
SAFE_TAGS = frozenset(
    _CORE + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "binary", "timestamp", "omap", "pairs", "set")
) | {"!"}


class SyntaxProblem(ValueError):
    """Why a chunk is not a single well-formed mapping document."""


def check_chunk(raw: bytes) -> bool:
    """Raise SyntaxProblem for a bad chunk; return whether it uses aliases."""
    parser = _Parser(raw)
    get_event = parser.get_event
    stack: list[tuple[set | None, bool]] = []
    keys: set | None = None  # keys of the innermost mapping; None inside a sequence
    expect_key = False
    aliased = False
    documents = 0
    try:
        while True:
            event = get_event()
            kind = type(event)
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in SAFE_TAGS:
                raise SyntaxProblem(f"tag {tag!r} is not allowed: safe YAML only{_at(event)}")
            if kind is ScalarEvent:
                if keys is not None:
                    if expect_key:
                        if event.value in keys:
                            raise SyntaxProblem(f"duplicate key {event.value!r}{_at(event)}")
                        keys.add(event.value)
                    expect_key = not expect_key
                elif not stack and (event.value or event.style or not event.implicit[0]):
                    # `---` with nothing after it is an empty document, not a scalar
                    raise SyntaxProblem("the document is a scalar, not a mapping")
            elif kind is MappingStartEvent:
                if keys is not None:
                    expect_key = not expect_key
                stack.append((keys, expect_key))
                keys, expect_key = set(), True
            elif kind is SequenceStartEvent:
                if not stack:
                    raise SyntaxProblem("the document is a sequence, not a mapping")
                if keys is not None:
                    expect_key = not expect_key
                stack.append((keys, expect_key))
                keys = None
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                keys, expect_key = stack.pop()
            elif kind is AliasEvent:
                aliased = True
                if not stack:
                    raise SyntaxProblem("the document is an alias, not a mapping")
                if keys is not None:
                    expect_key = not expect_key
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise SyntaxProblem("more than one document without a '---' separator")
            elif kind is StreamEndEvent:
                return aliased
    except yaml.YAMLError as err:
        raise SyntaxProblem(f"invalid YAML: {describe_yaml_error(err)}") from None
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose:
            dispose()


def describe_yaml_error(err: Exception) -> str:
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark else str(problem)


def _at(event: ScalarEvent) -> str:
    mark = event.start_mark
    return f" (line {mark.line + 1})" if mark is not None else ""
