"""`cozyrender catalog`: the GPU catalog of a cluster's state (a thin shell over
cozyrender.gpuclass.catalog)."""

from __future__ import annotations

import json

import click

from cozyrender.commands import emit, examples, fail, load_state, output_option


@click.command("catalog", epilog=examples(
    "cozyrender catalog --state state.yaml",
    "kubectl get nodes,pods,gpuclasses -A -o yaml | cozyrender catalog --state -",
    "cozyrender catalog --state examples/cluster -o json"))
@click.option("--state", "state_paths", multiple=True, required=True, metavar="PATH",
              help="A file or folder of YAML/JSON with Nodes, Pods and GPUClasses "
                   "(as `kubectl get nodes,pods,gpuclasses -A -o yaml` writes them), "
                   "'-' for standard input; repeatable.")
@output_option("table", "json", "yaml")
def command(state_paths: tuple[str, ...], output: str) -> None:
    """One row per GPU class: vendor/model, mode/profile, memory, resource name,
    free and allocatable units on eligible nodes, eligible node count, and
    whether the class is in conflict (naming the class that holds its resource)."""
    from cozyrender.gpuclass.catalog import catalog_rows, render_json, render_table
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import Objects, StateError

    objects = Objects()
    try:
        objects = load_state(state_paths)
        rows = catalog_rows(objects)
    except (StateError, ShapeError) as err:
        fail(objects.describe(err))
    if output == "json":
        click.echo(render_json(rows), nl=False)
    elif output == "yaml":
        emit(json.loads(render_json(rows)), "yaml")
    else:
        click.echo(render_table(rows), nl=False)
