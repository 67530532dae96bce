"""Kubernetes objects of a rendered release, keyed as kustomize keys them.

Patches are derived by comparing objects before and after the post-render, so
both sides must be read the same way: every document of the stream (and every
item of a `kind: List`, which kustomize reads as objects), keyed by apiVersion,
kind, namespace and name, and compared as YAML data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from cozyrender.flux.errors import FluxError
from cozyrender.yamlio import Constructor, SafeLoader, first_duplicate_key, yaml_problem

ObjectKey = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" if none), name


def parse_objects(text: str | bytes, what: str = "stream", documents: list | None = None) -> dict[ObjectKey, dict]:
    """Objects of a multi-document stream by key; `kind: List` items count as
    objects, as kustomize reads them. Two objects with one key are an error:
    no patch could tell them apart. (`documents`: the stream already read,
    `load_documents(text)`.)"""
    try:
        if documents is None:
            documents = load_documents(text)
        documents = [d for d in documents if d is not None]
    except yaml.YAMLError as err:
        raise FluxError(f"{what} is not YAML: {yaml_problem(err)}") from None
    objects: dict[ObjectKey, dict] = {}
    for document in documents:
        if not isinstance(document, dict):
            raise FluxError(f"{what}: a document is not a mapping")
        items = document.get("items") if document.get("kind") == "List" else None
        for obj in (items if isinstance(items, list) else [document]):
            if not isinstance(obj, dict):
                raise FluxError(f"{what}: a List item is not a mapping")
            key = object_key(obj)
            if key in objects:
                raise FluxError(f"{what}: two objects are {describe(key)}")
            objects[key] = obj
    return objects


_SEPARATOR = re.compile(r"^---(?:[ \t]|$)", re.M)
_OTHER_MARKERS = re.compile(r"^(?:%|\.\.\.)", re.M)


def _documents_text(text: str) -> list[str] | None:
    """The stream's documents as text: split at its `---` lines (a line
    starting `---` ends any scalar, or is refused inside a quoted one, so
    YAML splits there too); None for a stream with directives or `...`."""
    if _OTHER_MARKERS.search(text):
        return None
    starts = [m.start() for m in _SEPARATOR.finditer(text)]
    bounds = ([0] if not starts or starts[0] != 0 else []) + starts + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _holds_document(piece: str) -> bool:
    """Whether a piece of a stream (as `_documents_text` cuts it) is a
    document: it starts with `---`, or holds more than comments and blanks."""
    if piece.startswith("---"):
        return True
    return any(line.strip() and not line.lstrip().startswith("#") for line in piece.splitlines())


def documents_like(text: str | bytes, other: str | bytes, other_documents: list) -> list:
    """`load_documents(text)`, where `other` is a stream already read
    (`other_documents`): each document of `text` whose text is a document
    of `other`, byte for byte, is that one's value (not read again: a
    post-render leaves most of a release as rendered); the rest are read
    together. Whenever the two streams cannot be cut into documents that
    exactly, all of `text` is read."""
    mine_text = text.decode() if isinstance(text, bytes) else text
    other_text = other.decode() if isinstance(other, bytes) else other
    mine, theirs = _documents_text(mine_text), _documents_text(other_text)
    if mine is not None and theirs is not None:
        theirs = [piece for piece in theirs if _holds_document(piece)]
        mine = [piece for piece in mine if _holds_document(piece)]
        if len(theirs) == len(other_documents):
            known = dict(zip(theirs, other_documents))
            fresh = [piece for piece in mine if piece not in known]
            if not fresh or fresh[0].startswith("---"):
                read = load_documents("".join(fresh)) if fresh else []
                if len(read) == len(fresh):
                    values = iter(read)
                    return [known[piece] if piece in known else next(values) for piece in mine]
    return load_documents(text)


_PREFIX = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ = _PREFIX + "str", _PREFIX + "map", _PREFIX + "seq"
_BY_CONSTRUCTOR = frozenset(_PREFIX + tag for tag in ("null", "bool", "int", "float"))


class _Unusual(Exception):
    """A node the quick reading leaves to PyYAML's constructor (any other
    tag, a merge key, a recursive alias, an error)."""


def load_documents(text: str | bytes) -> list:
    """`list(yaml.load_all(text, Loader=SafeLoader))`, the same values and
    the same errors, in a third of the time: libyaml composes the nodes and
    plain maps, lists and strings are built from them directly (PyYAML's
    constructor spends most of a rendered release's reading on them).
    Anything else (another tag, a merge key, a recursive alias, a node
    SafeLoader refuses) reads the whole stream again through SafeLoader, so
    the answer is always SafeLoader's."""
    try:
        nodes = list(yaml.compose_all(text, Loader=SafeLoader))
        constructor = Constructor()
        memo: dict[int, object] = {}
        busy: set[int] = set()
        return [_value(node, constructor, memo, busy) if node is not None else None for node in nodes]
    except (_Unusual, yaml.YAMLError):
        return list(yaml.load_all(text, Loader=SafeLoader))


def _value(node, constructor, memo: dict[int, object], busy: set[int]) -> object:
    tag = node.tag
    if type(node) is ScalarNode:
        if tag == _STR:
            return node.value
        if tag in _BY_CONSTRUCTOR:
            try:
                return constructor.construct_object(node, deep=True)
            except Exception:  # noqa: BLE001 - SafeLoader words it
                raise _Unusual from None
        raise _Unusual
    key = id(node)
    if key in memo:  # an alias: the same object, as PyYAML gives it
        return memo[key]
    if key in busy:
        raise _Unusual  # recursive
    busy.add(key)
    if type(node) is MappingNode and tag == _MAP:
        if first_duplicate_key(node) is not None:
            raise _Unusual
        out: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _PREFIX + "merge":
                raise _Unusual
            name = _value(key_node, constructor, memo, busy)
            try:
                hash(name)
            except TypeError:
                raise _Unusual from None
            out[name] = _value(value_node, constructor, memo, busy)
        result: object = out
    elif type(node) is SequenceNode and tag == _SEQ:
        result = [_value(item, constructor, memo, busy) for item in node.value]
    else:
        raise _Unusual
    busy.discard(key)
    memo[key] = result
    return result


def object_key(obj: Mapping) -> ObjectKey:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""),
            str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def describe(key: ObjectKey) -> str:
    _, kind, namespace, name = key
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def sort_key(key: ObjectKey) -> tuple[str, str, str, str]:
    """Patches are listed by kind, namespace, name (then apiVersion): stable across runs."""
    api, kind, namespace, name = key
    return (kind, namespace, name, api)


def same(a: object, b: object) -> bool:
    """Equal as YAML data: true is not 1, nor 1.0 (Python's == says they are),
    since kustomize and the API server keep the distinction."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)  # type: ignore[union-attr]
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    return a == b
