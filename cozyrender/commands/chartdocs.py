"""`cozyrender chart docs`: write (or, with --check, verify) each chart's
values.schema.json and README parameters table from its values.yaml comments."""

from __future__ import annotations

import sys

import click

from cozyrender.commands import fail


@click.group("chart")
def command() -> None:
    """Chart maintenance: generate or check values schemas and README parameter tables."""


@command.command("docs")
@click.argument("charts", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, dir_okay=True))
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 with a diff when a file is out of date.")
def docs(charts: tuple[str, ...], check: bool) -> None:
    """Generate values.schema.json and the README `## Parameters` section of each
    CHART from the `## @param` comments in its values.yaml (plus
    values.schema.overlay.json, merged in)."""
    from cozyrender.chartdocs import DocsError, plan

    stale = []
    for chart in charts:
        try:
            updates = plan(chart)
        except DocsError as err:
            fail(str(err))
        for update in updates:
            if not update.changed:
                continue
            if check:
                stale.append(update)
                click.echo(update.diff(), nl=False)
            else:
                update.path.write_text(update.new, encoding="utf-8")
                click.echo(f"wrote {update.path}", err=True)
    if stale:
        names = ", ".join(str(u.path) for u in stale)
        click.echo(f"out of date: {names}; run `cozyrender chart docs` to regenerate", err=True)
        sys.exit(1)
