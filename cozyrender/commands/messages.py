"""The one error and warning format of every command: `cozyrender <command>: error: <message>`
on stderr, exit 2 for bad input (`CommandError`, `fail`), with no Python wording (`errno`
texts become `no such file`, `permission denied`, ...); warnings with `warning:` (`warn`),
never doubled."""

from __future__ import annotations

from typing import NoReturn

import click

from cozyrender.oserrors import describe

EXIT_BAD_INPUT = 2



def command_name(ctx: click.Context | None = None) -> str:
    """`cozyrender <command>` for the command running now (its full path, e.g.
    `cozyrender gpuclass validate`), or `cozyrender` outside any command."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return "cozyrender"
    path = ctx.command_path.split()
    # A command invoked on its own (tests' CliRunner) is still shown under cozyrender.
    if path and path[0] != "cozyrender":
        path.insert(0, "cozyrender")
    return " ".join(path)


def _strip_label(message: str, label: str) -> str:
    """`message` without a leading `label:` (any case), so no line says it twice."""
    text = message.strip()
    while text.lower().startswith(label + ":"):
        text = text[len(label) + 1:].lstrip()
    return text


def format_error(message: str, command: str | None = None) -> str:
    """The one error line every command writes: `cozyrender <command>: error: ...`."""
    text = " ".join(_strip_label(message, "error").split())
    return f"{command or command_name()}: error: {text}"


def warn(message: str, command: str | None = None) -> None:
    """`cozyrender <command>: warning: ...` on stderr (a leading `warning:` is not repeated)."""
    text = _strip_label(message, "warning")
    click.echo(f"{command or command_name()}: warning: {text}", err=True)


def shown(value: str, longest: int = 80, quoted: bool = False) -> str:
    """`value` as a message quotes what was typed: whole when short, else cut
    to its ends with its length (a 5,000-digit number is not a 5 kB line);
    in single quotes when `quoted`, the length after them."""
    mark = "'" if quoted else ""
    if len(value) <= longest:
        return f"{mark}{value}{mark}"
    return f"{mark}{value[:20]}…{value[-8:]}{mark} ({len(value)} characters)"


class CommandError(click.ClickException):
    """Bad input or a failed step: one line `cozyrender <command>: error: ...` on
    stderr, exit 2 (or `exit_code`), no traceback."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        self.command = command_name()  # the context is live where the error is raised

    def show(self, file=None) -> None:
        click.echo(format_error(self.format_message(), self.command), file=file, err=file is None)


BadInput = CommandError  # the name the commands used first


def fail(message: str, exit_code: int = EXIT_BAD_INPUT) -> NoReturn:
    raise CommandError(message, exit_code)


def os_problem(err: OSError) -> str:
    """An OSError in words (`cozyrender.oserrors.describe`)."""
    return describe(err)


