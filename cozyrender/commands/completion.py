"""`cozyrender completion bash|zsh|fish`: the shell completion script, as helm,
kubectl and flux print theirs (click's shell completion underneath)."""

from __future__ import annotations

import click

from cozyrender.commands import examples

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_COZYRENDER_COMPLETE"


@click.command("completion", epilog=examples(
    "cozyrender completion bash > /etc/bash_completion.d/cozyrender",
    'eval "$(cozyrender completion zsh)"          # in ~/.zshrc',
    "cozyrender completion fish > ~/.config/fish/completions/cozyrender.fish"))
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> None:
    """Print the completion script for SHELL (bash 4.4+, zsh or fish).

    Load it in the current shell with `source <(cozyrender completion bash)`,
    or write it where your shell reads completions (see the examples).
    """
    from click.shell_completion import get_completion_class

    from cozyrender.cli import group

    completion = get_completion_class(shell)(group(), {}, "cozyrender", COMPLETE_VAR)
    click.echo(completion.source())
