"""Expected-file text: one document per object, ordered by kind/namespace/name,
so diffs are stable and name the object; and the per-object diff."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from cozyrender import validate
from cozyrender.yamlio import SafeLoader, dump_readable

_Loader = SafeLoader

def _sort_key(obj: Any) -> tuple[str, str, str]:
    if not isinstance(obj, Mapping):
        return ("", "", "")
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return (str(obj.get("kind") or ""), str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""))


def normalise(text: str) -> list[tuple[str, str]]:
    """[(object id, normalised YAML)] for a stream, ordered by kind/namespace/name.
    Empty and comment-only documents are left out; a repeated id gets a #n suffix."""
    return normalise_objects(yaml.load_all(text, Loader=_Loader))


def normalise_objects(documents: Iterable[Any]) -> list[tuple[str, str]]:
    """`normalise` for documents already parsed."""
    objects = sorted((o for o in documents if o is not None), key=_sort_key)
    out: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for obj in objects:
        oid = validate.object_id(obj) if isinstance(obj, Mapping) else "?"
        seen[oid] = seen.get(oid, 0) + 1
        if seen[oid] > 1:
            oid = f"{oid}#{seen[oid]}"
        body = dump_readable(obj, width=1 << 30)
        out.append((oid, body))
    return out


def format_normalised(objects: list[tuple[str, str]]) -> str:
    """The expected-file text: each object under a `---` and a comment naming it."""
    return "".join(f"---\n# {oid}\n{body}" for oid, body in objects)


def diff_objects(expected: list[tuple[str, str]], actual: list[tuple[str, str]], label: str
                 ) -> list[str]:
    """One unified diff per object that differs, missing or unexpected, named kind/namespace/name."""
    want, got = dict(expected), dict(actual)
    problems = []
    for oid in sorted(want.keys() | got.keys()):
        if want.get(oid) == got.get(oid):
            continue
        what = ("missing object" if oid not in got else
                "unexpected object" if oid not in want else "object differs")
        diff = difflib.unified_diff(
            want.get(oid, "").splitlines(keepends=True), got.get(oid, "").splitlines(keepends=True),
            fromfile=f"expected {label}: {oid}", tofile=f"rendered {label}: {oid}")
        problems.append(f"{label}: {what}: {oid}\n{''.join(diff)}")
    return problems
