"""The `cozyrender` command: a thin shell over the rule modules.

`cozyrender post-render` is Helm's hot path (every install, upgrade and
reconcile of every tenant), so it is dispatched before click or any other
command's dependencies are imported. Every other command is a click
command in `cozyrender.commands`, imported only when it is invoked.
"""

from __future__ import annotations

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
    "chart": "cozyrender.commands.chartdocs:command",
}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["post-render"]:
        from cozyrender.postrender.run import main as post_render_main

        sys.exit(post_render_main())
    _click_main(args)


def _click_main(args: list[str]) -> None:
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
            return getattr(importlib.import_module(module_name), attr)

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="cozyrender")
    def cozyrender() -> None:
        """GPU budgets and the vGPU entitlement for Cozystack tenants, at render time."""

    cozyrender.main(args=args, prog_name="cozyrender")
