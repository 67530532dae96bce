"""Checking every document cheaply: libyaml's event parser, no node trees.

Each chunk is run through the parser's events to prove it is well-formed YAML
holding at most one document, whose top level is a mapping without duplicate
keys (the rule every reader shares: `cozyrender.yamlio`). Only chunks a rule
needs (or that use aliases) are composed into trees.
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

from cozyrender.yamlio import duplicate_key_problem  # the rule every reader shares

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


_MERGE_KEY = "<<"
_BINARY = _CORE + "binary"
_COLLECTION_TAGS = {
    MappingStartEvent: frozenset({_CORE + "map", _CORE + "set", "!"}),
    SequenceStartEvent: frozenset({_CORE + "seq", _CORE + "omap", _CORE + "pairs", "!"}),
}
_PLAIN_COLLECTION_TAGS = frozenset({_CORE + "map", _CORE + "seq", "!"})
_PAIRS_TAGS = frozenset({_CORE + "set", _CORE + "omap", _CORE + "pairs"})


def check_chunk(raw: bytes, after_end: bool = False) -> bool:
    """Raise SyntaxProblem for a bad chunk; return whether its document must
    be composed and constructed to be checked (aliases, merge keys, explicit
    tags other than !!str, !!map and !!seq, plain scalars that may not
    construct: see `_plain_may_fail`).

    The one rule for every document, whether a rule reads it or not: one
    well-formed YAML document whose top level is a mapping, keys that are
    scalars (a Kubernetes object is JSON: no complex keys) and unique, safe
    tags only, and values the safe constructor accepts. (An anchor defined
    twice is YAML: the document is composed, its aliases following the latest.)
    `after_end`: the chunk follows a `...` line, so its document must start
    with `---` (libyaml requires it there).
    """
    parser = _Parser(raw)
    get_event = parser.get_event
    stack: list[tuple[set | None, bool]] = []
    keys: set | None = None  # keys of the innermost mapping; None inside a sequence
    expect_key = False
    needs_tree = False
    documents = 0
    anchors: dict[str, tuple[int, bool]] = {}  # anchor -> (line, anchors a scalar)
    try:
        while True:
            event = get_event()
            kind = type(event)
            if kind is ScalarEvent:  # the common case first, with the least work
                value = event.value
                if event.tag is not None or event.anchor is not None:
                    needs_tree = _properties(event, kind, anchors) or needs_tree
                elif value and value[0] in _NUMERIC_START and not needs_tree and event.implicit[0] \
                        and _plain_may_fail(value):
                    needs_tree = True
                if keys is not None:
                    if expect_key:
                        if value in keys:
                            raise SyntaxProblem(f"{duplicate_key_problem(value)}{_at(event)}")
                        if value == _MERGE_KEY and event.implicit[0]:
                            _merge_key(event, keys)
                            needs_tree = True
                        keys.add(value)
                    expect_key = not expect_key
                elif not stack and (value or event.style or not event.implicit[0]):
                    # `---` with nothing after it is an empty document, not a scalar
                    raise SyntaxProblem("the document is a scalar, not a mapping")
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                keys, expect_key = stack.pop()
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.tag is not None or event.anchor is not None:
                    needs_tree = _properties(event, kind, anchors) or needs_tree
                if not stack and kind is SequenceStartEvent:
                    raise SyntaxProblem("the document is a sequence, not a mapping")
                if keys is not None:
                    if expect_key:
                        raise SyntaxProblem(f"a mapping key that is a {_noun(kind)} is not supported (a Kubernetes object is JSON){_at(event)}")
                    expect_key = not expect_key
                stack.append((keys, expect_key))
                if kind is MappingStartEvent:
                    keys, expect_key = set(), True
                else:
                    keys = None
            elif kind is AliasEvent:
                needs_tree = True
                if not stack:
                    raise SyntaxProblem("the document is an alias, not a mapping")
                target = anchors.get(event.anchor)
                if keys is not None:
                    if expect_key:
                        if target is not None and not target[1]:
                            raise SyntaxProblem(f"a mapping key that is an alias of a collection is not supported{_at(event)}")
                        keys.add(_ALIAS_KEY)  # a key all the same: a merge key may not follow it
                    expect_key = not expect_key
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise SyntaxProblem("more than one document without a '---' separator")
                if after_end and not event.explicit:
                    raise SyntaxProblem("a document after a '...' line must start with '---'")
            elif kind is StreamEndEvent:
                return needs_tree
    except yaml.YAMLError as err:
        raise SyntaxProblem(f"invalid YAML: {describe_yaml_error(err, _decoded(raw))}") from None
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose:
            dispose()


_NUMERIC_START = frozenset("0123456789+-.")
_ALIAS_KEY = ("alias",)  # stands in `keys` for a key that is an alias (never equal to a scalar's text)


def _merge_key(event, keys: set) -> None:
    """A merge key must be the first key of its mapping, and carry no anchor.

    YAML (and PyYAML, which the rules read with) lets every key written in
    the mapping win over the merged ones; Helm's reader (go-yaml v2, through
    sigs.k8s.io/yaml) merges in place, so a `<<` written after a key
    overrides it (`kind: ConfigMap` then `<<: {kind: ResourceQuota}` is a
    ResourceQuota to Helm). Placed first, the two agree. An anchored `<<`
    could be used as a key through an alias, which go-yaml does not merge."""
    if keys:
        raise SyntaxProblem(f"a merge key '<<' after other keys of its mapping{_at(event)}: Helm lets it override "
                            "them, YAML does not; put '<<' first")
    if event.anchor is not None:
        raise SyntaxProblem(f"an anchor on a merge key '<<'{_at(event)} is not supported")


def _properties(event, kind: type, anchors: dict) -> bool:
    """Check a node's tag and anchor; return whether the tag asks for the
    document to be constructed (any explicit tag but !!str, !!map, !!seq)."""
    tag, anchor = event.tag, event.anchor
    if anchor is not None:
        # Defined again, an anchor names the new node from there on (YAML's rule, and Helm's
        # reader's): the document is composed (see `document.compose_text`), aliases follow.
        redefined = anchor in anchors
        anchors[anchor] = (event.start_mark.line + 1, kind is ScalarEvent)
        if redefined:
            return True
    if tag is None:
        return False
    if tag not in SAFE_TAGS:
        raise SyntaxProblem(f"tag {tag!r} is not allowed: safe YAML only{_at(event)}")
    if tag == _BINARY:
        # PyYAML reads bytes, Helm's go-yaml the decoded text: `kind: !!binary
        # UmVzb3VyY2VRdW90YQ==` is a ResourceQuota to Helm only, and a binary
        # key can stand for `kind` beside the one the rules read.
        raise SyntaxProblem(f"a !!binary node{_at(event)} is not supported: Helm reads it as its decoded text, "
                            "YAML as bytes; write the text (or base64 in a plain string)")
    if kind is ScalarEvent:
        return tag != _CORE + "str"
    if tag in _PAIRS_TAGS:
        # PyYAML builds a set (its keys only) or a list of pairs; Helm's go-yaml
        # a plain mapping or sequence: `metadata: !!set {name: cozystack-values}`
        # names a values Secret to Helm only.
        raise SyntaxProblem(f"tag {tag!r}{_at(event)} is not supported: Helm reads it as a plain "
                            f"{_noun(kind)}, YAML as !!{tag.rsplit(':', 1)[-1]}")
    if tag not in _COLLECTION_TAGS[kind]:
        raise SyntaxProblem(f"tag {tag!r} does not fit a {_noun(kind)}{_at(event)}")
    return tag not in _PLAIN_COLLECTION_TAGS


def _plain_may_fail(value: str) -> bool:
    """Whether a plain scalar might resolve to a value the safe constructor
    refuses: a timestamp-like one (`2001-13-45`), a number with underscores
    (`0x_` has no digits once they are dropped) or one too long for Python's
    int(). Cheap, so every scalar can be asked; a false yes costs a parse."""
    return bool(value) and value[0] in _NUMERIC_START and (len(value) > 4000 or value[4:5] == "-" or "_" in value)


def _noun(kind: type) -> str:
    return "mapping" if kind is MappingStartEvent else "sequence"


def _decoded(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def describe_yaml_error(err: Exception, text: str | None = None) -> str:
    """A YAML error in one line: what was being parsed, what went wrong, and
    where; a tab where a token should start is called a tab (`text` shows it)."""
    from cozyrender.yamlio import TAB_PROBLEM, is_tab_at

    problem = getattr(err, "problem", None)
    if not problem:
        return " ".join(str(err).split())
    context = getattr(err, "context", None)
    mark = getattr(err, "problem_mark", None)
    if mark is not None and "cannot start any token" in problem and (
            "'\\t'" in problem or is_tab_at(text, mark.line, mark.column)):
        return f"{TAB_PROBLEM} (line {mark.line + 1}, column {mark.column + 1})"
    text = f"{context}: {problem}" if context and context not in problem else problem
    return f"{text} (line {mark.line + 1}, column {mark.column + 1})" if mark else text


def _at(event) -> str:
    mark = event.start_mark
    return f" (line {mark.line + 1})" if mark is not None else ""
