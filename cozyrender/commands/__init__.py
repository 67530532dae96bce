"""One click command per module; each is a thin shell over a rule module."""

from __future__ import annotations

import click


class BadInput(click.ClickException):
    """Unreadable or malformed input: exit 2, one line on stderr, no
    traceback. `label` starts the line (`Error: ...` by default, as click
    writes it; `cozyrender check` writes `error: ...`)."""

    exit_code = 2

    def __init__(self, message: str, label: str = "Error") -> None:
        super().__init__(message)
        self.label = label

    def show(self, file=None) -> None:
        click.echo(f"{self.label}: {self.format_message()}", file=file, err=file is None)
