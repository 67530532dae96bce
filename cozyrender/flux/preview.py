"""What Flux injection's first reconcile would change, release by release (pure).

Rule: a tenant release whose injected postRenderers differ from what it
carries now is written by the loop (or at its next write, by /mutate), and
helm-controller then upgrades it once with the entry: the changes are exactly
what the entry's patches do. Each patch is read for its effect (the `test`
guards change nothing): a strategic-merge `$patch: delete` deletes the object;
JSON6902 `add`/`replace` under /metadata/labels writes labels, `remove` under
/metadata/annotations removes annotations, `remove` under /spec/hard removes a
quota key, and a change of a Secret's values.yaml rewrites the values the next
level down reads. A release whose entry cannot be computed is reported with
the reason: the webhook refuses its next write (fail closed).

`changes(entry)` reads one entry; `preview(release, current, wanted)` one release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import yaml

from cozyrender.flux.patches import is_owned


@dataclass(frozen=True)
class Change:
    action: str  # delete, label, remove-annotation, remove-quota-key, rewrite-values
    kind: str
    namespace: str
    name: str
    detail: str = ""  # the label (key=value), annotation or quota key; the values' field

    def line(self) -> str:
        where = f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"
        return f"{self.action:<18} {where}{': ' + self.detail if self.detail else ''}"


@dataclass
class ReleasePreview:
    namespace: str
    name: str
    state: str  # "writes" (the first reconcile upgrades it), "current", "refused" (cannot be computed)
    changes: list[Change] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict:
        return {"namespace": self.namespace, "name": self.name, "state": self.state, "reason": self.reason,
                "changes": [asdict(change) for change in self.changes]}


def _token(text: str) -> str:
    return text.replace("~1", "/").replace("~0", "~")


def changes(entry: Mapping) -> list[Change]:
    """The effects of one kustomize post-renderer entry's patches, in order."""
    found: list[Change] = []
    for item in (entry.get("kustomize") or {}).get("patches") or []:
        target = item.get("target") or {}
        kind, name, namespace = (str(target.get(k) or "") for k in ("kind", "name", "namespace"))
        patch = yaml.safe_load(item.get("patch") or "")
        if isinstance(patch, Mapping) and patch.get("$patch") == "delete":
            meta = patch.get("metadata") or {}
            found.append(Change("delete", str(patch.get("kind") or kind), str(meta.get("namespace") or namespace),
                                str(meta.get("name") or name)))
            continue
        for op in patch if isinstance(patch, list) else []:
            path, verb = str(op.get("path") or ""), op.get("op")
            if verb in ("add", "replace") and path.startswith("/metadata/labels/"):
                found.append(Change("label", kind, namespace, name,
                                    f"{_token(path.rsplit('/', 1)[1])}={op.get('value')}"))
            elif verb in ("add", "replace") and path == "/metadata/labels" and isinstance(op.get("value"), Mapping):
                found.extend(Change("label", kind, namespace, name, f"{k}={v}") for k, v in op["value"].items())
            elif verb == "remove" and path.startswith("/metadata/annotations/"):
                found.append(Change("remove-annotation", kind, namespace, name, _token(path.rsplit("/", 1)[1])))
            elif verb == "remove" and path == "/metadata/annotations":
                found.append(Change("remove-annotation", kind, namespace, name, "all"))
            elif verb == "remove" and path.startswith("/spec/hard/"):
                found.append(Change("remove-quota-key", kind, namespace, name, _token(path.rsplit("/", 1)[1])))
            elif verb in ("add", "replace") and path.endswith("/values.yaml"):
                found.append(Change("rewrite-values", kind, namespace, name, "values.yaml"))
    return found


def preview(namespace: str, name: str, current: object, wanted: Sequence | None, reason: str = "") -> ReleasePreview:
    """One release: `current` its spec.postRenderers now, `wanted` after injection (None: cannot be computed)."""
    if wanted is None:
        return ReleasePreview(namespace, name, "refused", reason=reason)
    if (current or []) == list(wanted):
        return ReleasePreview(namespace, name, "current")
    ours = [entry for entry in wanted if is_owned(entry)]
    return ReleasePreview(namespace, name, "writes", [c for entry in ours for c in changes(entry)])


def text(previews: Sequence[ReleasePreview]) -> str:
    lines = []
    for item in previews:
        head = f"HelmRelease {item.namespace}/{item.name}: "
        if item.state == "current":
            lines.append(head + "current (its postRenderers are what injection sets; nothing changes)")
        elif item.state == "refused":
            lines.append(head + f"cannot be computed, its next write is refused: {item.reason}")
        else:
            lines.append(head + "gets cozyrender's entry; helm-controller upgrades it once"
                         + ("" if item.changes else " (no object changes)"))
            lines.extend(f"  {change.line()}" for change in item.changes)
    counts = {state: sum(1 for p in previews if p.state == state) for state in ("writes", "current", "refused")}
    lines.append(f"{len(previews)} tenant release(s): {counts['writes']} upgraded, {counts['current']} current, "
                 f"{counts['refused']} refused")
    return "\n".join(lines) + "\n"
