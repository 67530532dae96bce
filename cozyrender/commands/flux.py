"""`cozyrender flux`: the post-render as Flux HelmRelease postRenderers.

A thin shell over `cozyrender.flux`: it works out the release, namespace,
chart and values from the arguments and the HelmRelease, then prints the
entry, writes it into the file, or checks it.

Exit status: 0 done (or in sync), 1 drift (--check), 2 an error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from cozyrender.commands import (
    STDIN,
    examples,
    fail,
    os_problem,
    output_option,
    read_bytes,
    source_name,
    user_values,
    values_options,
    warn,
)
from cozyrender.kube.names import DNS1123_SUBDOMAIN

EXIT_DRIFT = 1

# ---------------------------------------------------------------- the command

# Helm's release name rule (pkg/chartutil ValidateReleaseName) is a DNS-1123
# subdomain: an argument that cannot be a release name is a chart path.


def _release_and_chart(args: Sequence[str], helmrelease: str | None) -> tuple[str | None, str | None]:
    """`[RELEASE] [CHART]`, as `helm template [NAME] [CHART]` reads them: two
    arguments are RELEASE CHART, one is CHART. With --helmrelease, the chart and
    the release can come from the file, so one argument that is not a path but
    is a release name picks the HelmRelease instead."""
    if len(args) > 2:
        fail(f"expected [RELEASE] [CHART], got {len(args)} arguments")
    if len(args) == 2:
        return args[0], args[1]
    if len(args) == 1:
        arg = args[0]
        if helmrelease and not os.path.exists(arg) and DNS1123_SUBDOMAIN.fullmatch(arg):
            return arg, None
        return None, arg
    if not helmrelease:
        fail("missing CHART (a chart folder or archive; or --helmrelease FILE to take it from "
             "a HelmRelease)")
    return None, None


@click.command("flux", epilog=examples(
    "cozyrender flux tenant-a charts/tenant -n tenant-root -f examples/flux/parent-values.yaml",
    "cozyrender flux -f examples/flux/parent-values.yaml --helmrelease examples/flux/tenant-a.yaml",
    "cozyrender flux tenant-b -f examples/flux/parent-values.yaml --helmrelease examples/flux/tenants.yaml --check",
    "cat hr.yaml | cozyrender flux -f parent.yaml --chart-dir ../platform --helmrelease - > new.yaml",
))
@click.argument("args", nargs=-1, metavar="[RELEASE] [CHART]")
@click.option("-n", "--namespace", help="The release namespace (default: the HelmRelease's).")
@values_options
@click.option("--helmrelease", "helmrelease", metavar="FILE",
              help="Write the postRenderers into the HelmRelease in FILE ('-': read standard "
                   "input, write the file to standard output). Its spec.values are merged after "
                   "the -f files; release, namespace and chart come from it when not given.")
@click.option("--chart-dir", "chart_dir", metavar="DIR",
              help="A local checkout of the HelmRelease's GitRepository (or Bucket): its "
                   "spec.chart.spec.chart is read relative to DIR (default: the Git work tree "
                   "holding FILE).")
@click.option("--check", is_flag=True,
              help="With --helmrelease: write nothing; exit 1 with a diff when the file's "
                   "cozyrender entry is not what the chart and values give now.")
@output_option("yaml", "json", default="yaml", help="yaml (default) or json: how the entry is printed.")
def command(args: tuple[str, ...], namespace: str | None, values_files: tuple[str, ...],
            sets: tuple[str, ...], set_string: tuple[str, ...], set_json: tuple[str, ...],
            set_file: tuple[str, ...], parent_values: str | None, helmrelease: str | None,
            chart_dir: str | None, check: bool, output: str) -> None:
    """Print Flux postRenderers (kustomize patches) that post-render CHART as
    `cozyrender post-render` does, for release RELEASE in NAMESPACE.

    Arguments follow `helm template [RELEASE] CHART`; RELEASE defaults to
    "release-name". With --helmrelease FILE (one HelmRelease, or several: the
    one named RELEASE), the release name, namespace and chart (a path in its
    GitRepository) come from the HelmRelease when not given.

    The patches are derived by post-rendering Helm's output in process and
    comparing the objects, so they hold only for these values: regenerate
    them when the values change (--check in CI tells you).
    """
    from cozyrender import flux

    if check and not helmrelease:
        fail("--check needs --helmrelease FILE")
    if [*values_files, helmrelease].count(STDIN) > 1:
        fail("standard input ('-') can be given only once")
    if helmrelease and output != "yaml":
        fail(f"-o {output} is for printing the list; with --helmrelease the file is written")
    from cozyrender.resources import chart_path

    release, chart = _release_and_chart(args, helmrelease)
    if chart is not None:
        chart = str(chart_path(chart))  # a bundled chart by name, as `template` takes it
        if not os.path.exists(chart):
            fail(f"{chart}: no such chart (a folder with Chart.yaml, or a chart archive)")
    if chart_dir is not None and not os.path.isdir(chart_dir):
        fail(f"--chart-dir {chart_dir}: no such folder")
    stream = None
    if helmrelease:
        name = source_name(helmrelease)
        try:
            stream = flux.read_text(_decode(read_bytes(helmrelease), name), name)
        except flux.FluxError as err:
            fail(str(err))
    checkout = _checkout(helmrelease, chart_dir) if stream else None
    if [*values_files, helmrelease, parent_values].count(STDIN) > 1:
        fail("standard input ('-') can be given only once")
    values = (values_files, sets, set_string, set_json, set_file, parent_values)
    if check and stream is not None and release is None and chart is None:
        try:
            releases = flux.identities(stream)
        except flux.FluxError as err:
            fail(str(err))
        if len(releases) > 1:  # every HelmRelease of the file, one line each (issue 19 item 11)
            _check_all(stream, releases, namespace, checkout, values)
            return
    hr, written, patches, derived = _derive(release, namespace, chart, stream, checkout, values)
    if hr is None:
        _print(flux.format_post_renderers(derived.post_renderers), derived.post_renderers, output)
        return
    _finish(hr.path, helmrelease, written, check, patches)


def _derive(release, namespace, chart, stream, checkout, values, quiet: bool = False):
    """(the HelmRelease or None, the entry written into it or None, the patch
    count, the derived entry) for one release; warnings said as they come."""
    from cozyrender import flux
    from cozyrender.commands import parent_values as parent_layer, values_warnings
    from cozyrender.render.values import merge_values

    values_files, sets, set_string, set_json, set_file, parent = values
    try:
        target = flux.resolve(release, namespace, chart, stream, checkout,
                              values_given=bool(values_files) or parent is not None)
        for note in target.notes:
            warn(note)
        merged = merge_values(parent_layer(parent, target.namespace),
                              user_values(values_files, sets, set_string, set_json, set_file, target.inline))
        raw, documents = flux.render_release(target.chart, merged, target.release, target.namespace)
        derived = flux.derive(raw, documents)
    except flux.FluxError as err:
        fail(str(err))
    except RecursionError:  # the HelmRelease's inline values, hundreds of levels deep
        fail(f"{stream.path if stream is not None else 'the values'}: nested too deeply to read (hundreds of levels)")
    for warning in derived.warnings:
        warn(f"post-render: {warning}")
    hr = target.helmrelease
    if hr is None:
        values_warnings(str(target.chart), merged, target.namespace)  # once the answer stands: no warning before an error
        return None, None, len(derived.patches), derived
    try:
        written = flux.write_entry(hr, derived.post_renderers)
    except flux.FluxError as err:
        fail(str(err))
    except RecursionError:  # the file's own values, hundreds of levels deep (-f files are bounded in render)
        fail(f"{hr.path}: {hr.label()}: nested too deeply to read (hundreds of levels)")
    for warning in written.warnings:
        warn(warning)
    values_warnings(str(target.chart), merged, target.namespace)
    return hr, written, len(derived.patches), derived


def _check_all(stream, releases, namespace, checkout, values) -> None:
    """--check over every HelmRelease of the file (those in NAMESPACE, when
    given): a diff on stdout for each out of date, one line each on stderr;
    exit 1 when any is out of date."""
    chosen = [(name, ns) for name, ns in releases if namespace is None or ns in (None, namespace)]
    if not chosen:
        fail(f"{stream.path}: no HelmRelease in namespace {namespace!r}")
    drift = 0
    for name, ns in chosen:
        hr, written, _, _ = _derive(name, ns or namespace, None, stream, checkout, values)
        where = f"{hr.path}: {hr.label()}"
        if written.plan.changes:
            drift += 1
            sys.stdout.write(written.plan.diff(f"{hr.path} ({hr.label()})"))
            click.echo(f"{where}: out of date", err=True)
        else:
            click.echo(f"{where}: in sync", err=True)
    if drift:
        click.echo(f"{stream.path}: {drift} of {len(chosen)} HelmReleases out of date; run the same command "
                   "with RELEASE and without --check for each", err=True)
        sys.exit(EXIT_DRIFT)


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        fail(f"{name}: not UTF-8 text (byte {err.start}: {err.reason})")


def _checkout(helmrelease: str, chart_dir: str | None) -> Path | None:
    """Where the HelmRelease's GitRepository is checked out: --chart-dir, else
    the Git work tree holding the file (the current folder's, for stdin)."""
    from cozyrender.flux import git_root

    if chart_dir is not None:
        return Path(chart_dir)
    return git_root(Path.cwd() if helmrelease == STDIN else Path(helmrelease).parent)


def _print(text: str, post_renderers: list[dict], output: str) -> None:
    if output == "json":
        import json

        click.echo(json.dumps({"postRenderers": post_renderers}, indent=2))
        return
    sys.stdout.write(text)


def _finish(name: str, helmrelease: str, written, check: bool, patches: int) -> None:
    """Report, and write the file (or standard output for `-`), as the plan says."""
    plan = written.plan
    if check:
        if plan.changes:
            sys.stdout.write(plan.diff(name))
            click.echo(f"{name}: the cozyrender postRenderers entry is out of date; "
                       "run the same command without --check", err=True)
            sys.exit(EXIT_DRIFT)
        click.echo(f"{name}: in sync", err=True)
        return
    if helmrelease == STDIN:  # a filter: the whole file out, changed or not
        sys.stdout.buffer.write(written.text.encode("utf-8"))
        sys.stdout.flush()
    elif plan.changes:
        try:
            with open(helmrelease, "w", encoding="utf-8", newline="") as out:  # line breaks as read
                out.write(written.text)
        except OSError as err:
            fail(f"cannot write {helmrelease}: {os_problem(err)}")
    if not plan.changes:
        click.echo(f"{name}: already up to date", err=True)
    elif plan.action == "remove":
        click.echo(f"{name}: removed the cozyrender entry (the post-render changes nothing)", err=True)
    else:
        click.echo(f"{name}: wrote {patches} {'patch' if patches == 1 else 'patches'}", err=True)
