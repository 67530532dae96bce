"""`cozyrender catalog`: the GPU catalog of a cluster's state (a thin shell over
cozyrender.gpuclass.catalog)."""

from __future__ import annotations

import click

from cozyrender.commands import BadInput


@click.command("catalog")
@click.option("--state", "state_paths", multiple=True, required=True, metavar="PATH",
              help="A file or folder of YAML/JSON with Nodes, Pods and GPUClasses "
                   "(as `kubectl get nodes,pods,gpuclasses -A -o yaml` writes them); repeatable.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="An aligned table for people, or JSON for scripts.")
def command(state_paths: tuple[str, ...], output: str) -> None:
    """One row per GPU class: vendor/model, mode/profile, memory, resource name,
    free and allocatable units on eligible nodes, eligible node count, and
    whether the class is in conflict (naming the class that holds its resource)."""
    from cozyrender.gpuclass.catalog import catalog_rows, render_json, render_table
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import Objects, StateError, load_objects

    objects = Objects()
    try:
        objects = load_objects(state_paths)
        rows = catalog_rows(objects)
    except (StateError, ShapeError) as err:
        raise BadInput(objects.describe(err)) from None
    click.echo(render_json(rows) if output == "json" else render_table(rows), nl=False)
