"""Drift: is the file's cozyrender entry what the chart and values give now?

Compared as Flux reads an entry (targets, and each patch's text parsed as
kustomize parses it), not as text: re-indenting the file is not drift, while a
changed value, or `|` turned into `|-` on values.yaml, is.
"""

from __future__ import annotations

import difflib

import yaml

from cozyrender.flux.objects import same
from cozyrender.flux.printing import format_post_renderers
from cozyrender.yamlio import SafeLoader


def comparable(post_renderers: list) -> list:
    """Entries as Flux reads them: targets and parsed patches (not their text layout)."""
    out = []
    for entry in post_renderers:
        patches = []
        for patch in ((entry or {}).get("kustomize") or {}).get("patches") or []:
            try:  # kustomize trims the text before parsing it
                body = yaml.load((patch.get("patch") or "").strip(), Loader=SafeLoader)
            except (yaml.YAMLError, AttributeError):
                body = patch
            patches.append([patch.get("target") if isinstance(patch, dict) else None, body])
        out.append(patches)
    return out


def in_sync(current: dict | None, expected: dict | None) -> bool:
    return same(comparable([current] if current else []), comparable([expected] if expected else []))


def unified_diff(path: str, current: dict | None, expected: dict | None) -> str:
    """A unified diff from the file's cozyrender entry to the expected one; empty when in sync."""
    if in_sync(current, expected):
        return ""
    return "".join(difflib.unified_diff(
        format_post_renderers([current] if current else []).splitlines(keepends=True),
        format_post_renderers([expected] if expected else []).splitlines(keepends=True),
        fromfile=f"{path} (cozyrender entry)", tofile="from the chart and values now"))
