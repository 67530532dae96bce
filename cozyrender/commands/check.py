"""`cozyrender check`: the GPU budget rules before a change merges.

    cozyrender check --kubeconfig FILE [--context NAME] --write FILE   # one write, against a cluster
    cozyrender check --state PATH... --write FILE [-o table|wide|json|yaml|text]   # one write
    cozyrender check --state PATH... [-o table|wide|json|yaml|text]                # audit

Exit 0 admitted (or a clean audit), 1 refused (or an audit with errors),
2 bad input. A thin shell over `cozyrender.budgets`.

A state object the rules cannot read (issue 28 item 2) is decided around as
the webhook does: for a write, it is left out; the write is refused when its
pools hold it, naming it and the Tenant owning its namespace, and decided as
usual otherwise (with a warning naming it). An audit would have to vouch for
its pools, so it is bad input, named the same way. Still bad input for a
write: an object with no usable name, two different copies of one object,
two Tenants owning one namespace, more than 50 such objects, and the write
itself (`cozyrender.budgets.unreadable.decide_write`).
"""

from __future__ import annotations

import gc
import sys

import click

from cozyrender.commands import (
    cluster_options, emit, examples, fail, live_state, load_state, plural, read_text, require_budget_state,
    say_what_was_read, source_name, state_errors, state_options,
)
from cozyrender.columns import Column, render
from cozyrender.kube.client import state_export

EXIT_OK, EXIT_REFUSED = 0, 1


def _fail(message: str) -> None:
    """Bad input: `cozyrender check: error: message` on stderr, exit 2."""
    fail(message)


@click.command("check", context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples(
    "cozyrender check --kubeconfig ~/.kube/config --write vm.yaml     # against the cluster, as the webhook",
    "cozyrender check --kubeconfig ~/.kube/config --context prod      # audit the cluster",
    f"{state_export()} > live.yaml     # for CI",
    "cozyrender check --state live.yaml --write vm.yaml",
    "cozyrender check --state live.yaml gitops/ -o json     # audit the whole state"))
@state_options
@cluster_options
@click.option("--write", "write_files", metavar="FILE", multiple=True,
              help="The object being written ('-' for standard input); an update when the state holds "
                   "one of the same kind, namespace and name.")
# `text`: the line format of earlier releases (one line per finding), for scripts that read it.
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml", "text"]), default="table",
              show_default=True, help="table for people (wide: an audit's figures too), json or yaml for "
                                      "scripts, text for one line per finding.")
@click.option("--platform-vgpu", type=click.Choice(["true", "false"]),
              help="The platform's gpu.vgpu, overriding what the state says.")
def command(state_paths: tuple[str, ...], more_state: tuple[str, ...], kubeconfig: str | None,
            kube_context: str | None, write_files: tuple[str, ...], output: str, platform_vgpu: str | None) -> None:
    """Check a write against the GPU budgets and GPU classes of a state, or
    audit the whole state when no --write is given."""
    from cozyrender.budgets import ERROR, Decision, audit, index_state
    from cozyrender.budgets.audit import with_spec_findings
    from cozyrender.budgets.unreadable import decide_write, naming_owner
    from cozyrender.budgets.write import namespaces_held, unknown_namespace
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import StateError, parse_documents

    paths = state_paths + more_state
    live = kubeconfig is not None or kube_context is not None
    if not paths and not live:
        _fail("give the state with --kubeconfig FILE (read the cluster) or --state PATH (files or folders of YAML/JSON)")
    if paths and live:
        _fail("give the state as files (--state) or from a cluster (--kubeconfig/--context), not both")
    if len(write_files) > 1:
        # Taking the last would check a write nobody meant; one check, one answer.
        raise click.UsageError(f"--write is given {len(write_files)} times; check one write at a time")
    write_file = write_files[0] if write_files else None
    override = None if platform_vgpu is None else platform_vgpu == "true"
    with state_errors() as loaded:
        # A write that is also one of the state's files is checked against
        # everything else, not as an update of itself (issue 11 item 11).
        objects = (live_state(kubeconfig, kube_context) if live
                   else load_state(paths, exclude=[write_file] if write_file else []))
        loaded.append(objects)
        # A short-lived process: move the loaded objects to the permanent
        # generation, so no later collection (during the audit or the check,
        # after indexing, which pauses the collector itself) scans them again;
        # they live until exit, nothing to collect there anyway.
        gc.freeze()
        if write_file is None:
            try:
                state = index_state(objects)
                _require_state(objects, None)
                findings = with_spec_findings(audit(state), objects)
            except ShapeError as err:  # no audit of a state it cannot read: bad input, its owner named
                raise naming_owner(err) from None
        else:
            written = parse_documents(read_text(write_file), source_name(write_file))
            loaded.append(written)
            if len(written) != 1:
                raise StateError(f"{source_name(write_file)}: holds {len(written)} objects; "
                                 "--write takes exactly one")
            _require_state(objects, written[0])
            decision = decide_write(objects, written[0], platform_vgpu=override)
            missing = unknown_namespace(namespaces_held(objects), written[0])
            if missing is not None:
                decision = Decision((*decision.reasons, missing), decision.warnings)
    say_what_was_read(objects)
    if write_file is None:
        _print_audit(findings, output)
        sys.exit(EXIT_REFUSED if any(f.severity == ERROR for f in findings) else EXIT_OK)
    if objects.excluded:
        note = (f"{', '.join(objects.excluded)} is also in --state: the state's copy is ignored "
                "and the write is checked against the rest of the state")
        decision = Decision(decision.reasons, (note, *decision.warnings))
    if output in ("json", "yaml"):
        emit(decision.as_dict(), output)
    elif output == "text":
        click.echo("admitted" if decision.allowed else "refused")
        for reason in decision.reasons:
            click.echo(f"  {reason.field}: {reason.message}")
        for warning in decision.warnings:
            click.echo(f"  warning: {warning}")
    else:
        click.echo("admitted" if decision.allowed else "refused")
        rows = [("error", reason.field, reason.message) for reason in decision.reasons]
        rows += [("warning", "-", warning) for warning in decision.warnings]
        if rows:
            click.echo(render(WRITE_COLUMNS, rows, wide=output == "wide"), nl=False)
    sys.exit(EXIT_OK if decision.allowed else EXIT_REFUSED)


def _require_state(objects, write: dict | None) -> None:
    """A state with no Tenant or no Namespace is bad input, not an answer: an
    audit over it is green for want of anything to check, and a write checked
    against it is admitted for want of a budget. The one write checked
    without them is a GPUClass, which is checked against the classes alone."""
    if write is None or write.get("kind") != "GPUClass":
        require_budget_state(objects, "an audit checks" if write is None else "a write is checked against")


WRITE_COLUMNS = (Column("SEVERITY"), Column("FIELD"), Column("MESSAGE"))
AUDIT_COLUMNS = (Column("SEVERITY"), Column("KIND"), Column("NAMESPACE"), Column("FIELD"), Column("MESSAGE"),
                 Column("FIGURES", wide=True))


def _print_audit(findings: list, output: str) -> None:
    from cozyrender.budgets import ERROR

    if output in ("json", "yaml"):
        emit([finding.as_dict() for finding in findings], output)
        return
    errors = sum(1 for f in findings if f.severity == ERROR)
    if output == "text":  # the line format of earlier releases, for scripts that read it
        for finding in findings:
            click.echo(f"{finding.severity}: {finding.namespace}: {finding.field}: {finding.message}")
    elif findings:
        rows = [(f.severity, f.kind, f.namespace, f.field, f.message,
                 ", ".join(f"{key}={value}" for key, value in dict(f.numbers).items()) or "-") for f in findings]
        click.echo(render(AUDIT_COLUMNS, rows, wide=output == "wide"), nl=False)
    click.echo(f"{plural(errors, 'error')}, {plural(len(findings) - errors, 'warning')}")
