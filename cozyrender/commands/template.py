"""`cozyrender template`: render a chart with the Helm SDK, as `helm template`
prints it, then post-render it (unless --raw)."""

from __future__ import annotations

import sys
import time

import click

from cozyrender.commands import examples, fail, user_values, values_options, values_warnings, warn
from cozyrender.commands import parent_values as parent_layer

DEFAULT_RELEASE = "release-name"  # helm template's name when none is given


def post_render_bytes(data: bytes) -> bytes:
    """Run the post-renderer in process; its warnings go to stderr as the
    command's. A refusal is a CommandError with the post-renderer's one line."""
    from cozyrender.postrender import PostRenderError, post_render

    try:
        result = post_render(data)
    except PostRenderError as err:
        fail(f"post-render: {err}")
    for warning in result.warnings:
        warn(f"post-render: {warning}")
    return result.output


def release_and_chart(names: tuple[str, ...], generate_name: bool) -> tuple[str, str]:
    """Helm's `[NAME] CHART`: one argument is the chart (named `release-name`, or
    generated with -g); two are the release, then the chart."""
    from cozyrender.resources import chart_path

    if len(names) == 2:
        if generate_name:
            fail("give either a release name or --generate-name, not both")
        release, chart = names
    elif len(names) == 1:
        chart = names[0]
        release = DEFAULT_RELEASE
        if generate_name:
            # helm: the chart's name and the Unix time, e.g. tenant-1764730000
            release = f"{_chart_name(chart_path(chart))}-{int(time.time())}"
    else:
        fail("give [RELEASE] CHART, e.g. `cozyrender template tenant-a charts/tenant -n tenant-root`"
             if not names else f"expected [RELEASE] CHART, got {len(names)} arguments")
    resolved = chart_path(chart)
    if not resolved.exists():
        hint = ""
        if chart_path(release).exists():
            hint = f" (the chart comes last, as for helm: cozyrender template {chart} {release})"
        fail(f"chart {chart}: no such folder or archive{hint}")
    return release, str(resolved)


def _chart_name(path) -> str:
    """The chart's name: Chart.yaml's `name`, else the archive's name without its version."""
    import yaml

    try:
        name = yaml.safe_load((path / "Chart.yaml").read_text(encoding="utf-8")).get("name")
        if isinstance(name, str) and name:
            return name
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        pass
    return path.name.removesuffix(".tgz").rsplit("-", 1)[0] or "release"


@click.command("template", epilog=examples(
    "cozyrender template tenant-a charts/tenant -n tenant-root --set gpu.vgpu=true",
    "kubectl get secret cozystack-values -n tenant-a -o yaml > parent.yaml     # the parent's values",
    "cozyrender template b charts/tenant -n tenant-a --parent-values parent.yaml --set gpu.vgpu=true",
    "cozyrender template tenant-a charts/tenant -n tenant-root -f values.yaml --raw",
    "cozyrender template tenant-a tenant -n tenant-root      # the chart bundled with cozyrender",
    "helm get values tenant-a -n tenant-root -o yaml | cozyrender template tenant-a charts/tenant -n tenant-root -f -",
    "cozyrender template charts/cozystack-basics -n cozy-system -a cozystack.io/v1alpha1/GPUClass"))
@click.argument("names", nargs=-1, metavar="[RELEASE] CHART")
@click.option("-n", "--namespace", default="default", show_default=True, help="The release namespace.")
@click.option("-g", "--generate-name", is_flag=True, help="Generate the release name (CHART-<unix time>).")
@values_options
@click.option("-a", "--api-versions", "api_versions", multiple=True, metavar="GROUP/VERSION[/KIND]",
              help="An API version for .Capabilities.APIVersions, as `helm template -a`; repeatable, "
                   "comma-separated lists too.")
@click.option("--kube-version", metavar="VERSION",
              help="The Kubernetes version for .Capabilities.KubeVersion, as `helm template --kube-version`.")
@click.option("--raw", is_flag=True, help="Print Helm's output without post-rendering it.")
def command(names: tuple[str, ...], namespace: str, generate_name: bool, values_files: tuple[str, ...],
            sets: tuple[str, ...], set_string: tuple[str, ...], set_json: tuple[str, ...],
            set_file: tuple[str, ...], parent_values: str | None, api_versions: tuple[str, ...],
            kube_version: str | None, raw: bool) -> None:
    """Render CHART as `helm template [RELEASE] CHART -n NAMESPACE` would, then post-render it.

    CHART is a chart folder or archive, or `tenant` / `cozystack-basics` for the
    charts bundled with cozyrender. RELEASE defaults to "release-name", as for
    `helm template`. Values apply in Helm's order: -f files, then --set-json,
    --set, --set-string, --set-file. The namespace and release names must be
    valid Kubernetes names (DNS-1123).
    """
    from cozyrender.render import Capabilities, RenderError, template

    release, chart = release_and_chart(names, generate_name)
    from cozyrender.render.values import merge_values

    values = merge_values(parent_layer(parent_values, namespace),
                          user_values(values_files, sets, set_string, set_json, set_file))
    capabilities = Capabilities(
        tuple(v.strip() for item in api_versions for v in item.split(",") if v.strip()), kube_version)
    try:
        data = template(chart, values, release, namespace, capabilities=capabilities)
    except RenderError as err:
        fail(str(err))
    if not raw:
        data = post_render_bytes(data)
    values_warnings(chart, values, namespace)  # once the render stands: no warning before an error
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
