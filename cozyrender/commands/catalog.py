"""`cozyrender catalog`: the GPU catalog of a cluster's state (a thin shell over
cozyrender.gpuclass.catalog)."""

from __future__ import annotations

import json

import click

from cozyrender.commands import (
    emit, examples, load_state, output_option, require_kinds, say_what_was_read, state_errors,
)
from cozyrender.columns import Column, render
from cozyrender.kube.client import catalog_export


@click.command("catalog", epilog=examples(
    "cozyrender catalog --state state.yaml",
    f"{catalog_export()} | cozyrender catalog --state -",
    "cozyrender catalog --state examples/cluster -o wide   # with source kind, license, tolerations",
    "cozyrender catalog --state examples/cluster -o json"))
@click.option("--state", "state_paths", multiple=True, required=True, metavar="PATH",
              help="A file or folder of YAML/JSON with Nodes, Pods, GPUClasses and the DRA DeviceClasses, "
                   "ResourceSlices and ResourceClaims "
                   f"(as `{catalog_export()}` writes them), "
                   "'-' for standard input; repeatable.")
@output_option("table", "wide", "json", "yaml")
def command(state_paths: tuple[str, ...], output: str) -> None:
    """One row per GPU class: vendor/model, mode/profile, memory, resource name,
    free and allocatable units on eligible nodes, eligible node count, and
    whether the class is in conflict (naming the class that holds its resource)."""
    from cozyrender.gpuclass.catalog import catalog_rows, render_json
    with state_errors() as loaded:
        objects = load_state(state_paths)
        loaded.append(objects)
        require_kinds(objects, "object", why="the catalog lists the GPU classes of a cluster's objects "
                      f"({catalog_export()})")
        rows = catalog_rows(objects, validate=_crd_problem())
    say_what_was_read(objects)
    if output == "json":
        click.echo(render_json(rows), nl=False)
    elif output == "yaml":
        emit(json.loads(render_json(rows)), "yaml")
    else:
        click.echo(_table(rows, objects, wide=output == "wide"), nl=False)


COLUMNS = (
    Column("NAME"), Column("VENDOR/MODEL"), Column("MODE/PROFILE"), Column("MEMORY"),
    Column("SOURCE", wide=True), Column("LICENSE", wide=True), Column("TOLERATIONS", right=True, wide=True),
    Column("RESOURCE"), Column("FREE", right=True), Column("ALLOCATABLE", right=True), Column("NODES", right=True),
    Column("STATUS"),
)


def _table(rows, objects, wide: bool) -> str:
    """One row per class; -o wide adds the class's sourceKind, license feature type and toleration count."""
    from cozyrender.gpuclass.catalog import status_text
    from cozyrender.gpuclass.classes import class_name, gpuclasses

    by_name = {class_name(obj): obj for obj in gpuclasses(objects)}
    cells = []
    for row in rows:
        spec = by_name.get(row.name, {}).get("spec")
        spec = spec if isinstance(spec, dict) else {}
        license_ = spec.get("license") if isinstance(spec.get("license"), dict) else {}
        tolerations = spec.get("tolerations") if isinstance(spec.get("tolerations"), list) else []
        cells.append((
            row.name, f"{row.vendor}/{row.model}", f"{row.mode}/{row.profile}" if row.profile else row.mode,
            row.memory, str(spec.get("sourceKind") or "-"), str(license_.get("featureType") or "-"),
            str(len(tolerations)), row.resource_name, row.free_units, row.allocatable_units,
            str(row.eligible_nodes), status_text(row)))
    return render(COLUMNS, cells, wide=wide)


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


