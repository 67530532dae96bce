"""Where the chart comes from, and Helm's output for it.

A HelmRelease names its chart by reference, not by path: `spec.chart.spec.chart`
is a path inside the artifact of its `sourceRef` (a GitRepository or Bucket),
or a chart name in a HelmRepository; `spec.chartRef` points at an
OCIRepository or HelmChart object. Only the first kind exists on this machine:
a path inside a local checkout of the source. By default that checkout is the
Git work tree holding the HelmRelease file (Flux's usual layout: the repository
that holds the HelmRelease is its GitRepository); `--chart-dir` names another.
Anything else needs the chart on the command line.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cozyrender.flux.errors import FluxError
from cozyrender.flux.helmrelease import HelmReleaseFile

LOCAL_SOURCES = ("GitRepository", "Bucket")


def git_root(start: Path) -> Path | None:
    """The closest folder at or above `start` holding `.git` (a folder, or a
    file in a linked work tree), or None."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def is_chart(path: Path) -> bool:
    """A chart Helm can load from disk: a folder with Chart.yaml, or an archive file."""
    return (path / "Chart.yaml").is_file() if path.is_dir() else path.is_file()


def chart_path(hr: HelmReleaseFile, checkout: Path | None) -> Path:
    """The local chart the HelmRelease renders: spec.chart.spec.chart inside
    `checkout` (a local copy of its GitRepository or Bucket), or a FluxError
    saying why it cannot be found here and what to pass instead."""
    where = f"{hr.path}: HelmRelease {hr.label()}"
    spec = hr.spec
    if spec.get("chartRef") is not None:
        ref = spec["chartRef"] if isinstance(spec["chartRef"], Mapping) else {}
        raise FluxError(f"{where} takes its chart from spec.chartRef ({ref.get('kind')} "
                        f"{ref.get('name')}), which cozyrender cannot read: pass CHART")
    chart = spec.get("chart") if isinstance(spec.get("chart"), Mapping) else {}
    template = chart.get("spec") if isinstance(chart.get("spec"), Mapping) else {}
    name = template.get("chart")
    if not isinstance(name, str) or not name:
        raise FluxError(f"{where} has no spec.chart.spec.chart: pass CHART")
    source = template.get("sourceRef") if isinstance(template.get("sourceRef"), Mapping) else {}
    kind = source.get("kind")
    if kind not in LOCAL_SOURCES:
        raise FluxError(f"{where}: chart {name!r} comes from {kind or 'no sourceRef'} "
                        f"{source.get('name') or ''}".rstrip() + ", not a local checkout: pass "
                        "CHART (e.g. a `helm pull --untar` of it)")
    # Flux joins the path to the artifact's root securely: `/x` is `x`, `..` cannot leave it.
    relative = posixpath.normpath("/" + name).lstrip("/")
    if checkout is None:
        raise FluxError(f"{where}: chart {name!r} is a path in {kind} {source.get('name')}; "
                        "pass --chart-dir (its local checkout) or CHART")
    path = checkout / relative if relative else checkout
    if not is_chart(path):
        raise FluxError(f"{where}: chart {name!r} of {kind} {source.get('name')} is not at "
                        f"{path} (no Chart.yaml): pass --chart-dir (its local checkout) or CHART")
    return path


def refuse_values_files(hr: HelmReleaseFile) -> None:
    """spec.chart.spec.valuesFiles replaces the chart's own values.yaml by other
    files of the source; cozyrender renders with the chart's defaults, so its
    patches would describe another render: refuse rather than be wrong."""
    chart = hr.spec.get("chart") if isinstance(hr.spec.get("chart"), Mapping) else {}
    template = chart.get("spec") if isinstance(chart.get("spec"), Mapping) else {}
    if template.get("valuesFiles"):
        raise FluxError(f"{hr.path}: HelmRelease {hr.label()} sets spec.chart.spec.valuesFiles, "
                        "which replace the chart's default values; cozyrender renders with the "
                        "chart's values.yaml: move those values to -f files")


def render_raw(chart: str | Path, release: str, namespace: str, values_files: Sequence[str] = (),
               sets: Sequence[str] = (), inline: Sequence[Mapping[str, Any]] = (), *,
               set_json: Sequence[str] = (), set_string: Sequence[str] = (),
               set_file: Sequence[str] = ()) -> bytes:
    """Helm's output for the chart, exactly as `cozyrender template --raw` prints
    it: values from the -f files, the inline layers (a HelmRelease's
    spec.values), then the --set family in Helm's order."""
    from cozyrender.render import RenderError, load_values

    try:
        values = load_values(values_files, sets, inline, set_json=set_json,
                             set_string=set_string, set_file=set_file)
    except RenderError as err:
        raise FluxError(str(err)) from None
    return render_values(chart, values, release, namespace)


def render_values(chart: str | Path, values: Mapping[str, Any], release: str, namespace: str
                  ) -> bytes:
    """Helm's output for the chart with these (already merged) user values."""
    return render_release(chart, values, release, namespace)[0]


def render_release(chart: str | Path, values: Mapping[str, Any], release: str, namespace: str
                   ) -> tuple[bytes, list | None]:
    """`render_values`' bytes, and their documents as SafeLoader reads them
    (the render's own reading: `Rendered.documents`, None when it cannot stand in)."""
    from cozyrender.render import RenderError, render

    try:
        rendered = render(chart, values, release, namespace)
    except RenderError as err:
        raise FluxError(str(err)) from None
    return rendered.text().encode("utf-8"), rendered.documents()
