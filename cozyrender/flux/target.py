"""What is rendered: release, namespace, chart and the HelmRelease's values,
from the command line and the HelmRelease, as Flux would render it.

The rule: what the command line says wins, the HelmRelease fills in the rest
(its release name and namespace as Flux computes them, its chart when it is a
path in a local checkout), and the two must agree, since the patches name
objects after the release. Without a HelmRelease, Helm's defaults apply
(`release-name`), except the namespace, which the patches name and which is
never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cozyrender.flux.errors import FluxError
from cozyrender.flux.helmrelease import HelmReleaseFile, check_identity, select
from cozyrender.flux.source import chart_path, refuse_values_files
from cozyrender.flux.stream import Stream

HELM_DEFAULT_RELEASE = "release-name"  # what `helm template CHART` names the release


@dataclass
class Target:
    """One render: its release, namespace and chart; the HelmRelease (if any),
    whose spec.values go after the -f files; notes for the user."""

    release: str
    namespace: str
    chart: str
    helmrelease: HelmReleaseFile | None = None
    inline: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resolve(release: str | None, namespace: str | None, chart: str | None,
            stream: Stream | None, checkout: Path | None, values_given: bool) -> Target:
    """The Target for these arguments (None: not given) and the HelmRelease file
    (`checkout`: where its GitRepository is checked out, if known)."""
    hr = None
    if stream is not None:
        hr = select(stream, release, namespace)
        hr_release, hr_namespace = hr.release_identity()
        release = release or hr_release
        namespace = namespace or hr_namespace
    if not namespace:
        raise FluxError("no namespace: pass -n NAMESPACE" + (
            " (the HelmRelease has no metadata.namespace or spec.targetNamespace)" if hr else ""))
    release = release or HELM_DEFAULT_RELEASE
    if hr is None:
        if chart is None:
            raise FluxError("missing CHART")
        return Target(release, namespace, chart)
    check_identity(hr, release, namespace)
    refuse_values_files(hr)
    if chart is None:
        chart = str(chart_path(hr, checkout))
    notes = []
    if hr.spec.get("valuesFrom") and not values_given:
        notes.append(f"{hr.path}: spec.valuesFrom is read from the cluster, which cozyrender "
                     "cannot do: pass those values with -f")
    return Target(release, namespace, chart, hr, [hr.values()], notes)
