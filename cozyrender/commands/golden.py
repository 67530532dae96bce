"""`cozyrender golden`: golden-file tests for charts (see cozyrender.golden)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cozyrender.commands import emit, examples, fail, format_error, output_option, plural, warn


@click.command("golden", epilog=examples(
    "cozyrender golden tests/golden                      # compare; exit 1 on any difference",
    "cozyrender golden tests/golden --update             # write the expected files, then review them",
    "cozyrender golden tests/golden --junit golden.xml   # JUnit XML for CI as well",
    "cozyrender golden tests/golden -o json | jq '.cases[] | select(.ok | not)'"))
@click.argument("cases_dir", metavar="CASES_DIR", type=click.Path(path_type=Path))
@click.option("--update", is_flag=True,
              help="Write the expected files from what renders now (review them like code).")
@click.option("--junit", "junit_file", metavar="FILE",
              help="Also write the results as JUnit XML to FILE ('-' for stdout), for CI.")
@output_option("table", "json", "yaml")
def command(cases_dir: Path, update: bool, junit_file: str | None, output: str) -> None:
    """Render every case under CASES_DIR and compare it with its expected raw.yaml
    and rendered.yaml.

    A case is a folder with a case.yaml (chart, release, namespace; optional
    values, set, inline, parent, expect_error, api_versions, kube_version).
    Files and folders whose names start with '.' are ignored. Exits 1 on a
    difference, a missing expected file, a stale file, a case that cannot be
    loaded or a manifest the Kubernetes schemas refuse.
    """
    from cozyrender.golden import run_golden

    if not cases_dir.exists():
        fail(f"{cases_dir}: no such folder")
    if not cases_dir.is_dir():
        fail(f"{cases_dir}: not a folder; give the folder that holds the cases")
    if junit_file == "-" and output != "table":
        fail("--junit - writes to stdout, which -o json/yaml uses; give --junit a file")
    report = run_golden(cases_dir, update=update)
    if report.bad_input:  # nothing ran: one line, exit 2
        more = len(report.bad_input) - 1
        fail(report.bad_input[0] + (f" (and {plural(more, 'other case')} that cannot be read)" if more else ""))

    def name(path: Path) -> str:
        return _relative(path, cases_dir)

    if junit_file:
        from cozyrender.golden.junit import junit_xml

        data = junit_xml(report, cases_dir, name)
        if junit_file == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            try:
                Path(junit_file).write_bytes(data)
            except OSError as err:
                from cozyrender.commands import os_problem

                fail(f"--junit {junit_file}: {os_problem(err)}")
    failed = sum(not r.ok for r in report.results) + len(report.errors)
    if output != "table":
        emit(_as_data(report, name, failed), output)
    elif junit_file != "-":
        _print_table(report, name, failed)
    if not report.ok:
        raise SystemExit(1)


def _print_table(report, name, failed: int) -> None:
    for error in report.errors:  # a case that cannot be run, or no case at all
        click.echo(format_error(error), err=True)
    for result in report.results:
        case = name(result.case.path)
        for warning in result.warnings:
            warn(f"{case}: {warning}")
        for path in result.written:
            click.echo(f"wrote {name(path)}")
        if result.ok:
            click.echo(f"ok    {case}")
        else:
            click.echo(f"FAIL  {case}")
            for problem in result.problems:
                click.echo("      " + problem.rstrip("\n").replace("\n", "\n      "))
    for path in report.stale:
        click.echo(f"STALE {name(path)}: no case renders or uses this file")
    click.echo(f"{plural(len(report.results), 'case')}, {failed} failed, "
               f"{plural(len(report.stale), 'stale file')}")


def _as_data(report, name, failed: int) -> dict:
    return {
        "ok": report.ok,
        "cases": [{"name": name(r.case.path), "ok": r.ok, "problems": r.problems,
                   "warnings": r.warnings, "written": [name(p) for p in r.written],
                   "seconds": round(r.seconds, 3)} for r in report.results],
        "errors": list(report.errors),
        "stale": [name(p) for p in report.stale],
        "summary": {"cases": len(report.results), "failed": failed, "stale": len(report.stale)},
    }


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base.resolve()))
    except ValueError:
        return str(path)
