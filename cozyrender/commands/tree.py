"""`cozyrender tree`: the pool tree of a state: budgets, carve-outs,
reservations and headroom per tenant and key.

    cozyrender tree --state PATH... [-o tree|table|wide|json|html] [--tenant NAME] [--class C] [--depth N]

Reads the state exactly as `check` does (files, folders, `-`), indexes it
and audits it with the same library calls, and lays the result out
(`cozyrender.tree`). Exit 0 whatever the figures say (the audit's exit
status is `check`'s job), 2 bad input. A thin shell.
"""

from __future__ import annotations

import gc
import os
import sys

import click

from cozyrender.commands import (
    cluster_options, examples, fail, live_state, load_state, require_budget_state, say_what_was_read,
    state_errors, state_options,
)
from cozyrender.kube.client import state_export

OUTPUTS = ("tree", "table", "wide", "json", "html")


@click.command("tree", context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples(
    "cozyrender tree --state examples/budgets/state",
    "cozyrender tree --state live.json --tenant tenant-acme --class a100 --depth 1",
    "cozyrender tree --state live.json -o wide | grep OVER     # one row per tenant and key",
    "cozyrender tree --kubeconfig ~/.kube/config --context prod      # read the cluster directly",
    f"{state_export()} | cozyrender tree --state -",
    "cozyrender tree --state live.json -o html > pool-tree.html",
    "cozyrender tree --state live.json -o json | jq '.tenants[] | select(.keys[].overCommitted)'"))
@state_options
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default="tree", show_default=True,
              help="tree for people (colour on a terminal), table for one row per tenant and key "
                   "(wide: with what holds it, charges, the limit above and vGPU), json for scripts, "
                   "html for a self-contained page.")
@click.option("--tenant", metavar="NAME",
              help="Show only this tenant's subtree: a namespace (tenant-acme-ml) or a Tenant's name when unique.")
@click.option("--class", "gpu_class", metavar="CLASS",
              help="Show only the GPU keys covering this class and the tenants capping or reserving it.")
@click.option("--depth", type=int, metavar="N", help="Show N levels below the top (0: the top alone).")
@click.option("--platform-vgpu", type=click.Choice(["true", "false"]),
              help="The platform's gpu.vgpu, overriding what the state says.")
@cluster_options
def command(state_paths: tuple[str, ...], more_state: tuple[str, ...], output: str, tenant: str | None,
            gpu_class: str | None, depth: int | None, platform_vgpu: str | None,
            kubeconfig: str | None, kube_context: str | None) -> None:
    """Show the tenant tree with, per tenant and key, the budget, what
    sub-tenants carve out, what VMs and worker pools reserve, and what is
    left; over-commits with their cause, pool roots, GPU-only tenants and
    the vGPU entitlement along the chain."""
    from cozyrender.budgets import audit, index_state
    from cozyrender.tree import TreeError, build_tree

    paths = state_paths + more_state
    live = kubeconfig is not None or kube_context is not None
    if not paths and not live:
        fail("give the state with --state PATH (files or folders of YAML/JSON), or --kubeconfig")
    if paths and live:
        fail("give the state as files (--state) or from a cluster (--kubeconfig/--context), not both")
    override = None if platform_vgpu is None else platform_vgpu == "true"
    with state_errors() as loaded:
        objects = live_state(kubeconfig, kube_context) if live else load_state(paths)
        loaded.append(objects)
        gc.freeze()  # as check does: the loaded objects live until exit
        state = index_state(objects)  # a malformed object first: the more precise error
        if not live:  # a tree of nothing would look like a healthy empty cluster
            require_budget_state(objects, "the tree shows")
        findings = audit(state)
        try:
            tree = build_tree(state, findings, tenant=tenant, gpu_class=gpu_class, depth=depth,
                              platform_vgpu=override)
        except TreeError as err:
            fail(str(err))
    if not live:
        say_what_was_read(objects)
    _print(tree, output, tenant)


def _print(tree, output: str, tenant: str | None) -> None:
    if output == "json":
        import json

        from cozyrender.tree.jsonout import tree_data

        click.echo(json.dumps(tree_data(tree, tenant), indent=2))
    elif output in ("table", "wide"):
        from cozyrender.tree.table import render_table

        click.echo(render_table(tree, wide=output == "wide"), nl=False)
    elif output == "html":
        from cozyrender.tree.html import render_html

        click.echo(render_html(tree, tenant), nl=False)
    else:
        from cozyrender.tree.text import render_text

        click.echo(render_text(tree, colour=_colour()), nl=False, color=_colour())


def _colour() -> bool:
    """Colour on a terminal only, and never with NO_COLOR set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False
