"""Loading cluster state: files or folders of YAML/JSON as `kubectl get ... -o yaml|json`
writes them, or plain manifests of a GitOps repository.

JSON is parsed natively. YAML is read from the file in chunks by libyaml's
parser and its objects are built straight from the parser's events
(`cozyrender.yamlio.iter_documents`): the safe loader's results without the
node tree it composes first, so a 25 MB `kubectl get -o yaml` List loads at
the parser's pace in memory proportional to the objects (text the builder
leaves to the safe loader, anchors or explicit tags, is loaded the ordinary
way). The cyclic collector is paused while loading: the objects are acyclic,
and re-scanning them as they pile up cost more than building them. A load
that takes more than a couple of seconds says how far it is on stderr, when
stderr is a terminal.

`kind: List` (and `*List` kinds that kubectl writes) are flattened into their
items. Every error is one line naming the file; `Objects.source_of` names
the file each object came from (`describe` adds it to an error about one of
the objects loaded, a `ShapeError` from the readers).
"""

from __future__ import annotations

import json
import os
import sys
import time
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import yaml

from cozyrender.gcpause import collector_paused
from cozyrender.oserrors import describe
from cozyrender.yamlio import MAX_INT_DIGITS, DuplicateKeyError, yaml_problem, Unsupported, iter_documents, load_all_bounded, loads_json

YAML_SUFFIXES = (".yaml", ".yml", ".json")


class StateError(ValueError):
    """Unreadable state input; the message names the file."""


class Objects(list):
    """Loaded objects in file order, remembering which file each came from
    (so an error about an object can name its file). `excluded` lists the
    files `load_objects` was asked to leave out and found among its inputs."""

    def __init__(self) -> None:
        super().__init__()
        self._starts: list[int] = []
        self._sources: list[str] = []
        self.excluded: list[str] = []
        self.read: list[str] = []  # the files read, in order (the commands' `load_state` fills it)

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
        """`err` as one line, prefixed with the file of the object it names;
        an error about two objects (`err.other`, as for two different copies
        of one object) names the other's file too."""
        obj = getattr(err, "obj", None)
        source = self.source_of(obj) if isinstance(obj, Mapping) else None
        other = getattr(err, "other", None)
        other_source = self.source_of(other) if isinstance(other, Mapping) else None
        text = str(err)
        if other_source:
            text += f" (the other copy is in {other_source})"
        return f"{source}: {text}" if source else text


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
        raise StateError(f"{path}: cannot read: {describe(err)}") from None
    except UnicodeDecodeError as err:
        raise StateError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None


def iter_state_files(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """The files named, and the YAML/JSON files below the folders named (suffixes
    in any letter case), in name order."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in YAML_SUFFIXES)
        elif path.is_file():
            yield path
        else:
            raise StateError(f"{path}: no such file or folder")


def parse_documents(text: str, source: str) -> Objects:
    """Objects in one file's text, `List`s flattened; a non-object document is an error."""
    with collector_paused():
        docs = _json_documents(text, source) if text.lstrip().startswith(("{", "[")) else None
        if docs is None:
            docs = _yaml_documents(text, source, lambda: text)
        return _objects(docs, source)


def _json_documents(text: str, source: str) -> list | None:
    """The one JSON document of `text`, or None when it is not JSON (YAML then:
    flow style, or an error worded as YAML's)."""
    try:
        return [loads_json(text)]
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError) as err:  # a key twice, a number too long, absurd nesting
        raise StateError(f"{source}: unreadable JSON: {_value_problem(err)}") from None


def _value_problem(err: BaseException) -> str:
    if isinstance(err, RecursionError):
        return "nested too deeply"
    text = " ".join(str(err).split())
    if "digits" in text and "sys.set_int_max_str_digits" in text:  # Python's bound on integer text
        return f"a number is too long (at most {MAX_INT_DIGITS} digits)"
    return text


def _yaml_documents(stream, source: str, text_again, progress=None) -> list:
    """The YAML documents of `stream`, built from libyaml's events; what the
    builder leaves to the safe loader is loaded again from `text_again()`."""
    try:
        try:
            return list(iter_documents(stream, progress))
        except (Unsupported, DuplicateKeyError):  # a key twice: the safe loader also says where it was first
            return list(load_all_bounded(text_again()))
    except yaml.YAMLError as err:
        raise StateError(f"{source}: not valid YAML: {yaml_problem(err)}") from None
    except UnicodeDecodeError as err:
        raise StateError(f"{source}: not UTF-8 text ({err.reason})") from None
    except (ValueError, RecursionError) as err:
        raise StateError(f"{source}: unreadable YAML: {_value_problem(err)}") from None


def _objects(docs: list, source: str) -> Objects:
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


def load_file(path: str | os.PathLike, progress: Progress | None = None) -> Objects:
    """The objects of one file: JSON read whole, YAML streamed (see the module)."""
    source = str(path)
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise StateError(f"{source}: no such file") from None
    except OSError as err:
        raise StateError(f"{source}: cannot read: {describe(err)}") from None
    with handle:
        try:
            head = handle.read(4096)
        except UnicodeDecodeError as err:
            raise StateError(f"{source}: not UTF-8 text (byte {err.start}: {err.reason})") from None
        if head.lstrip().startswith(("{", "[")):
            if progress is not None:  # one call parses it all: say so up front when it is big
                progress.announce(source, os.fstat(handle.fileno()).st_size)
            text = head + _rest(handle, source)
            docs = _json_documents(text, source)
            if docs is None:
                docs = _yaml_documents(text, source, lambda: text)
            return _objects(docs, source)
        handle.seek(0)
        size = os.fstat(handle.fileno()).st_size
        report = progress.reporter(source, size) if progress is not None else None
        docs = _yaml_documents(handle, source, lambda: read_text(path), report)
    return _objects(docs, source)


def _rest(handle, source: str) -> str:
    try:
        return handle.read()
    except UnicodeDecodeError as err:
        raise StateError(f"{source}: not UTF-8 text ({err.reason})") from None


class Progress:
    """A progress line on stderr for loads that take a while, only when
    stderr is a terminal (never in CI logs or pipes): nothing for the first
    `delay` seconds, then `loading FILE: NN%` rewritten in place, cleared at
    the end."""

    ANNOUNCE_BYTES = 64 * 2**20

    def __init__(self, delay: float = 1.5, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = delay
        self.started = time.monotonic()
        self.shown = False

    def reporter(self, source: str, size: int):
        if not self.enabled:
            return None

        def report(position: int) -> None:
            if time.monotonic() - self.started < self.delay:
                return
            percent = min(99, position * 100 // size) if size else 0
            self.stream.write(f"\rloading {source}: {percent}%\x1b[K")
            self.stream.flush()
            self.shown = True

        return report

    def announce(self, source: str, size: int) -> None:
        """For a file parsed in one call (JSON): a line up front when it is
        large enough to take a couple of seconds (about 64 MiB)."""
        if self.enabled and size >= self.ANNOUNCE_BYTES:
            self.stream.write(f"\rloading {source} ({size / 2**20:.0f} MiB)\x1b[K")
            self.stream.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


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


def load_objects(paths: Iterable[str | os.PathLike], exclude: Iterable[str | os.PathLike] = ()) -> Objects:
    """Every object in the files and folders named, in file order. A file
    that is one of `exclude` (the same file, however named) is left out and
    listed in `excluded`."""
    objects = Objects()
    left_out = [Path(path) for path in exclude]
    progress = Progress()
    try:
        with collector_paused():
            for path in iter_state_files(paths):
                if any(_same_file(path, other) for other in left_out):
                    if str(path) not in objects.excluded:
                        objects.excluded.append(str(path))
                    continue
                loaded = load_file(path, progress)
                objects.add(str(path), loaded)
    finally:
        progress.done()
    return objects


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return False
