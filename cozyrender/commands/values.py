"""Helm's values flags (`values_options`, `user_values`): `-f/--values` (`-` too), `--set`,
`--set-string`, `--set-json`, `--set-file`, each file read once per run however many releases
take the values; a parent's values Secret (`parent_values`) and the warnings about the values
a chart is rendered with (`values_warnings`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from .inputs import STDIN, read_text, source_name
from .messages import fail, warn



def values_options(function: Callable) -> Callable:
    """Helm's values flags; the command receives values_files, sets,
    set_string, set_json and set_file (pass them to `user_values`), and
    parent_values (`parent_values`)."""
    for decorator in reversed((
        click.option("-f", "--values", "values_files", multiple=True, metavar="FILE",
                     help="A values file ('-' for standard input); repeat to merge, later files win."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="A value in Helm's --set syntax; repeatable, applied after the files."),
        click.option("--set-string", "set_string", multiple=True, metavar="KEY=VALUE",
                     help="As --set, but every value stays a string."),
        click.option("--set-json", "set_json", multiple=True, metavar="KEY=JSON",
                     help="As --set, each value a JSON document (or a whole JSON object)."),
        click.option("--set-file", "set_file", multiple=True, metavar="KEY=PATH",
                     help="As --set, each value read from a file."),
        click.option("--parent-values", "parent_values", metavar="FILE",
                     help="The parent's values, as Flux's valuesFrom gives them: the cozystack-values Secret of "
                          "the release namespace, found in FILE (`kubectl get secret cozystack-values -n NAMESPACE "
                          "-o yaml`, or a state export); applied before the -f files."),
    )):
        function = decorator(function)
    return function


_VALUES_READ = "cozyrender.values_read"


def _read_values_file(path: str | os.PathLike) -> str:
    """`read_text`, once per file per command run: a command that merges the
    values for several releases (`flux --check` over a file) reads `-f -`
    and every file once, and each release sees the same text."""
    ctx = click.get_current_context(silent=True)
    cache = ctx.find_root().meta.setdefault(_VALUES_READ, {}) if ctx is not None else {}
    key = os.fspath(path)
    if key not in cache:
        cache[key] = read_text(path)
    return cache[key]


def user_values(values_files: Sequence[str] = (), sets: Sequence[str] = (),
                set_string: Sequence[str] = (), set_json: Sequence[str] = (),
                set_file: Sequence[str] = (), inline: Sequence[dict] = ()) -> dict[str, Any]:
    """The values of `values_options` merged in Helm's order (files, inline layers,
    --set-json, --set, --set-string, --set-file); a RenderError as a CommandError."""
    from cozyrender.render import RenderError, load_values

    if list(values_files).count(STDIN) > 1:
        fail("standard input ('-') can be given only once")
    try:
        return load_values(values_files, sets, inline, set_json=set_json, set_string=set_string,
                           set_file=set_file, read=_read_values_file)
    except RenderError as err:
        fail(str(err))




def parent_values(path: str | None, namespace: str) -> dict[str, Any]:
    """The values of the `cozystack-values` Secret of `namespace` in the
    objects of `path` (a Secret as `kubectl get secret -o yaml` writes it, or
    a state export): what a sub-tenant's release gets through Flux's
    valuesFrom. Empty for no path."""
    if path is None:
        return {}
    from cozyrender.state import StateError, parse_documents
    from cozyrender.values_secret import SECRET_NAME, ValuesSecretError, is_values_secret, read_values

    name = source_name(path)
    try:
        objects = parse_documents(read_text(path), name)
    except StateError as err:
        fail(str(err))
    except RecursionError:
        fail(f"{name}: nested too deeply to read (hundreds of levels)")
    found = [obj for obj in objects if is_values_secret(obj, namespace)]
    if len(found) != 1:
        held = sorted({str((obj.get("metadata") or {}).get("namespace")) for obj in objects
                       if is_values_secret(obj)})
        where = f" (it holds the ones of {', '.join(held)})" if held else ""
        fail(f"{name}: {'no' if not found else 'more than one'} {SECRET_NAME} Secret in namespace {namespace}{where}; "
             f"give `kubectl get secret {SECRET_NAME} -n {namespace} -o yaml`")
    try:
        return read_values(found[0])
    except ValuesSecretError as err:
        fail(f"{name}: Secret {namespace}/{SECRET_NAME}: {err}")


def values_warnings(chart: str, values: dict[str, Any], namespace: str) -> None:
    """Warnings about the values a chart is rendered with: each key its
    values schema does not know, with the key meant (Helm renders them
    silently), and, for a tenant asking for vGPU that the chain does not
    entitle, the link that breaks it."""
    import json as _json

    from cozyrender.appspec import unknown_values
    from cozyrender.entitlement import broken_link

    schema_file = Path(chart) / "values.schema.json"
    if schema_file.is_file():
        try:
            schema = _json.loads(schema_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            schema = None
        if isinstance(schema, dict):
            for path, message in unknown_values(values, schema):
                if not path.startswith("_"):  # the platform's values: open-ended
                    warn(f"values: {path}: not in the chart's values schema: {message}")
    if (Path(chart) / "templates" / "namespace.yaml").is_file() or Path(chart).name == "tenant":
        link = broken_link(values, namespace)
        if link is not None:
            warn(f"vGPU: {link}")
