"""Deriving the patches: raw release bytes -> one `kustomize` post-renderer entry.

Flux runs no executable post-renderer, only kustomize patches, so the patches
are derived, never hand-written: post-render the raw release in process, then
compare the objects before and after (see `objects`). An object the
post-render drops becomes a strategic-merge `$patch: delete`; an object it
changes becomes JSON6902 operations; an object it leaves alone gets nothing.
The patches therefore cannot disagree with the post-renderer: they are a
transcript of it for one set of values.

cozyrender owns the entry whose first patch begins with MARKER, a YAML comment
inside the patch text: Flux and kustomize ignore it, and it survives any tool
that rewrites the HelmRelease, unlike a comment in the manifest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cozyrender.flux.errors import FluxError
from cozyrender.flux.objects import ObjectKey, describe, parse_objects, same, sort_key
from cozyrender.yamlio import dump_readable

MARKER = "# cozyrender flux: generated from the chart and values; regenerate, do not edit"
_ANNOTATIONS = "/metadata/annotations"


def pointer(path: Sequence[object]) -> str:
    """An RFC 6901 JSON pointer: `~` is `~0` and `/` is `~1` in each token."""
    return "".join("/" + str(token).replace("~", "~0").replace("/", "~1") for token in path)


def _lookup(obj: object, path: str) -> object:
    for token in path.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        obj = obj[token]  # type: ignore[index]
    return obj


def diff_operations(old: object, new: object, path: tuple = ()) -> list[dict]:
    """JSON6902 operations turning `old` into `new`: mappings key by key
    (removals, then changes, then additions, each in document order), anything
    else replaced whole (a list item cannot be addressed stably by index)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops = [{"op": "remove", "path": pointer((*path, k))} for k in old if k not in new]
        for k in old:
            if k in new:
                ops.extend(diff_operations(old[k], new[k], (*path, k)))
        ops.extend({"op": "add", "path": pointer((*path, k)), "value": new[k]}
                   for k in new if k not in old)
        return ops
    if same(old, new):
        return []
    return [{"op": "replace", "path": pointer(path), "value": new}]


def guard(operations: list[dict], old: dict) -> list[dict]:
    """Put a `test` of the current value before each replace, and before each
    removal of an annotation (the render inputs the label is derived from).
    Patches generated for other values then fail the Flux reconcile loudly
    instead of writing a stale values.yaml or vGPU label."""
    out: list[dict] = []
    for op in operations:
        guarded = op["op"] == "replace" or (
            op["op"] == "remove" and op["path"].startswith(_ANNOTATIONS + "/"))
        if guarded:
            out.append({"op": "test", "path": op["path"], "value": _lookup(old, op["path"])})
        out.append(op)
    return out


def per_annotation(operations: list[dict], old: dict) -> list[dict]:
    """A removal of the whole annotations map as one removal per annotation.
    kustomize keeps its own bookkeeping annotations on objects while it builds,
    so the map it patches is never exactly the rendered one; it drops an
    annotations map left empty, as the post-renderer does."""
    out: list[dict] = []
    for op in operations:
        annotations = _lookup(old, _ANNOTATIONS) if op == {"op": "remove", "path": _ANNOTATIONS} else None
        if isinstance(annotations, dict) and annotations:
            out.extend({"op": "remove", "path": pointer(("metadata", "annotations", key))}
                       for key in annotations)
        else:
            out.append(op)
    return out


# Go regexp metacharacters: kustomize matches target names and namespaces as
# anchored regular expressions, so a name is escaped to select only itself.
_GO_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _literal(text: str) -> str:
    return _GO_REGEX_META.sub(r"\\\1", text)


def selects(target: Mapping[str, str], key: ObjectKey) -> bool:
    """Whether an unescaped kustomize target selects the object with this key."""
    api, kind, namespace, name = key
    group, _, version = api.rpartition("/")
    wanted = {"group": group, "version": version, "kind": kind, "namespace": namespace, "name": name}
    return all(wanted[field_name] == value for field_name, value in target.items())


def target_for(key: ObjectKey, keys: Sequence[ObjectKey]) -> dict[str, str]:
    """A kustomize target selecting exactly this object among `keys`: kind,
    name and namespace (when it has one), with group and version added when
    another object would match too."""
    api, kind, namespace, name = key
    if not kind or not name:
        raise FluxError(f"{describe(key)}: an object without kind or name cannot be patched")
    group, _, version = api.rpartition("/")
    base = {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}
    for target in (base, {"group": group, "version": version, **base}):
        if sum(selects(target, k) for k in keys) == 1:
            return {f: (_literal(v) if f in ("name", "namespace") else v)
                    for f, v in target.items() if v or f == "group"}
    raise FluxError(f"{describe(key)}: no kustomize target selects it alone "
                    "(another object has the same kind, name and no namespace)")


def _block_safe(op: dict) -> dict:
    """kustomize trims the patch text, which would cut the final line break of
    a literal block at its very end (values.yaml): such a value goes before
    the path, so the text never ends inside a block scalar."""
    value = op.get("value")
    if isinstance(value, str) and "\n" in value:
        return {"op": op["op"], "value": value, "path": op["path"]}
    return op


def delete_patch(key: ObjectKey) -> str:
    api, kind, namespace, name = key
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return dump_readable({"$patch": "delete", "apiVersion": api, "kind": kind, "metadata": metadata})


@dataclass
class Derived:
    """The post-renderers list (one entry, or none when nothing changes) and
    the post-renderer's warnings."""

    post_renderers: list[dict]
    warnings: list[str] = field(default_factory=list)

    @property
    def patches(self) -> list[dict]:
        return self.post_renderers[0]["kustomize"]["patches"] if self.post_renderers else []


def derive(raw: bytes) -> Derived:
    """Post-render `raw` and express the difference as Flux post-renderers."""
    from cozyrender.postrender import PostRenderError, post_render

    try:
        result = post_render(raw)
    except PostRenderError as err:
        raise FluxError(f"post-render: {err}") from None
    before = parse_objects(raw, "the rendered release")
    after = parse_objects(result.output, "the post-rendered release")
    keys = list(before)
    unknown = set(after) - set(before)
    if unknown:  # the post-renderer only edits and drops; a new object is a bug
        raise FluxError(f"post-render created {', '.join(describe(k) for k in sorted(unknown))}")
    patches = []
    for key in sorted(before, key=sort_key):
        if key not in after:
            patch = delete_patch(key)
        else:
            ops = diff_operations(before[key], after[key])
            if not ops:
                continue
            ops = guard(per_annotation(ops, before[key]), before[key])
            patch = dump_readable([_block_safe(op) for op in ops])  # values.yaml as a literal block
        patches.append({"target": target_for(key, keys), "patch": patch})
    if not patches:
        return Derived([], list(result.warnings))
    patches[0]["patch"] = MARKER + "\n" + patches[0]["patch"]
    return Derived([{"kustomize": {"patches": patches}}], list(result.warnings))


def is_owned(entry: object) -> bool:
    """Whether a post-renderer entry is cozyrender's (its first patch carries MARKER)."""
    try:
        first = entry["kustomize"]["patches"][0]["patch"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(first, str) and first.startswith(MARKER)
