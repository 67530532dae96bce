"""The YAML reader and writer every module shares: libyaml's safe loader
where PyYAML was built with it (the same results, much faster), and a dumper
for the YAML cozyrender writes for people to read (block style, multi-line
strings as literal blocks, no line folding, keys in the order given).

One rule for every reader, post-render's included: **a mapping holds each
key once.** Keys are compared by their text, as Kubernetes compares them
once YAML is JSON (`1` and `"1"` are one key); a merge key `<<` is a key
like any other. PyYAML (and JSON's `json.loads`) would keep the last value
silently, so a GPUClass written with `kind:` twice, or two files run
together without `---`, would be read as something nobody wrote. Every
reader here refuses instead: `SafeLoader` (a `DuplicateKeyError`, a YAML
error with the key's line), the streaming builder (`iter_documents`),
`loads_json`, and post-render's event check (`duplicate_key_problem` is the
wording all of them share)."""

from __future__ import annotations

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, ScalarNode

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"
INT_TAG = "tag:yaml.org,2002:int"
# Python reads at most this many digits into an int (CVE-2020-10735); a longer
# number is refused with these words, never Python's.
MAX_INT_DIGITS = 4300


TAB_PROBLEM = "a tab character: YAML indents with spaces, never tabs (replace the tab with spaces)"


def is_tab_at(text: str | None, line: int, column: int | None = None) -> bool:
    """Whether the 0-based `line` of `text` holds a tab at `column` (0-based),
    or, without a column, in its indentation: where a scanner stopped on a
    character that cannot start any token, a tab is the usual cause, and
    the parsers' wording never says so."""
    if text is None or line < 0:
        return False
    lines = text.split("\n")
    if line >= len(lines):
        return False
    row = lines[line]
    if column is not None and column < len(row) and row[column] == "\t":
        return True
    indent = row[: len(row) - len(row.lstrip(" \t"))]
    return "\t" in indent


def yaml_problem(err: yaml.YAMLError, line_offset: int = 0, text: str | None = None) -> str:
    """A YAML error as `line L, column C: problem (context)`, on one line
    (PyYAML's own text spans three, with a source excerpt); `line_offset`
    lines are added where the text parsed was part of a file. A tab where
    a token should start is called a tab (the parser's `text`, when given,
    or the mark's own buffer shows it)."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if mark is not None and problem and "cannot start any token" in problem and (
            "'\\t'" in problem or is_tab_at(text if text is not None else getattr(mark, "buffer", None),
                                             mark.line, mark.column)):
        return f"line {mark.line + 1 + line_offset}, column {mark.column + 1}: {TAB_PROBLEM}"
    if isinstance(err, DuplicateKeyError):
        text = duplicate_key_problem(err.key) + (
            f" (first at line {err.first_line + line_offset})" if err.first_line is not None else "")
    elif problem is None:
        text = str(err)
    else:
        text = problem + (f" ({context})" if context else "")
    text = " ".join(text.split())
    return f"line {mark.line + 1 + line_offset}, column {mark.column + 1}: {text}" if mark is not None else text


# -- one rule for mapping keys -------------------------------------------------

def duplicate_key_problem(key: str) -> str:
    """How every reader words a key written twice in one mapping."""
    return f"duplicate key {key!r}"


class DuplicateKeyError(ConstructorError):
    """A mapping holds a key twice: a YAML error whose `problem_mark` is the
    second key's position (readers word it as they word any YAML error)."""

    def __init__(self, key: str, mark, first_line: int | None = None) -> None:
        where = f" (first at line {first_line})" if first_line is not None else ""
        super().__init__(None, None, duplicate_key_problem(key) + where, mark)
        self.key = key
        self.first_line = first_line


def first_duplicate_key(node: MappingNode) -> tuple[ScalarNode, ScalarNode] | None:
    """The first scalar key of a composed mapping that repeats an earlier
    one's text, with that earlier key; None when every key is unique."""
    seen: dict[str, ScalarNode] = {}
    for key, _ in node.value:
        if isinstance(key, ScalarNode):
            if key.value in seen:
                return seen[key.value], key
            seen[key.value] = key
    return None


def check_unique_keys(node: MappingNode) -> None:
    """DuplicateKeyError for a composed mapping holding a key twice."""
    found = first_duplicate_key(node)
    if found is not None:
        first, second = found
        raise DuplicateKeyError(second.value, second.start_mark, first.start_mark.line + 1)


class SafeLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader (libyaml's parser when present), refusing a mapping
    that holds a key twice and integers longer than MAX_INT_DIGITS digits,
    in cozyrender's words."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            check_unique_keys(node)
        return super().construct_mapping(node, deep)


def _checked_int(constructor, node) -> int:
    """A YAML 1.1 integer as the safe loader reads it; one of more than
    MAX_INT_DIGITS digits (or a sexagesimal one past MAX_SEXAGESIMAL_TEXT
    characters, which would take quadratic time to build) is a YAML error
    in cozyrender's words, before Python's own limit speaks."""
    _int_bound(node)
    return yaml.constructor.SafeConstructor.construct_yaml_int(constructor, node)


def _int_bound(node: ScalarNode) -> None:
    value = node.value
    digits = sum(ch.isdigit() for ch in value) if len(value) > MAX_INT_DIGITS else 0
    if digits > MAX_INT_DIGITS or (":" in value and len(value) > MAX_SEXAGESIMAL_TEXT):
        raise ConstructorError(None, None, f"a number of {len(value)} characters is too long "
                               f"(at most {MAX_INT_DIGITS} digits)", node.start_mark)


SafeLoader.add_constructor(INT_TAG, _checked_int)


class Constructor(yaml.constructor.SafeConstructor):
    """The safe constructor alone (for node trees composed elsewhere), with
    SafeLoader's integers."""


Constructor.add_constructor(INT_TAG, _checked_int)


def check_keys(text: str) -> None:
    """A YAML error (DuplicateKeyError, or a ConstructorError for an integer
    of more than MAX_INT_DIGITS digits) when the YAML `text` breaks a rule
    every cozyrender reader keeps; text that is not YAML is left to whoever
    parses it next (Helm's values reader, which keeps the last of two keys
    silently and reads any number)."""
    try:
        nodes = list(yaml.compose_all(text, Loader=_BaseLoader))
    except yaml.YAMLError:
        return
    seen: set[int] = set()
    stack = [node for node in nodes if node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            check_unique_keys(node)
            stack.extend(item for pair in node.value for item in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif node.tag == INT_TAG:
            _int_bound(node)


class JSONProblem(ValueError):
    """Unreadable JSON, in cozyrender's words, with a line where known."""


def loads_json(text: str) -> object:
    """`json.loads(text)`, but a key written twice in one object, a number
    of more than MAX_INT_DIGITS digits and absurd nesting are JSONProblems
    worded like every other reader's (`line N, column M: ...`);
    json.JSONDecodeError for text that is not JSON."""

    import json  # not at the top: post-render (Helm's hot path) imports this module, never JSON

    def pairs(items: list) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                raise JSONProblem(_json_duplicate_where(text, key) + duplicate_key_problem(key))
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise JSONProblem("nested too deeply") from None
    except ValueError as err:
        if isinstance(err, JSONProblem):
            raise
        if "digits" in str(err):  # Python's bound on integer text
            raise JSONProblem(f"a number is too long (at most {MAX_INT_DIGITS} digits)") from None
        raise JSONProblem(" ".join(str(err).split())) from None


def _json_duplicate_where(text: str, key: str) -> str:
    """`line N, column M: ` of the second `key` in an object, found by
    composing the JSON as YAML (JSON is YAML's flow style); empty when that
    reading does not find it."""
    try:
        for node in yaml.compose_all(text, Loader=_BaseLoader):
            stack = [node]
            while stack:
                current = stack.pop()
                if isinstance(current, MappingNode):
                    found = first_duplicate_key(current)
                    if found is not None and found[1].value == key:
                        mark = found[1].start_mark
                        return f"line {mark.line + 1}, column {mark.column + 1}: "
                    stack.extend(item for pair in current.value for item in pair)
                elif isinstance(current, yaml.SequenceNode):
                    stack.extend(current.value)
    except yaml.YAMLError:
        pass
    return ""


class ReadableDumper(yaml.SafeDumper):
    """Block style; a string with line breaks as a literal block."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


ReadableDumper.add_representer(str, _str)


class FastReadableDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """ReadableDumper's representation written by libyaml's emitter (where
    PyYAML has it, as `_BaseLoader` reads): the same values, about five
    times faster; the text may differ from the Python emitter's in how an
    odd string is quoted, and libyaml's reads back exactly."""


FastReadableDumper.add_representer(str, _str)

_READABLE = {"sort_keys": False, "default_flow_style": False, "allow_unicode": True, "width": 1 << 16}


def dump_readable(value: object, **options: object) -> str:
    """`value` as readable YAML (see ReadableDumper); `options` go to yaml.dump."""
    return yaml.dump(value, Dumper=ReadableDumper, **{**_READABLE, **options})


def dump_readable_fast(value: object) -> str:
    """`dump_readable` through libyaml (Flux's patches): the same values,
    written faster. libyaml escapes a character beyond the Basic
    Multilingual Plane (an emoji) and then writes no literal block, so a
    text holding one is written by `dump_readable`, as before, unless that
    one does not read back as the value (PyYAML's emitter turns U+0085 in a
    string into a space)."""
    text = yaml.dump(value, Dumper=FastReadableDumper, **_READABLE)
    if "\\U" not in text:
        return text
    readable = dump_readable(value)
    return readable if yaml.load(readable, Loader=SafeLoader) == value else text


# -- bounded loads -------------------------------------------------------------
#
# Input read for a check may be written by a tenant (a GitOps repository, a
# pod's annotations), so what it costs to read must not grow faster than its
# text. Two YAML constructs do: a sexagesimal integer (`1:59:59:...`, YAML
# 1.1) is built digit group by digit group on an ever larger number, which
# is quadratic in its length; and aliases may refer to collections holding
# aliases, so a few hundred bytes expand to a billion nodes (whoever walks
# the objects, compares two copies or prints a value, walks them all), or
# to a structure that contains itself.

# A sexagesimal integer longer than this has more than Python's 4,300 digits
# (each `:NN` group adds about 1.8): refused as every longer number is.
MAX_SEXAGESIMAL_TEXT = 4300
# What aliases may add to one document, in nodes, beyond the document's own.
MAX_ALIAS_NODES = 1_000_000


_bounded_int = _checked_int  # SafeLoader's integers: the bounds above, in cozyrender's words


class BoundedLoader(SafeLoader):  # type: ignore[misc, valid-type]
    """The safe loader with the alias bound above (see `load_all_bounded`)."""


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def check_alias_expansion(root) -> None:
    """ValueError when the composed document `root` holds a node that
    contains itself through an alias, or when its aliases add more than
    MAX_ALIAS_NODES nodes to it once expanded. Linear in its distinct nodes."""
    cap = 2**62  # past any document's own node count: sizes stay small numbers
    sizes: dict[int, int] = {}  # id(node) -> its expanded size (at most `cap`)
    open_nodes: set[int] = set()  # the path being walked
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = min(1 + sum(sizes[id(child)] for child in _children(node)), cap)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise ValueError(f"line {node.start_mark.line + 1}: an alias refers to a collection that contains it")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    if sizes[id(root)] - len(sizes) > MAX_ALIAS_NODES:
        raise ValueError(f"aliases expand the document to more than {MAX_ALIAS_NODES:,} nodes beyond its own")


def load_all_bounded(text: str):
    """The documents of `text` as `yaml.load_all(text, SafeLoader)` gives
    them, with the bounds above: ValueError for a sexagesimal integer past
    MAX_SEXAGESIMAL_TEXT, a recursive alias, or aliases expanding a document
    by more than MAX_ALIAS_NODES nodes; yaml.YAMLError for invalid YAML."""
    loader = BoundedLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                check_alias_expansion(node)
            yield loader.construct_document(node)
    finally:
        loader.dispose()


# -- streaming loads ---------------------------------------------------------
#
# `yaml.load_all(stream, CSafeLoader)` composes each document into a tree of
# nodes (in C) before constructing any Python object (in Python): for a
# `kubectl get -o yaml` List of 25 MB that is one document, a node tree of
# a gigabyte, and the cyclic collector re-scanning it as it grows. The
# builder below reads libyaml's events instead and builds the objects
# directly, one event at a time: memory is the objects themselves, and the
# results are the safe loader's (same parser, same implicit resolution, the
# same constructors for non-string scalars). What it does not build itself
# (anchors and aliases, explicit tags, merge keys, complex keys) it leaves to
# the safe loader: the caller loads that text again the ordinary way.


class Unsupported(Exception):
    """A construct the streaming builder leaves to the safe loader."""


def _stream_support():
    from yaml import events
    from yaml.constructor import SafeConstructor
    from yaml.nodes import ScalarNode
    from yaml.resolver import Resolver

    constructor = SafeConstructor()
    resolvers = Resolver.yaml_implicit_resolvers
    if resolvers.get(None):  # wildcard resolvers: none in PyYAML's safe resolver
        raise ImportError("unexpected wildcard implicit resolvers")
    constructors = dict(SafeConstructor.yaml_constructors, **{INT_TAG: _bounded_int})

    seen: dict[str, object] = {}  # plain scalars repeat (`true`, `0`, `tenant-a`): resolve each once

    def resolve(value: str, candidates: list) -> object:
        """A plain scalar as the safe loader constructs it (every value it
        constructs for a scalar is immutable, so one may be shared)."""
        if value in seen:
            return seen[value]
        result: object = value
        for tag, regexp in candidates:
            if regexp.match(value):
                if tag == MERGE_TAG or tag not in constructors:
                    raise Unsupported(tag)
                result = constructors[tag](constructor, ScalarNode(tag, value))
                break
        if len(seen) >= 4096:
            seen.clear()
        seen[value] = result
        return result

    return events, resolvers, resolve


_NO_KEY = object()


def iter_documents(stream, progress=None):
    """The documents of a YAML stream (text, or a text file object read in
    chunks) as `yaml.load_all(stream, Loader=SafeLoader)` would give them,
    built from libyaml's events without a node tree. Raises Unsupported for
    anchors, aliases, explicit tags, merge keys and complex keys (load the
    text with the safe loader then), yaml.YAMLError for invalid YAML
    (a DuplicateKeyError for a key written twice in one mapping; a key that
    is not a string is left to the safe loader, which compares keys' text).
    `progress(position)` is called now and then with the character offset
    reached (for a progress line)."""
    events, resolvers, resolve = _stream_support()
    parser = _BaseLoader(stream)  # libyaml's parser when present: only its events are used
    try:
        yield from _documents(parser, events, resolvers, resolve, progress)
    finally:
        parser.dispose()


def _documents(parser, events, resolvers, resolve, progress):
    get_event = parser.get_event
    scalar_event, mapping_start, sequence_start = events.ScalarEvent, events.MappingStartEvent, events.SequenceStartEvent
    collection_end = (events.MappingEndEvent, events.SequenceEndEvent)
    document_start, document_end, stream_end = events.DocumentStartEvent, events.DocumentEndEvent, events.StreamEndEvent
    get_resolvers = resolvers.get
    get_event()  # StreamStartEvent
    counted = 0
    while True:
        event = get_event()
        if event.__class__ is stream_end:
            return
        if event.__class__ is not document_start:
            raise Unsupported(type(event).__name__)
        stack: list = []  # open collections, innermost last
        keys: list = []   # per open collection: a mapping's pending key (_NO_KEY when none)
        document = None
        while True:
            event = get_event()
            cls = event.__class__
            if cls is scalar_event:
                if event.anchor is not None or event.tag is not None:
                    raise Unsupported("anchor or tag")
                value = event.value
                if event.implicit[0]:  # plain: resolve as the safe loader does
                    candidates = get_resolvers(value[:1])
                    if candidates:
                        try:
                            value = resolve(value, candidates)
                        except ConstructorError as err:  # its node had no position: give the event's
                            raise ConstructorError(None, None, err.problem, event.start_mark) from None
                opened = False
            elif cls is mapping_start or cls is sequence_start:
                if event.anchor is not None or (event.tag is not None and not event.implicit):
                    raise Unsupported("anchor or tag")
                value = {} if cls is mapping_start else []
                opened = True
            elif cls in collection_end:
                stack.pop()
                keys.pop()
                continue
            elif cls is document_end:
                break
            else:  # an alias
                raise Unsupported(cls.__name__)
            if stack:
                top = stack[-1]
                if top.__class__ is list:
                    top.append(value)
                else:
                    key = keys[-1]
                    if key is _NO_KEY:
                        if opened:
                            raise Unsupported("complex key")
                        if value.__class__ is not str:  # 1, true, ~: compared by their text there
                            raise Unsupported("a key that is not a string")
                        if value in top:
                            raise DuplicateKeyError(value, event.start_mark)
                        keys[-1] = value
                    else:
                        top[key] = value
                        keys[-1] = _NO_KEY
            else:
                document = value
            if opened:
                stack.append(value)
                keys.append(_NO_KEY)
                counted += 1
                if progress is not None and not counted & 0x3FFF:
                    progress(event.start_mark.index)
        yield document
