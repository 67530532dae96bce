"""Helm's post-processing of a render, as `helm template` prints it: partials
and empty files dropped, each file split on `---`, documents sorted (file path
order, then a stable sort by Helm's install order of kinds, hooks after the
release's manifests) and printed as `---\\n# Source: <path>\\n<doc>\\n`."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from cozyrender.render.errors import RenderError
from cozyrender.yamlio import SafeLoader, yaml_problem

_Loader = SafeLoader  # libyaml when available: heads are parsed for every document


INSTALL_ORDER: tuple[str, ...] = (
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
)
# Helm 3.17 does not know the two webhook kinds: they sort with the unknown kinds.
INSTALL_ORDER_HELM3: tuple[str, ...] = INSTALL_ORDER[:-2]

NOTES_SUFFIX = "NOTES.txt"
HOOK_ANNOTATION = "helm.sh/hook"
# Hook events Helm knows; a document naming any other is dropped by Helm.
HOOK_EVENTS = frozenset({
    "pre-install", "post-install", "pre-delete", "post-delete", "pre-upgrade",
    "post-upgrade", "pre-rollback", "post-rollback", "test", "test-success",
})

# Go's regexp `(?:^|\s*\n)---\s*`: \s is ASCII whitespace without \v in RE2,
# and `^` is the start of the text only.
_SEPARATOR = re.compile(r"(?:\A|[\t\n\f\r ]*\n)---[\t\n\f\r ]*")
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip() differs).
_GO_UNICODE_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" \
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def go_trim_space(text: str) -> str:
    return text.strip(_GO_UNICODE_SPACE)


@dataclass(frozen=True)
class Manifest:
    """One rendered document as Helm keeps it: its template path, text and
    kind; and `value`, the document as SafeLoader read it for sorting (None
    for a document of comments only), so a reader of the release need not
    parse it again."""

    path: str
    content: str
    kind: str
    value: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Rendered:
    """A rendered release: the non-hook manifests and the hooks, both in Helm's order."""

    manifests: list[Manifest]
    hooks: list[Manifest] = field(default_factory=list)

    def text(self) -> str:
        """The output of `helm template` for this release."""
        return format_manifests(self.manifests, self.hooks)

    def documents(self) -> list | None:
        """What SafeLoader's `load_all` reads from `text()`, document by
        document, as the sorting read them: each document of the text is one
        manifest's content (which holds no `---` line) after a comment line.
        None when a content holds a byte order mark, which a lone document
        drops at its start but a stream keeps there. Fresh objects of each
        render."""
        every = (*self.manifests, *self.hooks)
        if any("\ufeff" in manifest.content for manifest in every):
            return None
        return [manifest.value for manifest in every]


def split_manifests(text: str) -> list[str]:
    """Helm's SplitManifests: the documents of one template file, trimmed, in order."""
    docs = []
    for doc in _SEPARATOR.split(go_trim_space(text)):
        if doc == "":
            continue
        docs.append(go_trim_space(doc))
    return docs


def _head(path: str, doc: str) -> dict[str, Any] | None:
    """The document as SafeLoader reads it, which Helm reads to sort it (kind,
    name, annotations): a mapping, or None for a document of comments only."""
    try:  # with the line break `text()` prints after it, so a block scalar at its end reads alike
        head = yaml.load(doc + "\n", Loader=_Loader)
    except yaml.YAMLError:
        try:  # the error as the document alone gives it (a position inside it, not past its end)
            yaml.load(doc, Loader=_Loader)
            problem = "the document cannot be read"  # refused only with the line break: never seen
        except yaml.YAMLError as err:
            problem = yaml_problem(err)
        raise RenderError(f"YAML parse error on {path}: {problem}") from None
    if head is not None and not isinstance(head, dict):
        raise RenderError(f"YAML parse error on {path}: a document is not a mapping")
    return head


def _kind_key(ordering: Sequence[str]) -> Callable[[Manifest], tuple[int, str]]:
    """Sort key equivalent to Helm's lessByKind: known kinds by install order,
    unknown kinds after them alphabetically (code point order is Go's byte order)."""
    rank = {kind: i for i, kind in enumerate(ordering)}

    def key(manifest: Manifest) -> tuple[int, str]:
        if manifest.kind in rank:
            return (rank[manifest.kind], "")
        return (len(ordering), manifest.kind)

    return key


def sort_manifests(files: Mapping[str, str], ordering: Sequence[str] = INSTALL_ORDER
                   ) -> Rendered:
    """Helm's SortManifests over {template path: rendered text}; `ordering` is
    INSTALL_ORDER (Helm 4, the default) or INSTALL_ORDER_HELM3."""
    generic: list[Manifest] = []
    hooks: list[Manifest] = []
    for path in sorted(files):
        content = files[path]
        if path.endswith(NOTES_SUFFIX):  # rendered, but printed by Helm apart from manifests
            continue
        if posixpath.basename(path).startswith("_") or go_trim_space(content) == "":
            continue
        for doc in split_manifests(content):
            value = _head(path, doc)
            head = value or {}
            kind = head.get("kind")
            kind = kind if isinstance(kind, str) else ""
            metadata = head.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            annotations = metadata.get("annotations")
            events = annotations.get(HOOK_ANNOTATION) if isinstance(annotations, dict) else None
            if events is None:
                generic.append(Manifest(path, doc, kind, value))
                continue
            if not all(e.strip().lower() in HOOK_EVENTS for e in str(events).split(",")):
                continue  # Helm skips documents with an unknown hook event
            hooks.append(Manifest(path, doc, kind, value))
    # list.sort is stable, like Go's sort.SliceStable.
    generic.sort(key=_kind_key(ordering))
    hooks.sort(key=_kind_key(ordering))
    return Rendered(generic, hooks)


def format_manifests(manifests: Iterable[Manifest], hooks: Iterable[Manifest] = ()) -> str:
    """`helm template`'s printing: the release manifest trimmed plus a newline, then hooks."""
    body = "".join(f"---\n# Source: {m.path}\n{m.content}\n" for m in manifests)
    out = go_trim_space(body) + "\n"
    out += "".join(f"---\n# Source: {m.path}\n{m.content}\n" for m in hooks)
    return out
