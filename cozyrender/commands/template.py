"""`cozyrender template`: render a chart with the Helm SDK, as `helm template`
prints it, then post-render it (unless --raw)."""

from __future__ import annotations

import sys

import click


def post_render_bytes(data: bytes) -> bytes:
    """Run the post-renderer in process; warnings go to stderr.
    Raises click.ClickException with the post-renderer's one-line message."""
    from cozyrender.postrender import PostRenderError, post_render

    try:
        result = post_render(data)
    except PostRenderError as err:
        raise click.ClickException(f"post-render: {err}") from None
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    return result.output


@click.command("template")
@click.argument("chart", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.argument("release", required=False)
@click.option("-n", "--namespace", required=True, help="The release namespace.")
@click.option("-f", "--values", "values_files", multiple=True, type=click.Path(dir_okay=False),
              help="A values file; repeat to merge several, later files win.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A value in Helm's --set syntax; repeatable, applied after the files.")
@click.option("--set-string", "set_string", multiple=True, metavar="KEY=VALUE",
              help="As --set, but every value stays a string.")
@click.option("--set-json", "set_json", multiple=True, metavar="KEY=JSON",
              help="As --set, each value a JSON document (or a whole JSON object).")
@click.option("--set-file", "set_file", multiple=True, metavar="KEY=PATH",
              help="As --set, each value read from a file.")
@click.option("--raw", is_flag=True, help="Print Helm's output without post-rendering it.")
def command(chart: str, release: str | None, namespace: str, values_files: tuple[str, ...],
            sets: tuple[str, ...], set_string: tuple[str, ...], set_json: tuple[str, ...],
            set_file: tuple[str, ...], raw: bool) -> None:
    """Render CHART as `helm template RELEASE CHART -n NAMESPACE` would, then post-render it.

    RELEASE defaults to "release-name", as for `helm template`. Values apply in
    Helm's order: -f files, then --set-json, --set, --set-string, --set-file.
    """
    from cozyrender.render import RenderError, load_values, template

    try:
        name = release or "release-name"
        values = load_values(values_files, sets, set_json=set_json,
                             set_string=set_string, set_file=set_file)
        data = template(chart, values, name, namespace)
    except RenderError as err:
        raise click.ClickException(str(err)) from None
    if not raw:
        data = post_render_bytes(data)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
