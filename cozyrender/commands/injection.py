"""`cozyrender injection preview`: what Flux injection's first reconcile would
change in the live tenant releases, before turning it on.

    cozyrender injection preview [--kubeconfig FILE] [--context NAME] [-o table|json|yaml]

Reads every Cozystack tenant HelmRelease and its parent's state from the
cluster, computes the postRenderers injection would set (the webhook's code,
with the tenant chart bundled here) and prints, release by release, the
objects the upgrade would delete and the labels, annotations, quota keys and
values it would write or remove. Writes nothing. Exit 0 when every release
was computed, 1 when some cannot be (the webhook would refuse their next
write: the reasons are printed). A thin shell over `cozyrender.flux.preview`.
"""

from __future__ import annotations

import json

import click

from cozyrender.commands import examples, fail, output_option, read_kubeconfig


@click.group("injection", context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Flux injection in a live cluster."""


@command.command("preview", epilog=examples(
    "cozyrender injection preview",
    "cozyrender injection preview --kubeconfig ~/.kube/config -o json"))
@click.option("--kubeconfig", metavar="FILE", help="Kubeconfig to reach the cluster (default: $KUBECONFIG or "
              "~/.kube/config, then in-cluster).")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use.")
@output_option("table", "json", "yaml", help="table for people (default), json or yaml for scripts")
def preview(kubeconfig: str | None, context: str | None, output: str) -> None:
    """What Flux injection's first reconcile would change in the live tenant releases."""
    from cozyrender.flux import controller
    from cozyrender.flux.inject import InjectError, injected, is_tenant_release
    from cozyrender.flux.preview import preview as preview_one
    from cozyrender.flux.preview import text
    from cozyrender.kube.client import ClientError, make_client
    from cozyrender.resources import data_path

    if kubeconfig:
        read_kubeconfig(kubeconfig)
    try:
        client = make_client(kubeconfig, context)
        releases = [controller._plain(r) for r in client.list(controller._helmrelease_resource(), namespace="*")]
    except ClientError as err:
        fail(str(err))
    except Exception as err:  # the cluster cannot be read: say so in one line
        fail(f"cannot list the HelmReleases: {_why(err)}", exit_code=1)
    chart = data_path("tenant")
    reader = controller.Reader(client)
    parents: dict = {}
    previews = []
    for release in sorted(releases, key=lambda r: (r["metadata"]["namespace"], r["metadata"]["name"])):
        if not is_tenant_release(release):
            continue
        namespace, name = release["metadata"]["namespace"], release["metadata"]["name"]
        current = (release.get("spec") or {}).get("postRenderers")
        try:
            if namespace not in parents:
                parents[namespace] = reader.parent_state(namespace)
            wanted, reason = injected(release, parents[namespace], chart), ""
        except InjectError as err:
            wanted, reason = None, str(err)
        except Exception as err:
            fail(f"cannot read the parent state of {namespace}: {_why(err)}", exit_code=1)
        previews.append(preview_one(namespace, name, current, wanted, reason))
    if output == "table":
        click.echo(text(previews), nl=False)
    else:
        data = {"releases": [p.to_dict() for p in previews]}
        if output == "json":
            click.echo(json.dumps(data, indent=2))
        else:
            from cozyrender.yamlio import dump_readable

            click.echo(dump_readable(data), nl=False)
    if any(p.state == "refused" for p in previews):
        raise SystemExit(1)


def _why(err: Exception) -> str:
    status = getattr(err, "status", None)
    message = getattr(status, "message", None)
    return message or f"{type(err).__name__}: {err}"
