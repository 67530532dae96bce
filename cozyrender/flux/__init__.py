"""Flux helm-controller `postRenderers` that do what the post-renderer does.

Flux runs no executable post-renderer, only kustomize patches, so cozyrender
derives them from the chart and values and keeps them in the HelmRelease.
Modules, one concern each (kustomize's kio is the model: read a stream, small
filters, write it):

    objects      a rendered release's objects, keyed and compared as kustomize does
    patches      derive: raw release -> one kustomize entry (the post-render's transcript)
    printing     an entry as block YAML at a file's own indentation
    stream       reader/writer of a multi-document GitOps file, byte for byte
    helmrelease  find the HelmRelease meant in a stream; its release, namespace, values
    source       the chart a HelmRelease names, when it is on this machine; Helm's output
    target       release, namespace, chart and values: the command line, filled in from the HelmRelease
    filters      the decision: one EntryPlan (keep, insert, replace, remove)
    drift        the file's entry against the derived one, as a unified diff
    editor       carry the plan out as a text edit; the --helmrelease pipeline, verified

This package re-exports the names the command and the tests use.
"""

from __future__ import annotations

from cozyrender.flux.drift import comparable, unified_diff
from cozyrender.flux.editor import Written, apply, write_entry
from cozyrender.flux.errors import FluxError
from cozyrender.flux.filters import EntryPlan, plan_entry
from cozyrender.flux.helmrelease import (
    HELMRELEASE_API,
    HelmReleaseFile,
    check_identity,
    identities,
    load_helmrelease,
    load_helmrelease_text,
    release_identity,
    select,
    shorten_name,
)
from cozyrender.flux.objects import ObjectKey, describe, object_key, parse_objects, same
from cozyrender.flux.patches import (
    ABSENT,
    MARKER,
    absence_guards,
    decided_by,
    Derived,
    delete_patch,
    derive,
    diff_operations,
    guard,
    is_owned,
    per_annotation,
    pointer,
    read_by_rules,
    selects,
    target_for,
)
from cozyrender.flux.printing import Layout, flow, format_post_renderers, render_item
from cozyrender.flux.source import (chart_path, git_root, is_chart, refuse_values_files, render_raw,
    render_release, render_values)
from cozyrender.flux.stream import Document, Stream, read_file, read_text
from cozyrender.flux.target import Target, resolve

__all__ = [
    "ABSENT", "HELMRELEASE_API", "MARKER", "absence_guards", "decided_by", "Derived", "Document", "EntryPlan", "FluxError", "HelmReleaseFile",
    "Layout", "ObjectKey", "Stream", "Target", "Written", "apply", "chart_path", "check_identity",
    "comparable", "delete_patch", "derive", "describe", "diff_operations", "flow",
    "format_post_renderers", "git_root", "identities", "guard", "is_chart", "is_owned", "load_helmrelease",
    "load_helmrelease_text", "object_key", "parse_objects", "per_annotation", "plan_entry",
    "pointer", "read_by_rules", "read_file", "read_text", "refuse_values_files", "release_identity", "render_item",
    "render_raw", "render_release", "render_values", "same", "resolve", "select", "selects", "shorten_name", "target_for", "unified_diff",
]
