"""Loading cluster state: files or folders of YAML/JSON as `kubectl get ... -o yaml|json`
writes them, or plain manifests of a GitOps repository.

JSON is parsed natively and YAML with libyaml's safe loader where present:
the fastest safe parser for each format. `kind: List` (and `*List` kinds that
kubectl writes) are flattened into their items. Every error is one line
naming the file; `Objects.describe` adds the file to an error about one of
the objects loaded (a `ShapeError` from the readers).
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import yaml

from cozyrender.yamlio import SafeLoader as _SafeLoader

YAML_SUFFIXES = (".yaml", ".yml", ".json")


class StateError(ValueError):
    """Unreadable state input; the message names the file."""


class Objects(list):
    """Loaded objects in file order, remembering which file each came from
    (so an error about an object can name its file)."""

    def __init__(self) -> None:
        super().__init__()
        self._starts: list[int] = []
        self._sources: list[str] = []

    def add(self, source: str, objects: Iterable[dict]) -> None:
        self._starts.append(len(self))
        self._sources.append(source)
        self.extend(objects)

    def source_of(self, obj: object) -> str | None:
        """The file `obj` (this very object) was read from, if it is one of these."""
        index = next((i for i, item in enumerate(self) if item is obj), None)
        if index is None:
            return None
        return self._sources[bisect_right(self._starts, index) - 1]

    def describe(self, err: Exception) -> str:
        """`err` as one line, prefixed with the file of the object it names."""
        obj = getattr(err, "obj", None)
        source = self.source_of(obj) if isinstance(obj, Mapping) else None
        return f"{source}: {err}" if source else str(err)


def describe(err: Exception, *loaded: Objects) -> str:
    """`err` as one line, naming the file of its object when one of `loaded` holds it."""
    for objects in loaded:
        message = objects.describe(err)
        if message != str(err):
            return message
    return str(err)


def read_text(path: str | os.PathLike) -> str:
    """A file's UTF-8 text; StateError naming the file when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise StateError(f"{path}: no such file") from None
    except OSError as err:
        raise StateError(f"{path}: cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise StateError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error as `line L, column C: problem (context)`, on one line
    (PyYAML's own text spans three, with a source excerpt)."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if problem is None:
        text = str(err)
    else:
        text = problem + (f" ({context})" if context else "")
    text = " ".join(text.split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {text}" if mark is not None else text


def iter_state_files(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """The files named, and the YAML/JSON files below the folders named, in name order."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)
        elif path.is_file():
            yield path
        else:
            raise StateError(f"{path}: no such file or folder")


def parse_documents(text: str, source: str) -> Objects:
    """Objects in one file's text, `List`s flattened; a non-object document is an error."""
    docs = None
    if text.lstrip().startswith(("{", "[")):
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError:
            pass  # YAML, then (flow style), or an error worded as YAML's
    if docs is None:
        try:
            docs = list(yaml.load_all(text, Loader=_SafeLoader))
        except yaml.YAMLError as err:
            raise StateError(f"{source}: not valid YAML: {yaml_problem(err)}") from None
    objects: list[dict] = []
    for index, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if isinstance(doc, list):
            items = doc
        elif isinstance(doc, dict):
            items = [doc]
        else:
            raise StateError(f"{source}: document {index} is not an object")
        for item in items:
            objects.extend(_flatten(item, f"{source}: document {index}"))
    loaded = Objects()
    loaded.add(source, objects)
    return loaded


def _flatten(obj: object, where: str) -> Iterator[dict]:
    if not isinstance(obj, dict):
        raise StateError(f"{where}: an item is not an object")
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in obj:
        items = obj["items"]
        if items is None:
            return
        if not isinstance(items, list):
            # Ignoring it would silently drop every object the list should hold.
            raise StateError(f"{where}: {kind}'s items is not a list (got {items!r:.40})")
        for item in items:
            yield from _flatten(item, where)
    else:
        yield obj


def load_objects(paths: Iterable[str | os.PathLike]) -> Objects:
    """Every object in the files and folders named, in file order."""
    objects = Objects()
    for path in iter_state_files(paths):
        objects.add(str(path), parse_documents(read_text(path), str(path)))
    return objects
