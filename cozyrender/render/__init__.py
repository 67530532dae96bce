"""Render a chart in-process with the Helm SDK (helm-python-sdk) and print it
exactly as `helm template` does.

The SDK returns one rendered text per template file; `helm template` then
drops partials and empty files, splits each file on `---`, sorts the
documents (file path order, then a stable sort by Helm's install order of
kinds, hooks after the release's manifests) and prints each as
`---\\n# Source: <path>\\n<doc>\\n`. `format_manifests` reproduces that, so
the bytes match the pinned `helm template` binary (tests prove it).

The package: `manifests` (Helm's sorting and printing), `values` (Helm's values
merge and the --set family), `names` (release and namespace rules), `errors`;
rendering itself, with the capabilities `helm template -a/--kube-version`
passes, is here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cozyrender.render.errors import RenderError, _message
from cozyrender.render.manifests import (
    HOOK_ANNOTATION,
    HOOK_EVENTS,
    INSTALL_ORDER,
    INSTALL_ORDER_HELM3,
    NOTES_SUFFIX,
    Manifest,
    Rendered,
    format_manifests,
    go_trim_space,
    sort_manifests,
    split_manifests,
)
from cozyrender.render.names import (
    DNS1123_LABEL_MAX,
    RELEASE_NAME_MAX,
    check_names,
    name_problem,
)
from cozyrender.render.values import load_values, merge_values

__all__ = [
    "DNS1123_LABEL_MAX", "HOOK_ANNOTATION", "HOOK_EVENTS", "INSTALL_ORDER", "INSTALL_ORDER_HELM3",
    "NOTES_SUFFIX", "NO_CAPABILITIES", "RELEASE_NAME_MAX", "Capabilities", "Manifest", "RenderError",
    "Rendered", "check_names", "format_manifests", "go_trim_space", "load_values", "merge_values",
    "name_problem", "render", "render_files", "sort_manifests", "split_manifests", "template",
]


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
