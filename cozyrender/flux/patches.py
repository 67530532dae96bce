"""Deriving the patches: raw release bytes -> one `kustomize` post-renderer entry.

Flux runs no executable post-renderer, only kustomize patches, so the patches
are derived, never hand-written: post-render the raw release in process, then
compare the objects before and after (see `objects`). An object the
post-render drops becomes a strategic-merge `$patch: delete`; an object it
changes becomes JSON6902 operations; an object it leaves alone gets nothing.

Never stale: every change is guarded by JSON6902 `test` operations of the
content it was decided from, so patches applied to a release they no longer
fit fail the kustomize build (and so the Flux reconcile, with kustomize's
message) instead of applying quietly. A delete is preceded by a test-only
patch of what decided it (the quotas' `spec.hard`); an edit starts with the
tests (a quota's whole `spec.hard`, a values Secret's values.yaml; each
replaced or removed value); and what the rules read in an object they leave
alone (a quota without budget keys, a values Secret already right) is tested
too, first, so an object that now needs a change cannot be passed over; so
is the absence of a quota in a namespace of the release (`absence_guards`). A
release the post-render leaves entirely alone still gets no entry.
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

import yaml

from cozyrender.flux.errors import FluxError
from cozyrender.flux.objects import ObjectKey, describe, documents_like, load_documents, parse_objects, same, sort_key
from cozyrender import values_secret
from cozyrender.yamlio import dump_readable_fast as dump_readable

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


def guard(operations: list[dict], old: dict, decided_by: Sequence[str] = ()) -> list[dict]:
    """Never stale: a `test` of each path in `decided_by` first (the content
    the change was decided from, e.g. a quota's whole /spec/hard), then a
    `test` of the current value before each replace and each remove that no
    earlier test covers. Patches generated for other values then fail the Flux
    reconcile loudly instead of writing a stale values.yaml, vGPU label or
    quota. `decided_by` paths missing from `old` are skipped."""
    out: list[dict] = []
    tested: list[str] = []

    def test(path: str) -> None:
        out.append({"op": "test", "path": path, "value": _lookup(old, path)})
        tested.append(path)

    for path in decided_by:
        if _has(old, path):
            test(path)
    for op in operations:
        if op["op"] in ("replace", "remove") and not _covered(op["path"], tested):
            test(op["path"])
        out.append(op)
    return out


def _covered(path: str, tested: Sequence[str]) -> bool:
    return any(path == t or path.startswith(t + "/") for t in tested)


def _has(obj: object, path: str) -> bool:
    try:
        _lookup(obj, path)
    except (KeyError, TypeError, IndexError):
        return False
    return True


# What decides each change, per kind: a ResourceQuota is edited or dropped
# from its whole `spec.hard` (which keys are budget keys, whether any other is
# left), and a LimitRange is dropped because every quota of its namespace was
# (`postrender.rules.limit_ranges_dropped`). A delete of any other kind (the
# post-renderer makes none today) is decided by all of the object but its
# metadata, which kustomize annotates while it builds.
_QUOTA_HARD = "/spec/hard"


def decided_by(key: ObjectKey, objects: Mapping[ObjectKey, dict]) -> list[tuple[ObjectKey, str]]:
    """The (object, JSON pointer) pairs whose rendered content decided that the
    post-render changes or drops the object `key`; a guard tests each."""
    _, kind, namespace, _ = key
    if kind == "ResourceQuota":
        return [(key, _QUOTA_HARD)]
    if values_secret.is_values_secret(objects[key]):
        return [(key, pointer((field_name, values_secret.VALUES_KEY)))
                for field_name in ("stringData", "data")
                if _has(objects[key], pointer((field_name, values_secret.VALUES_KEY)))]
    if kind == "LimitRange":
        return [(k, _QUOTA_HARD) for k in sorted(objects, key=sort_key)
                if k[1] == "ResourceQuota" and k[2] == namespace and _has(objects[k], _QUOTA_HARD)]
    return [(key, pointer((field_name,))) for field_name in objects[key]
            if field_name not in ("apiVersion", "kind", "metadata")]


# Objects the rules read that may come out untouched: a quota without budget
# keys, a values Secret already right. Their content is tested all the same,
# so patches for other values cannot skip an object that now needs a change.
_READ_BY_RULES = ("ResourceQuota",)


def read_by_rules(key: ObjectKey, obj: Mapping) -> bool:
    return key[1] in _READ_BY_RULES or values_secret.is_values_secret(obj)


def input_guard(key: ObjectKey, objects: Mapping[ObjectKey, dict]) -> str | None:
    """A test-only patch of what the rules read in an object they leave alone."""
    ops = [{"op": "test", "path": path, "value": _lookup(objects[key], path)}
           for target, path in decided_by(key, objects) if target == key]
    return dump_readable([_block_safe(op) for op in ops]) if ops else None


ABSENT = "cozyrender flux: derived for a release without this object; regenerate"


def absence_guards(objects: Mapping[ObjectKey, dict]) -> list[dict]:
    """Patches that fail when an object the rules read appears where the
    release had none: a ResourceQuota in a namespace the release creates (a
    tenant namespace, where the charts put the quota) that held no quota when
    the patches were derived. A JSON patch cannot test that a path is absent, but a target
    that selects nothing is skipped, so a `test` that can never pass, aimed at
    any quota of that namespace, fails exactly when one is there."""
    namespaces = {k[3] for k in objects if k[1] == "Namespace" and k[0] == "v1"}
    with_quota = {k[2] for k in objects if k[1] == "ResourceQuota"}
    return [{"target": {"kind": "ResourceQuota", "namespace": _literal(namespace)},
             "patch": dump_readable([{"op": "test", "path": "/metadata/name", "value": ABSENT}])}
            for namespace in sorted(namespaces - with_quota)]


def delete_guards(key: ObjectKey, objects: Mapping[ObjectKey, dict]) -> list[tuple[ObjectKey, str]]:
    """Test-only JSON6902 patches, one per object, to go just before the
    strategic-merge delete of `key`: the delete then happens only while the
    content that decided it is what it was when the patches were derived."""
    by_object: dict[ObjectKey, list[dict]] = {}
    for target, path in decided_by(key, objects):
        if _has(objects[target], path):
            by_object.setdefault(target, []).append(
                {"op": "test", "path": path, "value": _lookup(objects[target], path)})
    if not by_object:
        raise FluxError(f"{describe(key)}: nothing to guard its delete with")
    return [(target, dump_readable([_block_safe(op) for op in ops])) for target, ops in by_object.items()]


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


def derive(raw: bytes, rendered: list | None = None) -> Derived:
    """Post-render `raw` and express the difference as Flux post-renderers.
    `rendered`: `raw`'s documents as SafeLoader reads them, when the render
    already read them (`flux.source.render_release`); read here otherwise."""
    from cozyrender.postrender import PostRenderError, post_render

    try:
        result = post_render(raw)
    except PostRenderError as err:
        raise FluxError(f"post-render: {err}") from None
    try:
        if rendered is None:
            rendered = load_documents(raw)
        documents = documents_like(result.output, raw, rendered)
    except yaml.YAMLError:
        rendered = documents = None  # parse_objects words it
    before = parse_objects(raw, "the rendered release", rendered)
    after = parse_objects(result.output, "the post-rendered release", documents)
    keys = list(before)
    unknown = set(after) - set(before)
    if unknown:  # the post-renderer only edits and drops; a new object is a bug
        raise FluxError(f"post-render created {', '.join(describe(k) for k in sorted(unknown))}")
    patches: list[dict] = []
    unchanged: list[dict] = []  # guards of untouched inputs: only with other patches
    for key in sorted(before, key=sort_key):
        if key not in after:
            patches.extend({"target": target_for(target, keys), "patch": text}
                           for target, text in delete_guards(key, before))
            patch = delete_patch(key)
        else:
            ops = diff_operations(before[key], after[key])
            if not ops:
                if read_by_rules(key, before[key]) and (text := input_guard(key, before)):
                    unchanged.append({"target": target_for(key, keys), "patch": text})
                continue
            own = [path for target, path in decided_by(key, before) if target == key]
            ops = guard(per_annotation(ops, before[key]), before[key],
                        own if read_by_rules(key, before[key]) else ())
            patch = dump_readable([_block_safe(op) for op in ops])  # values.yaml as a literal block
        patches.append({"target": target_for(key, keys), "patch": patch})
    if not patches:
        return Derived([], list(result.warnings))
    patches = absence_guards(before) + unchanged + patches
    patches[0]["patch"] = MARKER + "\n" + patches[0]["patch"]
    return Derived([{"kustomize": {"patches": patches}}], list(result.warnings))


def is_owned(entry: object) -> bool:
    """Whether a post-renderer entry is cozyrender's (its first patch carries MARKER)."""
    try:
        first = entry["kustomize"]["patches"][0]["patch"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(first, str) and first.startswith(MARKER)
