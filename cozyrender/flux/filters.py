"""The filter: decide *what* to do with cozyrender's entry of a HelmRelease.

Given the HelmRelease as read and the entry derived now, the decision is one
`EntryPlan` (keep, insert, replace or remove, and where) with its warnings; it
reads no text and edits nothing. The editor (`editor.apply`) carries the plan
out as a text edit; the drift check renders it as a diff.
"""

from __future__ import annotations

from dataclasses import dataclass

from cozyrender.flux.drift import in_sync, unified_diff
from cozyrender.flux.helmrelease import HelmReleaseFile

KEEP, INSERT, REPLACE, REMOVE = "keep", "insert", "replace", "remove"


@dataclass(frozen=True)
class EntryPlan:
    """One edit of spec.postRenderers: `index` is the owned entry's position
    (replace, remove, or keep when there is one), `entry` the new entry
    (insert, replace); `current` the owned entry as the file has it."""

    action: str
    index: int | None
    entry: dict | None
    current: dict | None
    warnings: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.action != KEEP

    def diff(self, path: str) -> str:
        """The plan as a unified diff of the entry (empty when it keeps the file)."""
        return unified_diff(path, self.current, self.entry) if self.changes else ""


def plan_entry(hr: HelmReleaseFile, expected: list[dict]) -> EntryPlan:
    """The rule: cozyrender's entry (the one carrying MARKER) is replaced where
    it stands; a new entry goes first, since its patches were derived from
    Helm's own output, before any other post-renderer edits it; no patches, no
    entry. An entry that already reads as expected is kept, whatever its
    layout, so an up-to-date file is never rewritten."""
    owned = hr.owned()
    index, current = owned if owned else (None, None)
    entry = expected[0] if expected else None
    warnings: tuple[str, ...] = ()
    if index is not None and index != 0 and entry is not None:
        warnings = (f"{hr.path}: the cozyrender post-renderer is not first; its patches "
                    "expect Helm's output, not another post-renderer's",)
    if in_sync(current, entry):
        return EntryPlan(KEEP, index, current, current, warnings)
    if entry is None:
        return EntryPlan(REMOVE, index, None, current, warnings)
    if index is None:
        return EntryPlan(INSERT, None, entry, None, warnings)
    return EntryPlan(REPLACE, index, entry, current, warnings)
