"""The `cozyrender` command: a thin shell over the rule modules.

`cozyrender post-render` is Helm's hot path (every install, upgrade and
reconcile of every tenant), so it is dispatched before click or any other
command's dependencies are imported; so are the two ways Helm runs it with the
wrong arguments (see `cozyrender.postrender.run.usage_error`). Every other
command is a click command in `cozyrender.commands`, imported only when it is
invoked, and every error is one line `cozyrender <command>: error: ...`.
"""

from __future__ import annotations

import os
import sys

# command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "post-render": "cozyrender.commands.postrender:command",
    "template": "cozyrender.commands.template:command",
    "golden": "cozyrender.commands.golden:command",
    "check": "cozyrender.commands.check:command",
    "catalog": "cozyrender.commands.catalog:command",
    "gpuclass": "cozyrender.commands.gpuclass:command",
    "flux": "cozyrender.commands.flux:command",
    "completion": "cozyrender.commands.completion:command",
    "chart": "cozyrender.commands.chartdocs:command",
    "tree": "cozyrender.commands.tree:command",
    "webhook": "cozyrender.commands.webhook:command",
    "controller": "cozyrender.commands.controller:command",
    "injection": "cozyrender.commands.injection:command",
}
# What `cozyrender --help` lists, whole (click would cut each docstring's first
# sentence at the terminal's width), without importing every command.
SUMMARIES: dict[str, str] = {
    "controller": "Run the GPU offer's controllers: GPUClass status, vGPU license copies, billing metrics",
    "chart": "Generate a chart's values.schema.json and README parameters from its values.yaml",
    "catalog": "The GPU catalog of a cluster state: free units, nodes and conflicts per GPU class",
    "check": "Check a write (or audit a whole state) against the GPU budgets and GPU classes",
    "completion": "Print the shell completion script (bash, zsh, fish)",
    "flux": "Write the post-render as Flux HelmRelease postRenderers (kustomize patches)",
    "golden": "Golden-file tests of charts: render cases, compare with reviewed files",
    "gpuclass": "Validate GPUClass objects offline against the shipped CRD",
    "injection": "Flux injection in a live cluster: preview what its first reconcile would change",
    "post-render": "The Helm post-renderer: a rendered release on stdin, post-rendered on stdout",
    "template": "Render a chart like `helm template [RELEASE] CHART`, then post-render it",
    "tree": "The pool tree: budgets, carve-outs, reservations and headroom per tenant and key",
    "webhook": "Serve the GPU budget rules as a validating admission webhook (race-safe across replicas)",
}
HELP = ("-h", "--help")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    completing = any(name.endswith("_COMPLETE") and name.startswith("_COZYRENDER") for name in os.environ)
    if not completing:
        if args[:1] == ["post-render"] and not any(a in HELP for a in args[1:]):
            from cozyrender.postrender import run

            sys.exit(run.main() if len(args) == 1 else run.usage_error(args[1:]))
        if not args and _stdin_is_data():
            # Helm 3 with --post-renderer cozyrender and no --post-renderer-args:
            # the rendered release is on stdin and nobody reads the help page.
            from cozyrender.postrender import run

            sys.exit(run.usage_error([]))
    _click_main(args)


def _stdin_is_data() -> bool:
    """Standard input is a pipe or a file (Helm 3 pipes the release in), not a
    terminal or /dev/null (a person, or CI, asking for the help page)."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def group():
    """The `cozyrender` click group (commands imported when invoked)."""
    import importlib

    import click

    class LazyGroup(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(COMMANDS)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            target = COMMANDS.get(name)
            if target is None:
                return None
            module_name, attr = target.split(":")
            return _guarded(getattr(importlib.import_module(module_name), attr))

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            rows = [(name, SUMMARIES.get(name, "")) for name in self.list_commands(ctx)]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    @click.group(cls=LazyGroup, context_settings={"help_option_names": list(HELP), "max_content_width": 100},
                 epilog="\b\nExamples:\n"
                        "  cozyrender template tenant-a charts/tenant -n tenant-root --set gpu.vgpu=true\n"
                        "  helm template tenant-a charts/tenant -n tenant-root --post-renderer cozyrender"
                        "   # Helm 4, plugin installed (helm plugin install plugins/cozyrender)\n"
                        "  helm template tenant-a charts/tenant -n tenant-root --post-renderer cozyrender "
                        "--post-renderer-args post-render   # Helm 3\n"
                        "  cozyrender golden tests/golden --junit golden.xml\n"
                        "  cozyrender completion bash > /etc/bash_completion.d/cozyrender")
    @click.version_option(package_name="cozyrender")
    def cozyrender() -> None:
        """GPU budgets and the vGPU entitlement for Cozystack tenants, at render time.

        Run `cozyrender COMMAND --help` for a command's options and examples.
        """

    return cozyrender


def _guarded(command):
    """`command` (and a group's commands) with the one failure no reader can
    bound in advance said in the commands' words: input nested past Python's
    stack (a values file, a HelmRelease's values, an object's unknown field
    of hundreds of levels) is bad input in one line, never a traceback. Each
    command wraps its callback once; the error is raised inside the command's
    context, so it is named `cozyrender <command>`."""
    import functools

    import click

    if getattr(command, "_cozyrender_guarded", False):
        return command
    command._cozyrender_guarded = True
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _guarded(sub)
        return command
    callback = command.callback

    @functools.wraps(callback)
    def run(*args, **kwargs):
        from cozyrender.commands import fail

        try:
            return callback(*args, **kwargs)
        except RecursionError:
            fail("the input is nested too deeply to read (hundreds of levels: no Kubernetes object, "
                 "HelmRelease or values file nests so deep)")
        except OSError as err:  # the machine, not the input: a read-only or full file system
            fail(_environment_problem(err), exit_code=1)

    command.callback = run
    return command


def _environment_problem(err: OSError) -> str:
    """An OSError no command reported itself, in the commands' words: a file it
    could not write (read-only or full file system), or no usable temporary folder."""
    import tempfile

    from cozyrender.commands import os_problem

    if err.filename is None:
        try:
            tempfile.gettempdir()
        except OSError:
            return ("no writable temporary folder (TMPDIR, /tmp, /var/tmp and the working folder are read-only "
                    "or full): set TMPDIR to a writable folder")
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{os_problem(err)}"


def _shorten(message: str, longest: int = 80) -> str:
    """`message` with every quoted value longer than `longest` characters cut
    (`commands.shown`): a usage error echoes what was typed."""
    import re

    from cozyrender.commands import shown

    return re.sub(r"'([^']{%d,})'" % (longest + 1), lambda match: shown(match.group(1), longest, quoted=True),
                  message)


def _click_main(args: list[str]) -> None:
    import click

    from cozyrender.commands import command_name, format_error

    cozyrender = group()
    no_args_help = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
    try:
        result = cozyrender.main(args=args, prog_name="cozyrender", standalone_mode=False)
    except no_args_help as err:  # `cozyrender` or `cozyrender gpuclass` alone: the help, as helm does
        click.echo(err.ctx.get_help() if err.ctx else "")
        sys.exit(0)
    except click.UsageError as err:
        command = command_name(err.ctx)
        message = _shorten(err.format_message()).rstrip(".")
        message = message[:1].lower() + message[1:]
        click.echo(format_error(f"{message} (see '{command} --help')", command), err=True)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("cozyrender: error: aborted", err=True)
        sys.exit(1)
    except BrokenPipeError:  # `cozyrender ... | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    # ctx.exit(n) under standalone_mode=False returns n; a command's return value is not a status
    sys.exit(result if isinstance(result, int) else 0)
