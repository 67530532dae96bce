"""One `-o/--output` vocabulary (`output_option`, `emit`): `table` (default, for people), `wide`
(the same table with more columns), `json`, `yaml`; tables through one formatter
(`cozyrender.columns`); an example in every `--help` (`examples`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

OUTPUTS = ("table", "wide", "json", "yaml")



def output_option(*choices: str, default: str = "table", help: str | None = None
                  ) -> Callable[[Callable], Callable]:
    """`-o/--output` with the shared vocabulary (a subset of table, wide, json, yaml)."""
    choices = choices or OUTPUTS
    unknown = set(choices) - set(OUTPUTS)
    if unknown:
        raise ValueError(f"not in the shared -o vocabulary: {sorted(unknown)}")
    text = help or ("table for people (default), wide for more columns, json or yaml for scripts"
                    if "wide" in choices else "table for people (default), json or yaml for scripts")
    return click.option("-o", "--output", type=click.Choice(choices), default=default,
                        show_default=True, help=text)


def emit(data: Any, output: str) -> None:
    """`data` (JSON-compatible) on stdout as JSON (indented) or YAML (block style)."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        from cozyrender.yamlio import dump_readable

        click.echo(dump_readable(data), nl=False)
    else:
        raise ValueError(f"emit writes json or yaml, not {output}")


def plural(count: int, word: str, words: str | None = None) -> str:
    """`1 case`, `2 cases`, `0 cases`."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def examples(*lines: str) -> str:
    """An `Examples:` epilog for `--help`, lines kept as written."""
    body = "\n".join(f"  {line}" for line in lines)
    return f"\b\nExamples:\n{body}"


