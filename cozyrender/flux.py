"""Flux helm-controller `postRenderers` that do what the post-renderer does.

Flux runs no executable post-renderer, only kustomize patches. So the patches
are derived, never hand-written: post-render the raw release in process, then
compare the parsed objects before and after (matched by apiVersion, kind,
namespace and name). An object the post-render drops becomes a strategic-merge
`$patch: delete`; an object it changes becomes JSON6902 operations; an object
it leaves alone gets nothing. The patches therefore cannot disagree with the
post-renderer: they are a transcript of it for one set of values.

Two halves:
    derive      raw release bytes -> one `kustomize` post-renderer entry
    helmrelease find, replace and compare that entry in a HelmRelease file,
                keeping every other byte of it (ruamel.yaml round trip)

cozyrender owns the entry whose first patch begins with MARKER, a YAML
comment inside the patch text: Flux and kustomize ignore it, and it survives
any tool that rewrites the HelmRelease, unlike a comment in the manifest.
"""

from __future__ import annotations

import difflib
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MARKER = "# cozyrender flux: generated from the chart and values; regenerate, do not edit"
HELMRELEASE_API = "helm.toolkit.fluxcd.io/v2"
# Flux shortens release names longer than this (with a hash); we only compare shorter ones.
_MAX_RELEASE_NAME = 53


class FluxError(Exception):
    """Input cozyrender cannot turn into patches, or a HelmRelease file it cannot edit."""


# ---------------------------------------------------------------- derive

ObjectKey = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" if none), name


def parse_objects(text: str | bytes, what: str = "stream") -> dict[ObjectKey, dict]:
    """Objects of a multi-document stream by key; `kind: List` items count as
    objects, as kustomize reads them. Two objects with one key are an error:
    no patch could tell them apart."""
    try:
        documents = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as err:
        raise FluxError(f"{what} is not YAML: {' '.join(str(err).split())}") from None
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


def _sort_key(key: ObjectKey) -> tuple[str, str, str, str]:
    api, kind, namespace, name = key
    return (kind, namespace, name, api)


def pointer(path: Sequence[object]) -> str:
    """An RFC 6901 JSON pointer: `~` is `~0` and `/` is `~1` in each token."""
    return "".join("/" + str(token).replace("~", "~0").replace("/", "~1") for token in path)


def _same(a: object, b: object) -> bool:
    """Equal as YAML data: true is not 1, nor 1.0 (Python's == says they are)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)  # type: ignore[union-attr]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    return a == b


def diff_operations(old: object, new: object, path: tuple = ()) -> list[dict]:
    """JSON6902 operations turning `old` into `new`: mappings key by key
    (removals, then changes, then additions, each in document order), anything
    else replaced whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops = [{"op": "remove", "path": pointer((*path, k))} for k in old if k not in new]
        for k in old:
            if k in new:
                ops.extend(diff_operations(old[k], new[k], (*path, k)))
        ops.extend({"op": "add", "path": pointer((*path, k)), "value": new[k]}
                   for k in new if k not in old)
        return ops
    if _same(old, new):
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


_ANNOTATIONS = "/metadata/annotations"


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


def _lookup(obj: object, path: str) -> object:
    for token in path.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        obj = obj[token]  # type: ignore[index]
    return obj


# Go regexp metacharacters: kustomize matches target names and namespaces as
# anchored regular expressions, so a name is escaped to select only itself.
_GO_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _literal(text: str) -> str:
    return _GO_REGEX_META.sub(r"\\\1", text)


def _selects(target: Mapping[str, str], key: ObjectKey) -> bool:
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
        if sum(_selects(target, k) for k in keys) == 1:
            return {f: (_literal(v) if f in ("name", "namespace") else v)
                    for f, v in target.items() if v or f == "group"}
    raise FluxError(f"{describe(key)}: no kustomize target selects it alone "
                    "(another object has the same kind, name and no namespace)")


class _PatchDumper(yaml.SafeDumper):
    """Block style; multi-line strings (values.yaml) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_PatchDumper.add_representer(str, _str)


def _dump(value: object) -> str:
    return yaml.dump(value, Dumper=_PatchDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 16)


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
    return _dump({"$patch": "delete", "apiVersion": api, "kind": kind, "metadata": metadata})


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
    for key in sorted(before, key=_sort_key):
        if key not in after:
            patch = delete_patch(key)
        else:
            ops = diff_operations(before[key], after[key])
            if not ops:
                continue
            ops = guard(per_annotation(ops, before[key]), before[key])
            patch = _dump([_block_safe(op) for op in ops])
        patches.append({"target": target_for(key, keys), "patch": patch})
    if not patches:
        return Derived([], list(result.warnings))
    patches[0]["patch"] = MARKER + "\n" + patches[0]["patch"]
    return Derived([{"kustomize": {"patches": patches}}], list(result.warnings))


def render_raw(chart: str | Path, release: str, namespace: str, values_files: Sequence[str] = (),
               sets: Sequence[str] = (), inline: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """Helm's output for the chart, exactly as `cozyrender template --raw` prints it."""
    from cozyrender.render import RenderError, load_values, template

    try:
        return template(chart, load_values(values_files, sets, inline), release, namespace)
    except RenderError as err:
        raise FluxError(str(err)) from None


# ---------------------------------------------------------------- printing

def _ruamel(indent: int = 2, offset: int = 0, explicit_start: bool = False,
            sequence: int | None = None):
    from ruamel.yaml import YAML

    y = YAML()  # round trip
    y.preserve_quotes = True
    y.width = 1 << 16  # never re-wrap the user's long lines
    y.indent(mapping=indent, sequence=max(sequence or indent, offset + 2), offset=offset)
    y.explicit_start = explicit_start
    return y


def _to_ruamel(value: object) -> object:
    """Plain data as ruamel nodes; multi-line strings (patch texts) as literal blocks."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, dict):
        return CommentedMap((k, _to_ruamel(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_to_ruamel(v) for v in value)
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value)
    return value


def format_post_renderers(post_renderers: list[dict]) -> str:
    """`postRenderers:` as it goes into a HelmRelease's spec."""
    out = io.StringIO()
    _ruamel().dump({"postRenderers": _to_ruamel(post_renderers)}, out)
    return out.getvalue()


# ---------------------------------------------------------------- helmrelease

def is_owned(entry: object) -> bool:
    """Whether a post-renderer entry is cozyrender's (its first patch carries MARKER)."""
    try:
        first = entry["kustomize"]["patches"][0]["patch"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(first, str) and first.startswith(MARKER)


@dataclass
class HelmReleaseFile:
    """A file holding one HelmRelease among any other documents."""

    path: str
    text: str
    start: int  # the HelmRelease document's characters [start, end)
    end: int
    release: dict  # the HelmRelease, read with PyYAML

    @property
    def document(self) -> str:
        return self.text[self.start:self.end]

    @property
    def spec(self) -> dict:
        return self.release["spec"]

    def post_renderers(self) -> list:
        return self.spec.get("postRenderers") or []

    def owned(self) -> tuple[int, dict] | None:
        found = [(i, e) for i, e in enumerate(self.post_renderers()) if is_owned(e)]
        if len(found) > 1:
            raise FluxError(f"{self.path}: spec.postRenderers holds {len(found)} cozyrender entries; "
                            "keep one")
        return found[0] if found else None

    def values(self) -> dict:
        values = self.spec.get("values") or {}
        if not isinstance(values, dict):
            raise FluxError(f"{self.path}: spec.values is not a mapping")
        return values

    def release_identity(self) -> tuple[str | None, str | None]:
        """The Helm release name and namespace Flux uses (None when not in the file)."""
        metadata = self.release.get("metadata") or {}
        target_ns = self.spec.get("targetNamespace")
        name = self.spec.get("releaseName")
        if not name and metadata.get("name"):
            name = f"{target_ns}-{metadata['name']}" if target_ns else metadata["name"]
        return name, target_ns or metadata.get("namespace")


_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.M)


def _documents(text: str) -> list[tuple[int, int]]:
    """Character spans of the documents of a file, each from its `---` line."""
    cuts = [0, *(m.start() for m in _DOCUMENT_START.finditer(text) if m.start()), len(text)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]


def load_helmrelease(path: str | Path) -> HelmReleaseFile:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise FluxError(f"cannot read {path}: {err}") from None
    return load_helmrelease_text(text, str(path))


def load_helmrelease_text(text: str, path: str = "<HelmRelease>") -> HelmReleaseFile:
    found = []
    for number, (start, end) in enumerate(_documents(text), 1):
        try:
            document = yaml.load(text[start:end], Loader=_Loader)
        except yaml.YAMLError as err:
            raise FluxError(f"{path}: document {number} is not YAML: "
                            f"{' '.join(str(err).split())}") from None
        if isinstance(document, dict) and document.get("kind") == "HelmRelease":
            found.append((start, end, document))
    if len(found) != 1:
        raise FluxError(f"{path}: expected one HelmRelease, found {len(found)}")
    start, end, release = found[0]
    if release.get("apiVersion") != HELMRELEASE_API:
        raise FluxError(f"{path}: the HelmRelease is {release.get('apiVersion')!r}; "
                        f"cozyrender writes {HELMRELEASE_API} postRenderers")
    if not isinstance(release.get("spec"), dict):
        raise FluxError(f"{path}: the HelmRelease has no spec mapping")
    if not isinstance(release["spec"].get("postRenderers", []), (list, type(None))):
        raise FluxError(f"{path}: spec.postRenderers is not a list")
    return HelmReleaseFile(str(path), text, start, end, release)


def check_identity(hr: HelmReleaseFile, release: str, namespace: str) -> None:
    """Patches name objects after the release: refuse a HelmRelease that
    installs under another release name or namespace."""
    name, ns = hr.release_identity()
    if name and len(name) <= _MAX_RELEASE_NAME and name != release:
        raise FluxError(f"{hr.path}: the HelmRelease installs release {name!r}, not {release!r}")
    if ns and ns != namespace:
        raise FluxError(f"{hr.path}: the HelmRelease installs into namespace {ns!r}, not {namespace!r}")


def _comparable(post_renderers: list) -> list:
    """An entry as Flux reads it: targets and parsed patches (not their text layout)."""
    out = []
    for entry in post_renderers:
        patches = []
        for patch in ((entry or {}).get("kustomize") or {}).get("patches") or []:
            try:  # kustomize trims the text before parsing it
                body = yaml.load((patch.get("patch") or "").strip(), Loader=_Loader)
            except (yaml.YAMLError, AttributeError):
                body = patch
            patches.append([patch.get("target") if isinstance(patch, dict) else None, body])
        out.append(patches)
    return out


def drift(hr: HelmReleaseFile, expected: list[dict]) -> str:
    """A unified diff from the file's cozyrender entry to the expected one; empty when in sync."""
    owned = hr.owned()
    current = [owned[1]] if owned else []
    if _same(_comparable(current), _comparable(expected)):
        return ""
    return "".join(difflib.unified_diff(
        format_post_renderers(current).splitlines(keepends=True),
        format_post_renderers(expected).splitlines(keepends=True),
        fromfile=f"{hr.path} (cozyrender entry)", tofile="from the chart and values now"))


@dataclass
class Written:
    text: str
    warnings: list[str] = field(default_factory=list)


def write_entry(hr: HelmReleaseFile, expected: list[dict]) -> Written:
    """The file with cozyrender's entry replaced (in place), inserted (first:
    its patches were derived from Helm's own output, before any other
    post-renderer edits it) or removed (nothing to patch). Everything else
    stays as it was: other documents as text, the HelmRelease by ruamel round trip."""
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.util import load_yaml_guess_indent

    document = hr.document
    warnings: list[str] = []
    try:  # ruamel's guess is about sequences: (item indent, dash offset)
        _, sequence, offset = load_yaml_guess_indent(document)
    except Exception:  # noqa: BLE001 - ruamel raises assorted errors; PyYAML read it fine
        sequence, offset = None, None
    y = _ruamel(_mapping_indent(document), offset or 0, explicit_start=document.startswith("---"),
                sequence=sequence)
    tree = y.load(document)
    if _dump_text(y, tree) != document:
        warnings.append(f"{hr.path}: ruamel.yaml re-formats parts of the HelmRelease outside "
                        "spec.postRenderers; review the change")
    spec = tree["spec"]
    entries = spec.get("postRenderers")
    owned = hr.owned()
    new_entry = _to_ruamel(expected[0]) if expected else None
    if owned is not None:
        if owned[0] != 0:
            warnings.append(f"{hr.path}: the cozyrender post-renderer is not first; its patches "
                            "expect Helm's output, not another post-renderer's")
        if new_entry is None:
            del entries[owned[0]]
        else:
            entries[owned[0]] = new_entry
    elif new_entry is not None:
        if entries is None:
            entries = CommentedSeq()
            spec["postRenderers"] = entries
        entries.insert(0, new_entry)
    text = hr.text[:hr.start] + _dump_text(y, tree) + hr.text[hr.end:]
    return Written(text, warnings)


_BLOCK_KEY = re.compile(r"^(\s*)[^\s#-][^#]*:\s*(#.*)?$")


def _mapping_indent(document: str) -> int:
    """The file's mapping indentation: how far the first nested key sits
    beneath its parent key (ruamel guesses only the sequences')."""
    lines = [line for line in document.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for parent, child in zip(lines, lines[1:]):
        match = _BLOCK_KEY.match(parent)
        if match:
            step = len(child) - len(child.lstrip(" ")) - len(match.group(1))
            if step > 0 and not child.lstrip().startswith("-"):
                return step
    return 2


def _dump_text(y: Any, tree: object) -> str:
    out = io.StringIO()
    y.dump(tree, out)
    return out.getvalue()
