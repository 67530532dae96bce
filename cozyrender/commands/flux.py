"""`cozyrender flux`: the post-render as Flux HelmRelease postRenderers.

Exit status: 0 done (or in sync), 1 drift (--check), 2 an error.
"""

from __future__ import annotations

import sys

import click

EXIT_DRIFT = 1
EXIT_ERROR = 2


class FluxCommandError(click.ClickException):
    exit_code = EXIT_ERROR  # 1 is reserved for drift, so CI can tell them apart


@click.command("flux")
@click.argument("chart", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.argument("release")
@click.option("-n", "--namespace", required=True, help="The release namespace.")
@click.option("-f", "--values", "values_files", multiple=True, type=click.Path(dir_okay=False),
              help="A values file (e.g. what the HelmRelease's valuesFrom gives); repeatable.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A value in Helm's --set syntax; repeatable, applied last.")
@click.option("--helmrelease", "helmrelease", type=click.Path(dir_okay=False),
              help="Write the postRenderers into this HelmRelease manifest (its spec.values "
                   "are merged after the -f files).")
@click.option("--check", is_flag=True,
              help="With --helmrelease: write nothing; exit 1 with a diff when the file's "
                   "cozyrender entry is not what the chart and values give now.")
def command(chart: str, release: str, namespace: str, values_files: tuple[str, ...],
            sets: tuple[str, ...], helmrelease: str | None, check: bool) -> None:
    """Print Flux postRenderers (kustomize patches) that post-render CHART as
    `cozyrender post-render` does, for release RELEASE in NAMESPACE.

    The patches are derived by post-rendering Helm's output in process and
    comparing the objects, so they hold only for these values: regenerate
    them when the values change (--check in CI tells you).
    """
    from cozyrender import flux

    if check and not helmrelease:
        raise click.UsageError("--check needs --helmrelease FILE")
    try:
        hr = None
        inline: list[dict] = []
        if helmrelease:
            hr = flux.load_helmrelease(helmrelease)
            flux.check_identity(hr, release, namespace)
            inline.append(hr.values())
            if hr.spec.get("valuesFrom") and not values_files:
                click.echo(f"note: {helmrelease} has spec.valuesFrom, which cozyrender cannot "
                           "read from the cluster: pass those values with -f", err=True)
        raw = flux.render_raw(chart, release, namespace, values_files, sets, inline)
        derived = flux.derive(raw)
    except flux.FluxError as err:
        raise FluxCommandError(str(err)) from None
    for warning in derived.warnings:
        click.echo(f"warning: post-render: {warning}", err=True)

    if hr is None:
        sys.stdout.write(flux.format_post_renderers(derived.post_renderers))
        return
    try:
        difference = flux.drift(hr, derived.post_renderers)
        if check:
            if difference:
                sys.stdout.write(difference)
                click.echo(f"{helmrelease}: the cozyrender postRenderers entry is out of date; "
                           f"run the same command without --check", err=True)
                sys.exit(EXIT_DRIFT)
            click.echo(f"{helmrelease}: in sync", err=True)
            return
        if not difference:
            click.echo(f"{helmrelease}: already up to date", err=True)
            return
        written = flux.write_entry(hr, derived.post_renderers)
    except flux.FluxError as err:
        raise FluxCommandError(str(err)) from None
    for warning in written.warnings:
        click.echo(f"warning: {warning}", err=True)
    try:
        with open(helmrelease, "w", encoding="utf-8", newline="") as out:  # line breaks as read
            out.write(written.text)
    except OSError as err:
        raise FluxCommandError(f"cannot write {helmrelease}: {err.strerror}") from None
    click.echo(f"{helmrelease}: wrote {len(derived.patches)} patch(es)", err=True)
