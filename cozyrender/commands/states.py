"""Cluster states for the state commands: what a command read, one line on stderr
(`say_what_was_read`: files, objects by kind); a state without the kinds an answer needs is bad
input (`require_kinds`), never a green answer over nothing; a state that cannot be read or
indexed is one line in our words (`state_errors`); the same options everywhere
(`state_options`, `cluster_options`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import click

from .inputs import EMPTY_FOLDER, STDIN, STDIN_NAME, expand_paths, read_kubeconfig, read_text, source_name
from .messages import command_name, fail, warn
from .output import plural


def load_state(paths: Iterable[str], exclude: Iterable[str] = ()):
    """Every object in the files and folders named (`-` for standard input), in
    order, as `cozyrender.state.Objects`; StateError as the state module words it.
    A file that is one of `exclude` (the same file, however named; `-` is never
    a file) is left out and listed in the result's `excluded`. Every file or
    folder skipped in a folder is named in a warning, with why; the result's
    `read` lists the files read (see `say_what_was_read`)."""
    from cozyrender.state import Objects, load_objects, parse_documents

    exclude = [path for path in exclude if path != STDIN]
    objects = Objects()
    skipped: list[tuple[str, str]] = []
    files = expand_paths(paths, skipped=skipped)
    for path, why in skipped:
        if why != EMPTY_FOLDER or files:  # with nothing read at all, the error says it (require_kinds)
            warn(f"skipped {path}: {why}")
    objects.read = []
    objects.given = [source_name(path) for path in paths]
    for path in files:
        if path == STDIN:
            objects.add(STDIN_NAME, parse_documents(read_text(path), STDIN_NAME))
            objects.read.append(STDIN_NAME)
            continue
        loaded = load_objects([path], exclude=exclude)
        objects.excluded.extend(loaded.excluded)
        if not loaded.excluded:
            objects.add(path, loaded)
            objects.read.append(path)
    return objects


def kinds_read(objects) -> dict[str, int]:
    """How many objects of each kind `objects` holds, by kind name."""
    counts: dict[str, int] = {}
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "(no kind)"
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def say_what_was_read(objects) -> None:
    """One line on stderr: the files read and the objects by kind, so an
    answer over the wrong input (a skipped file, the wrong folder, a kubectl
    command that left a kind out) shows it. stdout stays the answer alone;
    the line is never prefixed `error:` or `warning:`, so a script that reads
    stderr for problems tells it apart."""
    click.echo(what_was_read(objects, command_name()), err=True)


def what_was_read(objects, command: str) -> str:
    """`cozyrender check: read 2 files (3 Tenant, 1 Namespace)`, or `read the
    cluster (...)` for a state listed from a cluster (`live_state`)."""
    files = getattr(objects, "read", [])
    counts = kinds_read(objects)
    kinds = ", ".join(f"{count} {kind}" for kind, count in counts.items()) or "no objects"
    source = getattr(objects, "live", None) or plural(len(files), "file")
    return f"{command}: read {source} ({kinds})"


def require_budget_state(objects, what: str) -> None:
    """`require_kinds` for the budget rules: a Tenant and a Namespace (a
    cluster always lists the root Tenant and the tenants' Namespaces, which
    carry the vGPU labels). `what` says what needs them ("an audit checks")."""
    from cozyrender.kube.client import state_export

    require_kinds(objects, "Tenant", "Namespace",
                  why=f"{what} the tenants' budgets and the Namespaces' vGPU labels: read the cluster with "
                      f"--kubeconfig, or export it with `{state_export()} > live.yaml`")


def live_state(kubeconfig: str | None, context: str | None):
    """Every object `check` reads, listed from a cluster with the webhook's
    client (`cozyrender.kube.client`); the cluster's refusal or silence as
    one line."""
    from cozyrender.kube.client import ClientError, make_client, read_state
    from cozyrender.state import Objects

    if kubeconfig:
        read_kubeconfig(kubeconfig)
    try:
        listed = read_state(make_client(kubeconfig, context))
    except ClientError as err:
        fail(str(err))
    except Exception as err:  # noqa: BLE001 - the API server's refusal or an unreachable server, in one line
        status = getattr(err, "status", None)
        reason = getattr(status, "message", None) or next(iter(str(err).splitlines()), "") or "no answer"
        fail(f"cannot read the cluster{' ' + kubeconfig if kubeconfig else ''}: {reason}")
    objects = Objects()
    objects.live = f"the cluster{' of ' + kubeconfig if kubeconfig else ''}"
    objects.add(objects.live, listed)
    return objects


def cluster_options(function: Callable) -> Callable:
    """`--kubeconfig FILE` and `--context NAME`: read the state from a cluster
    (`live_state`), as `check` and `tree` take them."""
    function = click.option("--context", "kube_context", metavar="NAME",
                            help="The kubeconfig context to read (the current one when not given).")(function)
    return click.option("--kubeconfig", metavar="FILE",
                        help="Read the state from a cluster, as the webhook does (with --context).")(function)


def require_kinds(objects, *kinds: str, why: str) -> None:
    """Bad input when the state holds no object of one of `kinds`: an answer
    over such a state would be green for want of anything to check."""
    counts = kinds_read(objects)
    missing = [kind for kind in kinds if not (counts.get(kind) or (kind == "object" and len(objects)))]
    if missing:
        files = getattr(objects, "read", [])
        if files:
            what = f"{plural(len(files), 'file')} read ({', '.join(files)}), {plural(len(objects), 'object')}"
        else:
            what = f"no YAML or JSON file in {', '.join(getattr(objects, 'given', [])) or 'the paths given'}"
        fail(f"the state holds no {' and no '.join(missing)} ({what}); {why}")


@contextmanager
def state_errors() -> Iterator[list]:
    """Reading and indexing a state, its failures as one line in our words
    (exit 2, never Python's exception names): a StateError or ShapeError as
    the state module words it, naming the file of the object it is about
    when one of the Objects the caller adds to the yielded list holds it; nesting past Python's stack and
    arithmetic out of range in plain words; a GPUClass CRD that cannot be
    used as `gpuclass validate` says it."""
    from cozyrender.kube.shape import ShapeError
    from cozyrender.state import StateError, describe

    loaded: list = []
    try:
        yield loaded
    except (StateError, ShapeError) as err:
        fail(describe(err, *loaded))
    except RecursionError:
        fail("cannot read the input: it is nested too deeply to be a Kubernetes object")
    except ArithmeticError:
        fail("cannot read the input: a number in it is out of range")
    except ValueError as err:
        # Loaded once it has raised, so the import costs nothing on the way in.
        from cozyrender.gpuclass.validation import CRDError, RuleCompileError

        if isinstance(err, (CRDError, RuleCompileError)):
            fail(f"the GPUClass CRD cannot be used: {err}")
        fail(f"cannot read the input: {err}")


def state_options(function: Callable) -> Callable:
    """A state's paths as `check` and `tree` take them: `--state PATH`
    (repeatable) and the same as arguments; the command receives
    `state_paths` and `more_state` (give `load_state` both)."""
    function = click.argument("more_state", nargs=-1, metavar="[PATH]...")(function)
    return click.option("--state", "state_paths", multiple=True, metavar="PATH",
                        help="File or folder of YAML/JSON objects (kubectl -o yaml|json output or manifests), "
                             "'-' for standard input; repeatable.")(function)
