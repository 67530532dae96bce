"""`cozyrender post-render` through click: reached only for --help or bad
arguments, since `cozyrender.cli` dispatches the plain command before click."""

from __future__ import annotations

import sys

import click

from cozyrender.commands import examples


@click.command("post-render", epilog=examples(
    "helm install tenant-a charts/tenant -n tenant-root --post-renderer cozyrender "
    "--post-renderer-args post-render   # Helm 3",
    "helm install tenant-a charts/tenant -n tenant-root --post-renderer cozyrender   # Helm 4 plugin",
    "helm template tenant-a charts/tenant -n tenant-root | cozyrender post-render"))
def command() -> None:
    """Helm post-renderer: read a rendered release (multi-document YAML) on
    stdin, write it post-rendered on stdout.

    GPU budget keys leave ResourceQuotas, GPU-only tenants lose their quota
    and LimitRange, tenant namespaces get the namespace.cozystack.io/vgpu
    label, and cozystack-values Secrets get _namespace.vgpu. Documents no rule
    changes come out byte for byte. On bad input: exit 1, nothing on stdout,
    one line on stderr (and the terminal, $COZYRENDER_LOG and, under Helm 4,
    Helm's own stderr); warnings go the same ways.
    """
    from cozyrender.postrender.run import main

    sys.exit(main())
