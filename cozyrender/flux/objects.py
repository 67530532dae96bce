"""Kubernetes objects of a rendered release, keyed as kustomize keys them.

Patches are derived by comparing objects before and after the post-render, so
both sides must be read the same way: every document of the stream (and every
item of a `kind: List`, which kustomize reads as objects), keyed by apiVersion,
kind, namespace and name, and compared as YAML data.
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from cozyrender.flux.errors import FluxError
from cozyrender.yamlio import SafeLoader, yaml_problem

ObjectKey = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" if none), name


def parse_objects(text: str | bytes, what: str = "stream") -> dict[ObjectKey, dict]:
    """Objects of a multi-document stream by key; `kind: List` items count as
    objects, as kustomize reads them. Two objects with one key are an error:
    no patch could tell them apart."""
    try:
        documents = [d for d in yaml.load_all(text, Loader=SafeLoader) if d is not None]
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
