"""A HelmRelease among the documents of a GitOps file: finding it, reading it,
refusing what cozyrender cannot edit safely.

A file may hold several HelmReleases; the one meant is the only one, or the one
named by release name (or metadata.name) and namespace. Its release name and
namespace are Flux's own (`GetReleaseName`, `GetReleaseNamespace` and
`ShortenName` in fluxcd/helm-controller): the chart renders object names from
them, so the patches hold only for that release.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.flux.errors import FluxError
from cozyrender.flux.patches import is_owned
from cozyrender.flux.stream import Document, Stream, read_file, read_text
from cozyrender.yamlio import SafeLoader, first_duplicate_key

HELMRELEASE_KIND = "HelmRelease"
HELMRELEASE_API = "helm.toolkit.fluxcd.io/v2"
MAX_RELEASE_NAME = 53  # Helm's limit; Flux shortens longer names
_HASH_LENGTH = 12


def shorten_name(name: str) -> str:
    """Flux's ShortenName: a release name longer than Helm's 53 characters
    becomes its first 40 characters, `-`, and the first 12 hex digits of its
    SHA-256, so the name Helm (and the chart) sees still fits."""
    if len(name) <= MAX_RELEASE_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:_HASH_LENGTH]
    return name[:MAX_RELEASE_NAME - (_HASH_LENGTH + 1)] + "-" + digest


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def release_identity(release: Mapping) -> tuple[str | None, str | None]:
    """The Helm release name and namespace Flux uses for a HelmRelease (None when
    the document does not say): `spec.releaseName`, else
    `[spec.targetNamespace-]metadata.name`, shortened; `spec.targetNamespace`,
    else `metadata.namespace`."""
    metadata = release.get("metadata") if isinstance(release.get("metadata"), Mapping) else {}
    spec = release.get("spec") if isinstance(release.get("spec"), Mapping) else {}
    target_ns = _text(spec.get("targetNamespace"))
    name = _text(spec.get("releaseName"))
    if name is None and _text(metadata.get("name")):
        name = f"{target_ns}-{metadata['name']}" if target_ns else metadata["name"]
    return (shorten_name(name) if name else None), target_ns or _text(metadata.get("namespace"))


def _label(release: Mapping) -> str:
    """namespace/name of a HelmRelease object, for messages."""
    metadata = release.get("metadata") if isinstance(release.get("metadata"), Mapping) else {}
    name = _text(metadata.get("name")) or "(unnamed)"
    namespace = _text(metadata.get("namespace"))
    return f"{namespace}/{name}" if namespace else name


@dataclass
class HelmReleaseFile:
    """One HelmRelease of a stream: its document, its data and its node tree."""

    stream: Stream
    where: Document
    release: dict  # the HelmRelease, read with PyYAML
    root: MappingNode  # the same, composed: where its nodes stand in `document`

    @property
    def path(self) -> str:
        return self.stream.path

    @property
    def text(self) -> str:
        return self.stream.text

    @property
    def start(self) -> int:
        return self.where.start

    @property
    def end(self) -> int:
        return self.where.end

    @property
    def document(self) -> str:
        return self.stream.text_of(self.where)

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
        return release_identity(self.release)

    def line(self, mark_line: int) -> int:
        """The file's line number of a line of the HelmRelease document (0-based there)."""
        return self.stream.line(self.where, mark_line)

    def label(self) -> str:
        return _label(self.release)


def load_helmrelease(path: str | Path, release: str | None = None,
                     namespace: str | None = None) -> HelmReleaseFile:
    return select(read_file(path), release, namespace)


def load_helmrelease_text(text: str, path: str = "<HelmRelease>", release: str | None = None,
                          namespace: str | None = None) -> HelmReleaseFile:
    return select(read_text(text, path), release, namespace)


def identities(stream: Stream) -> list[tuple[str | None, str | None]]:
    """The release name and namespace of every HelmRelease in the file, in
    file order (what `select` takes to pick each one)."""
    out = []
    for document in stream.documents:
        data = stream.load(document)
        if isinstance(data, dict) and data.get("kind") == HELMRELEASE_KIND:
            name, namespace = release_identity(data)
            metadata = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
            out.append((name or _text(metadata.get("name")), namespace))
    return out


def select(stream: Stream, release: str | None = None, namespace: str | None = None
           ) -> HelmReleaseFile:
    """The HelmRelease meant: the file's only one, else the one whose release
    name or metadata.name is `release` (and whose namespace is `namespace`,
    when both say). Then checked as `check` describes."""
    found = []
    for document in stream.documents:
        data = stream.load(document)
        if isinstance(data, dict) and data.get("kind") == HELMRELEASE_KIND:
            found.append((document, data))
    if not found:
        raise FluxError(f"{stream.path}: expected one HelmRelease, found 0")
    matching = found if len(found) == 1 else [
        (document, data) for document, data in found if _matches(data, release, namespace)]
    wanted = " ".join(filter(None, (f"release {release!r}" if release else "",
                                    f"in namespace {namespace!r}" if namespace else "")))
    if not matching:
        names = ", ".join(_label(data) for _, data in found)
        raise FluxError(f"{stream.path}: found {len(found)} HelmReleases and none is {wanted} "
                        f"({names})")
    if len(matching) > 1:
        names = ", ".join(_label(data) for _, data in matching)
        raise FluxError(f"{stream.path}: {len(matching)} HelmReleases{' ' + wanted if wanted else ''}"
                        f" ({names}); say which with RELEASE and -n NAMESPACE")
    document, data = matching[0]
    return check(stream, document, data)


def _matches(release: Mapping, name: str | None, namespace: str | None) -> bool:
    release_name, release_ns = release_identity(release)
    metadata = release.get("metadata") if isinstance(release.get("metadata"), Mapping) else {}
    if name is not None and name not in (release_name, metadata.get("name")):
        return False
    return namespace is None or release_ns in (None, namespace)


def check(stream: Stream, document: Document, release: dict) -> HelmReleaseFile:
    """Refuse a HelmRelease cozyrender could misread or Flux would reject: a key
    twice in one mapping (PyYAML keeps the last silently, Kubernetes refuses),
    another API version, no spec mapping, post-renderers of the wrong shape."""
    root = yaml.compose(stream.text_of(document), Loader=SafeLoader)
    hr = HelmReleaseFile(stream, document, release, root)
    path = stream.path
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


def walk(node: Node, seen: set[int] | None = None):
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
    """The first key a mapping holds twice (the rule every reader shares,
    `cozyrender.yamlio`; PyYAML would silently keep the last)."""
    for node in walk(root):
        if isinstance(node, MappingNode):
            found = first_duplicate_key(node)
            if found is not None:
                return found[1]
    return None


def check_identity(hr: HelmReleaseFile, release: str, namespace: str) -> None:
    """Patches name objects after the release: refuse a HelmRelease that
    installs under another release name or namespace."""
    name, ns = hr.release_identity()
    if name and name != release:
        raise FluxError(f"{hr.path}: the HelmRelease installs release {name!r}, not {release!r}")
    if ns and ns != namespace:
        raise FluxError(f"{hr.path}: the HelmRelease installs into namespace {ns!r}, not {namespace!r}")
