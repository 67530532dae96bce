"""`cozyrender post-render` through click: reached only for --help or bad
arguments, since `cozyrender.cli` dispatches the plain command before click."""

from __future__ import annotations

import sys

import click


@click.command("post-render")
def command() -> None:
    """Helm post-renderer: read a rendered release (multi-document YAML) on
    stdin, write it post-rendered on stdout.

    GPU budget keys leave ResourceQuotas, GPU-only tenants lose their quota
    and LimitRange, tenant namespaces get the namespace.cozystack.io/vgpu
    label, and cozystack-values Secrets get _namespace.vgpu. Documents no rule
    changes come out byte for byte. On bad input: exit 1, nothing on stdout,
    one line on stderr (and the terminal, and $COZYRENDER_LOG).
    """
    from cozyrender.postrender.run import main

    sys.exit(main())
