"""`cozyrender catalog`: the GPU catalog of a cluster's state (a thin shell over
cozyrender.gpuclass.catalog)."""

from __future__ import annotations

import json

import click

from cozyrender.commands import (
    emit, examples, fail, format_table, load_state, output_option, require_kinds, say_what_was_read,
)


@click.command("catalog", epilog=examples(
    "cozyrender catalog --state state.yaml",
    "kubectl get nodes,pods,gpuclasses -A -o yaml | cozyrender catalog --state -",
    "cozyrender catalog --state examples/cluster -o wide   # with source kind, license, tolerations",
    "cozyrender catalog --state examples/cluster -o json"))
@click.option("--state", "state_paths", multiple=True, required=True, metavar="PATH",
              help="A file or folder of YAML/JSON with Nodes, Pods and GPUClasses "
                   "(as `kubectl get nodes,pods,gpuclasses -A -o yaml` writes them), "
                   "'-' for standard input; repeatable.")
@output_option("table", "wide", "json", "yaml")
def command(state_paths: tuple[str, ...], output: str) -> None:
    """One row per GPU class: vendor/model, mode/profile, memory, resource name,
    free and allocatable units on eligible nodes, eligible node count, and
    whether the class is in conflict (naming the class that holds its resource)."""
    from cozyrender.gpuclass.catalog import catalog_rows, render_json, render_table, status_text
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import Objects, StateError

    objects = Objects()
    try:
        objects = load_state(state_paths)
        require_kinds(objects, "object", why="the catalog lists the GPU classes of a cluster's objects "
                      "(kubectl get nodes,pods,gpuclasses -A -o yaml)")
        rows = catalog_rows(objects, validate=_crd_problem())
    except (StateError, ShapeError) as err:
        fail(objects.describe(err))
    say_what_was_read(objects)
    if output == "wide":
        click.echo(_wide(rows, objects), nl=False)
    elif output == "json":
        click.echo(render_json(rows), nl=False)
    elif output == "yaml":
        emit(json.loads(render_json(rows)), "yaml")
    else:
        click.echo(render_table(rows), nl=False)


WIDE_HEADERS = ("NAME", "VENDOR/MODEL", "MODE/PROFILE", "MEMORY", "SOURCE", "LICENSE", "TOLERATIONS", "RESOURCE",
                "FREE", "ALLOCATABLE", "NODES", "STATUS")


def _crd_problem():
    """The shipped CRD's rules as `catalog_rows` takes them: why a class is refused, or None."""
    from cozyrender.gpuclass.validation import load_validator

    validator = load_validator()

    def problem(obj) -> str | None:
        result = validator.validate(obj, None)
        if result.ok:
            return None
        first = result.violations[0]
        more = len(result.violations) - 1
        return f"{first}" + (f"; and {more} more" if more else "")

    return problem


def _wide(rows, objects) -> str:
    """The table with the class's sourceKind, license feature type and toleration count."""
    from cozyrender.gpuclass.catalog import status_text
    from cozyrender.gpuclass.classes import class_name, gpuclasses

    by_name = {class_name(obj): obj for obj in gpuclasses(objects)}
    lines = []
    for row in rows:
        spec = by_name.get(row.name, {}).get("spec") or {}
        license_ = spec.get("license") if isinstance(spec.get("license"), dict) else {}
        tolerations = spec.get("tolerations") if isinstance(spec.get("tolerations"), list) else []
        lines.append((
            row.name, f"{row.vendor}/{row.model}", f"{row.mode}/{row.profile}" if row.profile else row.mode,
            row.memory, str(spec.get("sourceKind") or "-"), str(license_.get("featureType") or "-"),
            str(len(tolerations)), row.resource_name, row.free_units, row.allocatable_units,
            str(row.eligible_nodes), status_text(row)))
    return format_table(WIDE_HEADERS, lines, right=("TOLERATIONS", "FREE", "ALLOCATABLE", "NODES"))
