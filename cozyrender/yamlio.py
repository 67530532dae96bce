"""The YAML reader and writer every module shares: libyaml's safe loader
where PyYAML was built with it (the same results, much faster), and a dumper
for the YAML cozyrender writes for people to read (block style, multi-line
strings as literal blocks, no line folding, keys in the order given)."""

from __future__ import annotations

import yaml

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"
INT_TAG = "tag:yaml.org,2002:int"


class ReadableDumper(yaml.SafeDumper):
    """Block style; a string with line breaks as a literal block."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


ReadableDumper.add_representer(str, _str)


def dump_readable(value: object, **options: object) -> str:
    """`value` as readable YAML (see ReadableDumper); `options` go to yaml.dump."""
    settings = {"sort_keys": False, "default_flow_style": False, "allow_unicode": True, "width": 1 << 16}
    return yaml.dump(value, Dumper=ReadableDumper, **{**settings, **options})


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


def _bounded_int(constructor, node) -> int:
    """YAML 1.1 integers as the safe loader reads them, but a sexagesimal one
    of more than MAX_SEXAGESIMAL_TEXT characters is refused (ValueError, as
    Python refuses an integer of more than 4,300 digits) before it is built."""
    value = node.value
    if ":" in value and len(value) > MAX_SEXAGESIMAL_TEXT:
        raise ValueError(f"a sexagesimal integer of {len(value)} characters has too many digits")
    return yaml.constructor.SafeConstructor.construct_yaml_int(constructor, node)


class BoundedLoader(SafeLoader):  # type: ignore[misc, valid-type]
    """The safe loader with the bounds above (see `load_all_bounded`)."""


BoundedLoader.add_constructor(INT_TAG, _bounded_int)


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
    text with the safe loader then), yaml.YAMLError for invalid YAML.
    `progress(position)` is called now and then with the character offset
    reached (for a progress line)."""
    events, resolvers, resolve = _stream_support()
    parser = SafeLoader(stream)  # libyaml's parser when present: only its events are used
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
                        value = resolve(value, candidates)
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
