"""Loading cluster state: files or folders of YAML/JSON as `kubectl get ... -o yaml|json`
writes them, or plain manifests of a GitOps repository.

JSON is parsed natively and YAML with libyaml's safe loader where present:
the fastest safe parser for each format. `kind: List` (and `*List` kinds that
kubectl writes) are flattened into their items.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

try:
    _SafeLoader = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _SafeLoader = yaml.SafeLoader

YAML_SUFFIXES = (".yaml", ".yml", ".json")


class StateError(ValueError):
    """Unreadable state input; the message names the file."""


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


def parse_documents(text: str, source: str) -> list[dict]:
    """Objects in one file's text, `List`s flattened; a non-object document is an error."""
    stripped = text.lstrip()
    try:
        if stripped.startswith("{") or stripped.startswith("["):
            try:
                docs = [json.loads(text)]
            except json.JSONDecodeError:
                docs = list(yaml.load_all(text, Loader=_SafeLoader))
        else:
            docs = list(yaml.load_all(text, Loader=_SafeLoader))
    except yaml.YAMLError as err:
        raise StateError(f"{source}: not valid YAML: {err}") from None
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
    return objects


def _flatten(obj: object, where: str) -> Iterator[dict]:
    if not isinstance(obj, dict):
        raise StateError(f"{where}: an item is not an object")
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        for item in obj["items"]:
            yield from _flatten(item, where)
    else:
        yield obj


def load_objects(paths: Iterable[str | os.PathLike]) -> list[dict]:
    """Every object in the files and folders named, in file order."""
    objects: list[dict] = []
    for path in iter_state_files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise StateError(f"{path}: cannot read: {err}") from None
        objects.extend(parse_documents(text, str(path)))
    return objects
