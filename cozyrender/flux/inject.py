"""Injection: cozyrender's postRenderers for a Cozystack tenant HelmRelease, as pure functions.

cozystack-api writes each Tenant's HelmRelease itself (`tenant-<name>` in the
parent's namespace, chart from an ExternalArtifact, values from the parent's
`cozystack-values` Secret plus the Tenant's spec), with no field for
postRenderers; tenant-root's is written by the cozystack-basics chart. The
rule: such a release gets, first in `spec.postRenderers`, the entry that
`cozyrender flux` derives (`patches.derive`, the same code, no second
implementation) for the values helm-controller will render it with
(`valuesFrom` then `spec.values`, merged as Flux merges them), read from the
parent's state: its `cozystack-values` Secret (which carries `_cluster`, the
`gpu-vgpu` switch included, and `_namespace`, `vgpu` included) and its
namespace's `namespace.cozystack.io/vgpu` label, which must agree with the
Secret. The user's own postRenderers are kept, after ours.

Fail closed: when an input is missing or unreadable (no parent Secret, a
valuesFrom source cozyrender cannot read, a parent whose label and Secret
disagree, values the chart refuses), `InjectError` says why, and the webhook
refuses the write instead of letting the release run without the rules.
No I/O here: the caller reads the cluster and passes `ParentState`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cozyrender.entitlement import VGPU_LABEL, flag_value
from cozyrender.flux.errors import FluxError
from cozyrender.flux.helmrelease import HELMRELEASE_API, release_identity
from cozyrender.flux.patches import derive, is_owned
from cozyrender.values_secret import SECRET_NAME, VALUES_KEY

KIND_LABEL = "apps.cozystack.io/application.kind"
TENANT_KIND = "Tenant"
ROOT = "tenant-root"  # tenant-root's HelmRelease: name and namespace (cozystack-basics' tenant-root.yaml)


class InjectError(FluxError):
    """An input is missing or unreadable: the release must not run without the rules."""


@dataclass(frozen=True)
class ParentState:
    """What the cluster says about the parent of a tenant release (all read
    from the release's namespace, the parent tenant's).

    values: the parsed values.yaml of its `cozystack-values` Secret, None when
    the Secret is missing; values_problem: why it could not be read, if so.
    namespace_found: whether the namespace exists; vgpu_label: its
    `namespace.cozystack.io/vgpu` label (None: absent)."""

    values: Mapping[str, Any] | None
    namespace_found: bool = True
    vgpu_label: str | None = None
    values_problem: str | None = None


def is_tenant_release(obj: Mapping) -> bool:
    """A Cozystack tenant application's HelmRelease (the kind label), or tenant-root's."""
    if obj.get("apiVersion") != HELMRELEASE_API or obj.get("kind") != "HelmRelease":
        return False
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), Mapping) else {}
    if labels.get(KIND_LABEL) == TENANT_KIND:
        return True
    return metadata.get("name") == ROOT and metadata.get("namespace") == ROOT


def _where(release: Mapping) -> str:
    metadata = release.get("metadata") if isinstance(release.get("metadata"), Mapping) else {}
    return f"HelmRelease {metadata.get('namespace')}/{metadata.get('name')}"


def _spec(release: Mapping) -> Mapping:
    spec = release.get("spec")
    if not isinstance(spec, Mapping):
        raise InjectError(f"{_where(release)} has no spec")
    return spec


def check_values_from(release: Mapping) -> None:
    """valuesFrom must be what cozystack-api and cozystack-basics write: the
    Secret `cozystack-values`, key values.yaml, whole. Anything else is a
    source cozyrender does not read, so its render would not be Flux's."""
    entries = _spec(release).get("valuesFrom") or []
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise InjectError(f"{_where(release)}: spec.valuesFrom is not a list")
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise InjectError(f"{_where(release)}: a spec.valuesFrom entry is not a mapping")
        key = entry.get("valuesKey") or VALUES_KEY
        if (entry.get("kind"), entry.get("name"), key) != ("Secret", SECRET_NAME, VALUES_KEY) \
                or entry.get("targetPath"):
            raise InjectError(
                f"{_where(release)}: spec.valuesFrom {entry.get('kind')} {entry.get('name')} "
                f"(key {key}{', targetPath ' + str(entry['targetPath']) if entry.get('targetPath') else ''})"
                f" is not read by cozyrender: only Secret {SECRET_NAME} ({VALUES_KEY}) is")


def release_values(release: Mapping, parent: ParentState) -> dict[str, Any]:
    """The values helm-controller renders the release with: valuesFrom (the
    parent's cozystack-values), then spec.values, merged as Flux and Helm merge
    values layers (the same code as `cozyrender template -f`)."""
    from cozyrender.render.values import merge_values

    check_values_from(release)
    spec = _spec(release)
    layers: list[Mapping[str, Any]] = []
    if spec.get("valuesFrom"):
        if parent.values_problem:
            raise InjectError(f"{_where(release)}: Secret {SECRET_NAME}: {parent.values_problem}")
        if parent.values is None:
            optional = all(isinstance(e, Mapping) and e.get("optional") for e in spec["valuesFrom"])
            if not optional:
                raise InjectError(f"{_where(release)}: its values come from Secret {SECRET_NAME}, "
                                  "which is not in the namespace (the parent tenant is not ready)")
        else:
            layers.append(parent.values)
    values = spec.get("values")
    if values is not None:
        if not isinstance(values, Mapping):
            raise InjectError(f"{_where(release)}: spec.values is not a mapping")
        layers.append(values)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge_values(merged, layer)
    return merged


def check_parent(release: Mapping, parent: ParentState) -> None:
    """The parent namespace exists, and its vGPU label says what its values
    Secret says (the post-renderer writes both in one release): a parent half
    way through a reconcile, or edited by hand, is no basis for a child's render.
    tenant-root's release renders its own namespace, so only the Secret counts."""
    metadata = release.get("metadata") if isinstance(release.get("metadata"), Mapping) else {}
    if not parent.namespace_found:
        raise InjectError(f"{_where(release)}: namespace {metadata.get('namespace')} is not found")
    if metadata.get("name") == ROOT or parent.values is None:
        return
    namespace = parent.values.get("_namespace")
    secret_says = bool(flag_value(namespace.get("vgpu"))) if isinstance(namespace, Mapping) else False
    label_says = parent.vgpu_label == "true"
    if secret_says != label_says:
        raise InjectError(
            f"{_where(release)}: the parent namespace {metadata.get('namespace')} has label "
            f"{VGPU_LABEL}={parent.vgpu_label!r} but its Secret {SECRET_NAME} says _namespace.vgpu "
            f"is {str(secret_says).lower()}: the parent is not reconciled yet")


def postrenderers_for(release: Mapping, parent: ParentState, chart: str | Path) -> list[dict]:
    """cozyrender's entry (a list of zero or one) for this release, rendered
    from `chart` (the chart its ExternalArtifact serves) with the values Flux
    will use. Raises InjectError when that cannot be computed."""
    from cozyrender.flux.source import render_release

    if not is_tenant_release(release):
        raise InjectError(f"{_where(release)} is not a Cozystack tenant release")
    check_parent(release, parent)
    name, namespace = release_identity(release)
    if not name or not namespace:
        raise InjectError(f"{_where(release)}: no release name or namespace")
    values = release_values(release, parent)
    try:
        return derive(*render_release(chart, values, name, namespace)).post_renderers
    except InjectError:
        raise
    except FluxError as err:
        raise InjectError(f"{_where(release)}: {err}") from None


def merged_postrenderers(existing: object, ours: list[dict]) -> list:
    """Ours first, then the user's own entries in their order (any entry of
    ours already there, from an earlier injection, is replaced)."""
    kept = [e for e in existing if not is_owned(e)] if isinstance(existing, list) else []
    return [*ours, *kept]


def injected(release: Mapping, parent: ParentState, chart: str | Path) -> list:
    """The release's spec.postRenderers after injection."""
    return merged_postrenderers(_spec(release).get("postRenderers"),
                                postrenderers_for(release, parent, chart))


def json_patch(release: Mapping, post_renderers: list) -> list[dict]:
    """RFC 6902 operations setting spec.postRenderers (none when already so)."""
    spec = _spec(release)
    if "postRenderers" in spec:
        if spec["postRenderers"] == post_renderers:
            return []
        return [{"op": "replace", "path": "/spec/postRenderers", "value": post_renderers}]
    if not post_renderers:
        return []
    return [{"op": "add", "path": "/spec/postRenderers", "value": post_renderers}]
