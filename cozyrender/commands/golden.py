"""`cozyrender golden`: golden-file tests for charts (see cozyrender.golden)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("golden")
@click.argument("cases_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--update", is_flag=True,
              help="Write the expected files from what renders now (review them like code).")
def command(cases_dir: Path, update: bool) -> None:
    """Render every case under CASES_DIR and compare with its expected raw.yaml and
    rendered.yaml. Exits 1 on a difference, a missing expected file, a stale file or
    a manifest the Kubernetes schemas refuse."""
    from cozyrender.golden import run_golden

    report = run_golden(cases_dir, update=update)
    for error in report.errors:
        click.echo(f"ERROR {error}", err=True)
    for result in report.results:
        name = _relative(result.case.path, cases_dir)
        for warning in result.warnings:
            click.echo(f"warning: {name}: {warning}", err=True)
        for path in result.written:
            click.echo(f"wrote {_relative(path, cases_dir)}")
        if result.ok:
            click.echo(f"ok    {name}")
        else:
            click.echo(f"FAIL  {name}")
            for problem in result.problems:
                click.echo("      " + problem.rstrip("\n").replace("\n", "\n      "))
    for path in report.stale:
        click.echo(f"STALE {_relative(path, cases_dir)}: no case renders or uses this file")
    failed = sum(not r.ok for r in report.results) + len(report.errors)
    click.echo(f"{len(report.results)} cases, {failed} failed, {len(report.stale)} stale files")
    if not report.ok:
        raise SystemExit(1)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base.resolve()))
    except ValueError:
        return str(path)
