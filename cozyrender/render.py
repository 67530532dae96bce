"""Render a chart in-process with the Helm SDK (helm-python-sdk) and print it
exactly as `helm template` does.

The SDK returns one rendered text per template file; `helm template` then
drops partials and empty files, splits each file on `---`, sorts the
documents (file path order, then a stable sort by Helm's install order of
kinds, hooks after the release's manifests) and prints each as
`---\\n# Source: <path>\\n<doc>\\n`. `format_manifests` reproduces that, so
the bytes match the pinned `helm template` binary (tests prove it).
"""

from __future__ import annotations

import json
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cozyrender.yamlio import SafeLoader

_Loader = SafeLoader  # libyaml when available: heads are parsed for every document


class RenderError(Exception):
    """A render that Helm refuses (bad values, a `fail`, bad YAML); str() is Helm's message."""


# Helm 4's kind install order (pkg/release/v1/util/kind_sorter.go in 4.1).
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
    """One rendered document as Helm keeps it: its template path, text and kind."""

    path: str
    content: str
    kind: str


@dataclass(frozen=True)
class Rendered:
    """A rendered release: the non-hook manifests and the hooks, both in Helm's order."""

    manifests: list[Manifest]
    hooks: list[Manifest] = field(default_factory=list)

    def text(self) -> str:
        """The output of `helm template` for this release."""
        return format_manifests(self.manifests, self.hooks)


def split_manifests(text: str) -> list[str]:
    """Helm's SplitManifests: the documents of one template file, trimmed, in order."""
    docs = []
    for doc in _SEPARATOR.split(go_trim_space(text)):
        if doc == "":
            continue
        docs.append(go_trim_space(doc))
    return docs


def _head(path: str, doc: str) -> dict[str, Any]:
    """The part of a document Helm reads to sort it (kind, name, annotations)."""
    try:
        head = yaml.load(doc, Loader=_Loader)
    except yaml.YAMLError as err:
        problem = str(err).replace("\n", " ")
        raise RenderError(f"YAML parse error on {path}: {problem}") from None
    if head is None:
        return {}
    if not isinstance(head, dict):
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
            head = _head(path, doc)
            kind = head.get("kind")
            kind = kind if isinstance(kind, str) else ""
            metadata = head.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            annotations = metadata.get("annotations")
            events = annotations.get(HOOK_ANNOTATION) if isinstance(annotations, dict) else None
            if events is None:
                generic.append(Manifest(path, doc, kind))
                continue
            if not all(e.strip().lower() in HOOK_EVENTS for e in str(events).split(",")):
                continue  # Helm skips documents with an unknown hook event
            hooks.append(Manifest(path, doc, kind))
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


def merge_values(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of successive `-f` files: maps merge, anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(dict(out[key]), value)
        else:
            out[key] = value
    return out


_SET_FLAGS = {"json": "--set-json", "set": "--set", "string": "--set-string",
              "file": "--set-file"}
# Stands for "the value already there" in the expression that replays the
# current values before a --set expression (see _parse_into).
_KEEP = "cozyrender-keep-7c1e5a0b9d"
_KEY_SPECIALS = frozenset("\\.,=[]{}")


def load_values(
    files: Sequence[str | Path] = (),
    sets: Sequence[str] = (),
    inline: Sequence[Mapping[str, Any]] = (),
    *,
    set_json: Sequence[str] = (),
    set_string: Sequence[str] = (),
    set_file: Sequence[str] = (),
    read: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """The user values of a render as `helm template` computes them: `-f` files
    in order, then inline layers, then `--set-json`, `--set`, `--set-string` and
    `--set-file` (Helm's order), each parsed by Helm's own strvals parser into the
    values so far (so `--set a[1]=x` changes one item of an existing list).
    `read` reads a values file (the commands pass one that takes `-` for stdin)."""
    import helm_python as helm

    values: dict[str, Any] = {}
    for path in files:
        if read is not None:
            text = read(str(path))
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise RenderError(f"values file {path}: no such file") from None
            except OSError as err:
                raise RenderError(f"values file {path}: {(err.strerror or str(err)).lower()}") from None
            except UnicodeDecodeError as err:
                raise RenderError(f"values file {path}: not UTF-8 text (byte {err.start})") from None
        try:
            layer = helm.values_from_yaml(text) if text.strip() else {}
        except helm.HelmError as err:
            raise RenderError(f"failed to parse {path}: {_message(err)}") from None
        values = merge_values(values, layer or {})
    for layer in inline:
        values = merge_values(values, layer)
    for expression in set_json:
        trimmed = expression.strip()
        if trimmed.startswith("{"):  # Helm 4: a whole JSON object, merged like a file
            try:
                layer = json.loads(trimmed)
            except ValueError:
                layer = None
            if not isinstance(layer, dict):
                raise RenderError(f"failed parsing --set-json data JSON: {expression}")
            values = merge_values(values, layer)
        else:
            values = _parse_into(values, expression, "json")
    for expression in sets:
        values = _parse_into(values, expression, "set")
    for expression in set_string:
        values = _parse_into(values, expression, "string")
    for expression in set_file:
        values = _parse_into(values, expression, "file")
    return values


def _escape_key(key: str) -> str:
    return "".join("\\" + c if c in _KEY_SPECIALS else c for c in key)


def _replay(value: Any, path: str, out: list[str], in_list: bool) -> None:
    """Assignments `path=KEEP` that rebuild the shape of `value`: what Helm's
    ParseInto finds in place. Empty maps and lists under a map key are left to the
    merge afterwards (strvals treats a missing key and an empty one alike there)."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            if not isinstance(key, str) or key == "":
                raise ValueError("a key strvals cannot name")
            _replay(item, f"{path}.{_escape_key(key)}" if path else _escape_key(key), out, False)
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            _replay(item, f"{path}[{i}]", out, True)
    elif in_list or not isinstance(value, (Mapping, list)):
        out.append(path)


def _restore(parsed: Any, base: Any) -> Any:
    """`parsed` with every KEEP marker replaced by the value at the same place in `base`."""
    if isinstance(parsed, str) and parsed == _KEEP:
        return base
    if isinstance(parsed, dict):
        base = base if isinstance(base, Mapping) else {}
        return {k: _restore(v, base.get(k)) for k, v in parsed.items()}
    if isinstance(parsed, list):
        base = base if isinstance(base, list) else []
        return [_restore(v, base[i] if i < len(base) else None) for i, v in enumerate(parsed)]
    return parsed


def _parse_into(values: dict[str, Any], expression: str, kind: str) -> dict[str, Any]:
    """Helm's strvals.ParseInto(expression, values) for one --set flavour, with the
    SDK's parser: the current values are replayed as KEEP markers before the
    expression, so the parser sees (and indexes into) the same lists and types."""
    import helm_python as helm

    parse = {"json": helm.parse_set_json, "set": helm.parse_set_string,
             "string": helm.parse_set_string_values, "file": helm.parse_set_file}[kind]
    flag = _SET_FLAGS[kind]
    try:
        paths: list[str] = []
        _replay(values, "", paths, False)
    except ValueError:
        paths = []  # keys strvals cannot express: plain merge
    if not paths:
        return merge_values(values, _parse(parse, expression, flag))
    with tempfile.TemporaryDirectory(prefix="cozyrender-") as tmp:
        if kind == "file":
            keep = Path(tmp) / "keep"
            keep.write_text(_KEEP, encoding="utf-8")
            marker = _escape_key(str(keep))
        else:
            marker = json.dumps(_KEEP) if kind == "json" else _KEEP
        replay = ",".join(f"{p}={marker}" for p in paths)
        try:
            parsed = parse(f"{replay},{expression}")
        except helm.HelmError as err:
            _parse(parse, expression, flag)  # the expression's own error, if it has one
            raise RenderError(f"failed parsing {flag} data: {_message(err)}") from None
    return merge_values(values, _restore(parsed, values))


def _parse(parse: Callable[[str], dict[str, Any]], expression: str, flag: str
           ) -> dict[str, Any]:
    import helm_python as helm

    try:
        return parse(expression)
    except helm.HelmError as err:
        raise RenderError(f"failed parsing {flag} data: {_message(err)}") from None


def _message(err: BaseException) -> str:
    """Helm's message on one line (schema errors come as an indented list)."""
    return " ".join(str(err).split())


# Kubernetes' DNS-1123 label (k8s.io/apimachinery validation.IsDNS1123Label):
# what a namespace name must be.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_LABEL_MAX = 63
# Helm's release name rule (pkg/chart/common/util ValidateReleaseName): DNS-1123
# subdomain characters, at most 53 so that names derived from it still fit.
_RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
RELEASE_NAME_MAX = 53


def name_problem(name: str, what: str) -> str | None:
    """Why `name` is not a valid namespace (`what="namespace"`, a DNS-1123
    label) or release name (`what="release"`, Helm's rule), or None. Kubernetes
    refuses such a namespace at apply time; catching it at render time keeps a
    name like `tenant-Root` from reaching the objects derived from it."""
    if what == "namespace":
        rule, limit, pattern = "a DNS-1123 label", DNS1123_LABEL_MAX, _DNS1123_LABEL
    else:
        rule, limit, pattern = "a DNS-1123 subdomain as Helm requires", RELEASE_NAME_MAX, _RELEASE_NAME
    shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
    if not name:
        return f"the {what} name is empty; it must be {rule}"
    if len(name) > limit:
        return f"{what} name {shown} is {len(name)} characters; at most {limit} are allowed"
    if not pattern.fullmatch(name):
        return (f"{what} name {shown} is not {rule}: lower-case letters, digits and '-'"
                f"{', and dots between such parts' if what == 'release' else ''}, starting and "
                "ending with a letter or digit")
    return None


def check_names(release: str, namespace: str) -> None:
    """RenderError when the release or namespace name breaks Kubernetes' rules."""
    for name, what in ((namespace, "namespace"), (release, "release")):
        problem = name_problem(name, what)
        if problem:
            raise RenderError(problem)


@dataclass(frozen=True)
class Capabilities:
    """What `helm template --api-versions/-a` and `--kube-version` tell the chart:
    `.Capabilities.APIVersions` gets these on top of Helm's defaults, and
    `.Capabilities.KubeVersion` this version (Helm's default when None)."""

    api_versions: tuple[str, ...] = ()
    kube_version: str | None = None

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.api_versions:
            out["api_versions"] = list(self.api_versions)
        if self.kube_version:
            out["kube_version"] = self.kube_version
        return out


NO_CAPABILITIES = Capabilities()


def render_files(chart: str | Path, values: Mapping[str, Any], release: str, namespace: str,
                 capabilities: Capabilities = NO_CAPABILITIES) -> dict[str, str]:
    """The SDK's render: {template path: text}; CRDs (`crds/`) are not templates."""
    import helm_python as helm

    check_names(release, namespace)
    try:
        loaded = helm.Chart.load(str(chart))
    except helm.HelmError as err:
        raise RenderError(f"cannot load chart {chart}: {_message(err)}") from None
    try:
        helm.validate_release_name(release)
        options = capabilities.options()
        if not options:
            return loaded.render(dict(values), name=release, namespace=namespace)
        # Chart.render (helm-python-sdk 0.2.2) does not expose them; the native
        # render takes the same options as `helm template` (api_versions, kube_version).
        from helm_python import _native

        rendered = _native.call_string(
            "helm_render", loaded._raw(), json.dumps(dict(values)),
            json.dumps({"name": release, "namespace": namespace, **options}))
        return json.loads(rendered)
    except helm.HelmError as err:
        raise RenderError(_message(err)) from None
    finally:
        loaded.close()


def render(chart: str | Path, values: Mapping[str, Any], release: str, namespace: str,
           ordering: Sequence[str] = INSTALL_ORDER, capabilities: Capabilities = NO_CAPABILITIES
           ) -> Rendered:
    """Render a chart and sort it as Helm does."""
    return sort_manifests(render_files(chart, values, release, namespace, capabilities), ordering)


def template(chart: str | Path, values: Mapping[str, Any], release: str, namespace: str,
             ordering: Sequence[str] = INSTALL_ORDER, capabilities: Capabilities = NO_CAPABILITIES
             ) -> bytes:
    """The bytes `helm template RELEASE CHART -n NAMESPACE` (Helm 4) prints for these values."""
    return render(chart, values, release, namespace, ordering, capabilities).text().encode("utf-8")
