"""`cozyrender flux`: the post-render as Flux HelmRelease postRenderers.

A thin shell over `cozyrender.flux`: it works out the release, namespace,
chart and values from the arguments and the HelmRelease, then prints the
entry, writes it into the file, or checks it.

Exit status: 0 done (or in sync), 1 drift (--check), 2 an error.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

EXIT_DRIFT = 1
EXIT_ERROR = 2
COMMAND = "cozyrender flux"

# ---------------------------------------------------------------- shared CLI conventions
# Local stand-ins for the helpers of `cozyrender.commands` (issue 12, NOTES-cli.md):
# same names, signatures and output. When both branches are merged, replace this
# block with
#   from cozyrender.commands import (CommandError, examples, fail, output_option,
#       read_text, source_name, user_values, values_options, warn)
# (their `user_values` reads `-f -` itself; `_stdin_values_files` then goes too).

STDIN = "-"
STDIN_NAME = "<stdin>"


class CommandError(click.ClickException):
    """One line `cozyrender flux: error: ...` on stderr, exit 2 (or `exit_code`)."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def show(self, file=None) -> None:
        text = " ".join(self.format_message().split())
        click.echo(f"{COMMAND}: error: {text}", file=file, err=file is None)


def fail(message: str, exit_code: int = EXIT_ERROR) -> NoReturn:
    raise CommandError(message, exit_code)


def warn(message: str) -> None:
    text = message.strip()
    while text.lower().startswith("warning:"):
        text = text[len("warning:"):].lstrip()
    click.echo(f"{COMMAND}: warning: {text}", err=True)


def read_bytes(path: str) -> bytes:
    """A file's bytes, or standard input for `-` (once per command run)."""
    if path == STDIN:
        meta = click.get_current_context().meta
        if meta.get("cozyrender.stdin_read"):
            fail("standard input ('-') can be given only once")
        meta["cozyrender.stdin_read"] = True
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as err:
        fail(f"{path}: {_os_problem(err)}")


def read_text(path: str) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        fail(f"{source_name(path)}: not UTF-8 text (byte {err.start}: {err.reason})")


def _os_problem(err: OSError) -> str:
    import errno

    words = {errno.ENOENT: "no such file or folder", errno.EACCES: "permission denied",
             errno.EISDIR: "is a folder, not a file", errno.ENOTDIR: "a part of the path is not a folder"}
    return words.get(err.errno or 0) or (err.strerror or type(err).__name__).lower()


def source_name(path: str) -> str:
    return STDIN_NAME if path == STDIN else path


def examples(*lines: str) -> str:
    body = "\n".join(f"  {line}" for line in lines)
    return f"\b\nExamples:\n{body}"


def output_option(*choices: str, default: str) -> Callable[[Callable], Callable]:
    return click.option("-o", "--output", type=click.Choice(choices), default=default,
                        show_default=True, help="yaml (default) or json: how the list is printed.")


def values_options(function: Callable) -> Callable:
    for decorator in reversed((
        click.option("-f", "--values", "values_files", multiple=True, metavar="FILE",
                     help="A values file ('-' for standard input), e.g. what the HelmRelease's "
                          "valuesFrom gives; repeat to merge, later files win."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="A value in Helm's --set syntax; repeatable, applied after the files."),
        click.option("--set-string", "set_string", multiple=True, metavar="KEY=VALUE",
                     help="As --set, but every value stays a string."),
        click.option("--set-json", "set_json", multiple=True, metavar="KEY=JSON",
                     help="As --set, each value a JSON document (or a whole JSON object)."),
        click.option("--set-file", "set_file", multiple=True, metavar="KEY=PATH",
                     help="As --set, each value read from a file."),
    )):
        function = decorator(function)
    return function


def user_values(values_files: Sequence[str] = (), sets: Sequence[str] = (),
                set_string: Sequence[str] = (), set_json: Sequence[str] = (),
                set_file: Sequence[str] = (), inline: Sequence[dict] = ()) -> dict[str, Any]:
    """Helm's merge order: files, inline layers, --set-json, --set, --set-string,
    --set-file (render.load_values); `-f -` is standard input."""
    from cozyrender.render import RenderError, load_values

    with tempfile.TemporaryDirectory(prefix="cozyrender-") as tmp:
        files, stdin_copy = _stdin_values_files(values_files, Path(tmp))
        try:
            return load_values(files, sets, inline, set_json=set_json, set_string=set_string,
                               set_file=set_file)
        except RenderError as err:
            message = str(err)
            if stdin_copy:
                message = message.replace(stdin_copy, STDIN_NAME)
            fail(message)


def _stdin_values_files(paths: Sequence[str], tmp: Path) -> tuple[list[str], str | None]:
    """The values files with `-` replaced by a copy of standard input (load_values reads paths)."""
    files, copy = [], None
    for path in paths:
        if path == STDIN:
            if copy is None:
                copy = str(tmp / "stdin.yaml")
                Path(copy).write_bytes(read_bytes(STDIN))
            else:
                read_bytes(STDIN)  # a second `-`: the shared error
            files.append(copy)
        else:
            try:  # render.load_values would word an OSError as Python does
                with open(path, "rb"):
                    pass
            except OSError as err:
                fail(f"values file {path}: {_os_problem(err)}")
            files.append(path)
    return files, copy

# ---------------------------------------------------------------- the command

# Helm's release name rule (pkg/chartutil ValidateReleaseName): a DNS-1123
# subdomain. An argument that cannot be a release name is a chart path.
_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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
        if helmrelease and not os.path.exists(arg) and _RELEASE_NAME.match(arg):
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
@output_option("yaml", "json", default="yaml")
def command(args: tuple[str, ...], namespace: str | None, values_files: tuple[str, ...],
            sets: tuple[str, ...], set_string: tuple[str, ...], set_json: tuple[str, ...],
            set_file: tuple[str, ...], helmrelease: str | None, chart_dir: str | None,
            check: bool, output: str) -> None:
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
    release, chart = _release_and_chart(args, helmrelease)
    if chart is not None and not os.path.exists(chart):
        fail(f"{chart}: no such chart (a folder with Chart.yaml, or a chart archive)")
    if chart_dir is not None and not os.path.isdir(chart_dir):
        fail(f"--chart-dir {chart_dir}: no such folder")
    try:
        stream = None
        if helmrelease:
            name = source_name(helmrelease)
            stream = flux.read_text(_decode(read_bytes(helmrelease), name), name)
        target = flux.resolve(release, namespace, chart, stream,
                              _checkout(helmrelease, chart_dir) if stream else None,
                              values_given=bool(values_files))
        for note in target.notes:
            warn(note)
        values = user_values(values_files, sets, set_string, set_json, set_file, target.inline)
        raw = flux.render_values(target.chart, values, target.release, target.namespace)
        derived = flux.derive(raw)
    except flux.FluxError as err:
        fail(str(err))
    for warning in derived.warnings:
        warn(f"post-render: {warning}")

    hr = target.helmrelease
    if hr is None:
        _print(flux.format_post_renderers(derived.post_renderers), derived.post_renderers, output)
        return
    try:
        written = flux.write_entry(hr, derived.post_renderers)
    except flux.FluxError as err:
        fail(str(err))
    for warning in written.warnings:
        warn(warning)
    _finish(hr.path, helmrelease, written, check, len(derived.patches))


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
            fail(f"cannot write {helmrelease}: {_os_problem(err)}")
    if not plan.changes:
        click.echo(f"{name}: already up to date", err=True)
    elif plan.action == "remove":
        click.echo(f"{name}: removed the cozyrender entry (the post-render changes nothing)", err=True)
    else:
        click.echo(f"{name}: wrote {patches} {'patch' if patches == 1 else 'patches'}", err=True)
