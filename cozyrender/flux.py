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
                keeping every other byte of it (a text splice at the
                positions PyYAML's composer reports)

cozyrender owns the entry whose first patch begins with MARKER, a YAML
comment inside the patch text: Flux and kustomize ignore it, and it survives
any tool that rewrites the HelmRelease, unlike a comment in the manifest.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.postrender.errors import EditError
from cozyrender.postrender.yamledit import (
    Editor,
    find_entry,
    flow_value,
    is_null,
    literal_block,
    literal_safe,
    quote,
)
from cozyrender.yamlio import MERGE_TAG, SafeLoader, dump_readable

_Loader = SafeLoader

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


def _dump(value: object) -> str:
    return dump_readable(value)  # multi-line strings (values.yaml) as literal blocks


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

@dataclass(frozen=True)
class Layout:
    """How a file indents block YAML, in columns: a nested mapping's keys
    beyond their parent key, a sequence's dashes beyond their key, an item's
    content beyond its dash. (Line breaks: the Editor writes CRLF into a CRLF
    document.)"""

    mapping: int = 2
    sequence: int = 2
    content: int = 2


def _scalar(value: object) -> str:
    """A one-line scalar as PyYAML spells it (plain when it can be)."""
    if value is None:
        return "null"
    text = yaml.dump(value, Dumper=yaml.SafeDumper, allow_unicode=True, width=1 << 16)
    return text.split("\n", 1)[0]


def _lines(value: object, column: int, layout: Layout, head: str) -> list[str]:
    """`head` (an indented `key:` or `-`) followed by `value` in block style,
    nested lines indented from `column`, the head's column."""
    if isinstance(value, dict) and value:
        return [head, *_mapping(value, column + layout.mapping, layout)]
    if isinstance(value, list) and value:
        return [head, *_sequence(value, column + layout.sequence, layout)]
    if isinstance(value, str) and "\n" in value and literal_safe(value):
        first, *rest = literal_block(value, column + layout.mapping)[:-1].split("\n")
        return [f"{head} {first}", *rest]
    if isinstance(value, str) and "\n" in value:
        return [f"{head} {quote(value)}"]
    if isinstance(value, (dict, list)):
        return [f"{head} {'{}' if isinstance(value, dict) else '[]'}"]
    return [f"{head} {_scalar(value)}"]


def _mapping(mapping: dict, column: int, layout: Layout) -> list[str]:
    lines: list[str] = []
    for key, value in mapping.items():
        lines.extend(_lines(value, column, layout, f"{' ' * column}{_scalar(key)}:"))
    return lines


def _sequence(items: list, dash: int, layout: Layout) -> list[str]:
    """Items with their dash at column `dash`; a mapping item's first key on the dash's line."""
    content = dash + layout.content
    lines: list[str] = []
    for item in items:
        prefix = " " * dash + "-" + " " * (layout.content - 1)
        if isinstance(item, (dict, list)) and item:
            inner = _mapping(item, content, layout) if isinstance(item, dict) else _sequence(item, content, layout)
            lines.append(prefix + inner[0][content:])
            lines.extend(inner[1:])
        else:
            lines.extend(_lines(item, content - layout.mapping, layout, prefix.rstrip()))
    return lines


def render_item(entry: dict, dash: int, layout: Layout) -> str:
    """One block-sequence item, its dash at column `dash`, as whole lines."""
    return "\n".join(_sequence([entry], dash, layout)) + "\n"


# `value` as one flow node (for a file that writes postRenderers in flow style).
flow = flow_value


def format_post_renderers(post_renderers: list[dict]) -> str:
    """`postRenderers:` as it goes into a HelmRelease's spec."""
    if not post_renderers:
        return "postRenderers: []\n"
    return "postRenderers:\n" + "".join(render_item(e, 2, Layout()) for e in post_renderers)


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
    root: MappingNode  # the same, composed: where its nodes stand in `document`

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

    def line(self, mark_line: int) -> int:
        """The file's line number of a line of the HelmRelease document (0-based there)."""
        return self.text.count("\n", 0, self.start) + mark_line + 1




def _documents(text: str) -> list[tuple[int, int]]:
    """Character spans of the documents of a file, cut as the post-renderer
    cuts a stream (`---` lines, `...` lines, directives kept with their document)."""
    from cozyrender.postrender.stream import split_chunks

    data = text.encode("utf-8")
    spans: list[tuple[int, int]] = []
    at = 0
    for chunk in split_chunks(data):
        length = len(data[chunk.start:chunk.end].decode("utf-8"))
        spans.append((at, at + length))
        at += length
    return spans


def load_helmrelease(path: str | Path) -> HelmReleaseFile:
    try:  # bytes: line breaks (CRLF too) are kept as written
        text = Path(path).read_bytes().decode("utf-8")
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
    root = yaml.compose(text[start:end], Loader=_Loader)
    hr = HelmReleaseFile(str(path), text, start, end, release, root)
    duplicate = _duplicate_key(root)
    if duplicate is not None:
        raise FluxError(f"{path}: line {hr.line(duplicate.start_mark.line)}: the HelmRelease has "
                        f"the key {duplicate.value!r} twice in one mapping")
    if release.get("apiVersion") != HELMRELEASE_API:
        raise FluxError(f"{path}: the HelmRelease is {release.get('apiVersion')!r}; "
                        f"cozyrender writes {HELMRELEASE_API} postRenderers")
    if not isinstance(release.get("spec"), dict):
        raise FluxError(f"{path}: the HelmRelease has no spec mapping")
    entries = release["spec"].get("postRenderers", [])
    if not isinstance(entries, (list, type(None))):
        raise FluxError(f"{path}: spec.postRenderers is not a list")
    for number, entry in enumerate(entries or []):
        problem = _entry_problem(entry)
        if problem:
            raise FluxError(f"{path}: spec.postRenderers[{number}]{problem}")
    return hr


def _entry_problem(entry: object) -> str | None:
    """What makes a post-renderer entry one Flux would reject (the shapes cozyrender reads)."""
    if not isinstance(entry, dict):
        return " is not a mapping"
    if "kustomize" not in entry:
        return None
    kustomize = entry["kustomize"]
    if not isinstance(kustomize, dict):
        return ".kustomize is not a mapping"
    patches = kustomize.get("patches")
    if patches is not None and not isinstance(patches, list):
        return ".kustomize.patches is not a list"
    for number, patch in enumerate(patches or []):
        if not isinstance(patch, dict):
            return f".kustomize.patches[{number}] is not a mapping"
    return None


def _walk(node: Node, seen: set[int] | None = None):
    """Every node below `node`, each once (aliases are the same node object)."""
    seen = set() if seen is None else seen
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, MappingNode):
            stack.extend(n for pair in reversed(current.value) for n in reversed(pair))
        elif isinstance(current, SequenceNode):
            stack.extend(reversed(current.value))


def _duplicate_key(root: Node) -> ScalarNode | None:
    """The first scalar key a mapping holds twice (PyYAML would silently keep the last)."""
    for node in _walk(root):
        if isinstance(node, MappingNode):
            keys: set[tuple[str, str]] = set()
            for key, _ in node.value:
                if isinstance(key, ScalarNode) and key.tag != MERGE_TAG:
                    if (key.tag, key.value) in keys:
                        return key
                    keys.add((key.tag, key.value))
    return None


def _shared(root: Node) -> set[int]:
    """Nodes reachable on more than one path (anchored and aliased)."""
    counts: dict[int, int] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        counts[id(node)] = counts.get(id(node), 0) + 1
        if counts[id(node)] > 1:
            continue
        if isinstance(node, MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
    return {node_id for node_id, count in counts.items() if count > 1}


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
    post-renderer edits it) or removed (nothing to patch).

    The file is edited as text at the positions PyYAML's composer reports:
    only the owned entry's lines change (or the new entry's, or a new
    `postRenderers:` key at the end of spec), rendered at the indentation the
    file uses; every other byte stays. The result is read back and compared
    with what was meant before it is returned."""
    warnings: list[str] = []
    owned = hr.owned()
    if owned is not None and owned[0] != 0:
        warnings.append(f"{hr.path}: the cozyrender post-renderer is not first; its patches "
                        "expect Helm's output, not another post-renderer's")
    entry = expected[0] if expected else None
    editor = Editor(hr.document)
    try:
        _splice(hr, editor, owned[0] if owned else None, entry)
    except EditError as err:
        raise FluxError(f"{hr.path}: cannot edit spec.postRenderers as text: {err}") from None
    text = hr.text[:hr.start] + editor.result() + hr.text[hr.end:]
    _verify(hr, text, entry)
    return Written(text, warnings)


def _splice(hr: HelmReleaseFile, editor: Editor, index: int | None, entry: dict | None) -> None:
    found = find_entry(hr.root, "spec")
    if found is None or not isinstance(found[2], MappingNode):
        raise FluxError(f"{hr.path}: spec comes from a YAML merge key; write it out to let "
                        "cozyrender edit it")
    _, spec_key, spec = found
    shared = _shared(hr.root)
    pr = find_entry(spec, "postRenderers")
    subtree = [spec, *(_walk(pr[2]) if pr else ())]
    if any(id(node) in shared for node in subtree):
        raise FluxError(f"{hr.path}: spec or spec.postRenderers is shared through a YAML alias; "
                        "write it out to let cozyrender edit it")
    if pr is None and hr.spec.get("postRenderers") is not None:
        raise FluxError(f"{hr.path}: spec.postRenderers comes from a YAML merge key; write it "
                        "out in spec to let cozyrender edit it")
    layout = _layout(editor, hr.root, spec_key, spec, pr)

    if pr is None:
        if entry is None:
            return
        if spec.flow_style:
            editor.add_flow_entry(spec, f"postRenderers: {flow([entry])}")
            return
        column = spec.value[0][0].start_mark.column
        editor.insert_lines(editor.content_end(spec), " " * column + "postRenderers:\n"
                            + render_item(entry, column + layout.sequence, layout))
        return

    _, key, sequence = pr
    if is_null(sequence) or (isinstance(sequence, SequenceNode) and not sequence.value):
        if entry is None:
            return
        if spec.flow_style or sequence.start_mark.line != key.start_mark.line:
            if isinstance(sequence, SequenceNode):
                editor.insert_item(sequence, 0, flow(entry), key)
            else:
                editor.replace(sequence.start_mark.index, sequence.end_mark.index, flow([entry]))
            return
        # `postRenderers:`, `postRenderers: null` or `postRenderers: []`, in block: a block list
        editor.replace(editor.colon_after(key) + 1, sequence.end_mark.index, "")
        editor.insert_lines(editor.line_end(sequence.end_mark.index), render_item(
            entry, key.start_mark.column + layout.sequence, layout))
        return
    if not isinstance(sequence, SequenceNode):  # load_helmrelease_text checked it
        raise FluxError(f"{hr.path}: spec.postRenderers is not a list")

    if sequence.flow_style:
        if index is None:
            if entry is not None:
                editor.insert_item(sequence, 0, flow(entry), key)
        elif entry is None:
            editor.delete_items(sequence, [index], key)
        else:
            editor.replace_item(sequence, index, flow(entry))
        return
    if index is None:
        if entry is not None:
            dash, content = editor.item_columns(sequence, 0)
            editor.insert_item(sequence, 0, render_item(
                entry, dash, _with_content(layout, content - dash)), key)
        return
    if entry is not None:
        dash, content = editor.item_columns(sequence, index)
        editor.replace_item(sequence, index, render_item(
            entry, dash, _with_content(layout, content - dash)))
        return
    editor.replace_item(sequence, index, "")
    if len(sequence.value) == 1:  # the list is left empty: say so
        colon = editor.colon_after(key)
        editor.replace(colon + 1, colon + 1, " []")


def _with_content(layout: Layout, content: int) -> Layout:
    return Layout(layout.mapping, layout.sequence, max(content, 2))


def _layout(editor: Editor, root: MappingNode, spec_key: Node, spec: MappingNode,
            pr: tuple[int, ScalarNode, Node] | None) -> Layout:
    """The file's indentation: mappings from spec's keys, sequences from
    spec.postRenderers' items or else the first block sequence of the document."""
    mapping = 2
    if not spec.flow_style and spec.value:
        step = spec.value[0][0].start_mark.column - spec_key.start_mark.column
        if step > 0:
            mapping = step
    candidates: list[tuple[Node, Node]] = [(pr[1], pr[2])] if pr else []
    candidates += [(k, v) for node in _walk(root) if isinstance(node, MappingNode)
                   for k, v in node.value]
    sequence, content = mapping, 2
    for key, value in candidates:
        if isinstance(value, SequenceNode) and value.value and not value.flow_style:
            try:
                dash, column = editor.item_columns(value, 0)
            except EditError:
                continue
            if dash >= key.start_mark.column:
                sequence, content = dash - key.start_mark.column, max(column - dash, 2)
                break
    return Layout(mapping, sequence, content)


def _verify(hr: HelmReleaseFile, text: str, entry: dict | None) -> None:
    """Read the written file back: the same HelmRelease with only cozyrender's
    entry changed, or an error instead of a file that says something else."""
    try:
        written = load_helmrelease_text(text, hr.path)
        owned = written.owned()
    except FluxError as err:
        raise FluxError(f"{hr.path}: cannot splice the entry into this layout ({err}); "
                        "please report it") from None
    got = [owned[1]] if owned else []
    want = [entry] if entry else []

    def others(release: HelmReleaseFile) -> dict:
        spec = {k: v for k, v in release.spec.items() if k != "postRenderers"}
        entries = [e for e in release.post_renderers() if not is_owned(e)]
        return {**release.release, "spec": spec, "_others": entries}

    if not (_same(got, want) and _same(others(written), others(hr))):
        raise FluxError(f"{hr.path}: cannot splice the entry into this layout (the result reads "
                        "differently); please report it")
