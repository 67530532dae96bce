"""One click command per module, each a thin shell over a rule module; the
conventions they share live here, so every command behaves the same way:

- one error format, `cozyrender <command>: error: <message>` on stderr, exit 2
  for bad input (`CommandError`, `fail`), with no Python wording (`errno`
  texts become `no such file`, `permission denied`, ...); warnings the same
  way with `warning:` (`warn`), never doubled;
- `-` for standard input wherever a file is taken (`read_text`, `read_bytes`),
  read once per process;
- folders wherever files are taken (`expand_paths`: the YAML/JSON files below,
  suffixes in any letter case, in name order, dotfiles and dot-folders
  skipped, every skipped file named in a warning with why);
- what a state command read, one line on stderr (`say_what_was_read`: files,
  objects by kind), and a state without the kinds an answer needs is bad
  input (`require_kinds`), never a green answer over nothing; a state that
  cannot be read or indexed is one line in our words (`state_errors`);
- one `-o/--output` vocabulary (`output_option`, `emit`): `table` (default,
  for people), `wide` (the same table with more columns), `json`, `yaml`;
  tables through one formatter (`cozyrender.columns`);
- Helm's values flags (`values_options`, `user_values`): `-f/--values` (`-`
  too), `--set`, `--set-string`, `--set-json`, `--set-file`, each file read
  once per run however many releases take the values;
- an example in every `--help` (`examples`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from cozyrender.oserrors import describe

STDIN = "-"
STDIN_NAME = "<stdin>"
EXIT_BAD_INPUT = 2
STATE_SUFFIXES = (".yaml", ".yml", ".json")
EMPTY_FOLDER = "an empty folder"
OUTPUTS = ("table", "wide", "json", "yaml")


# ---------------------------------------------------------------- messages

def command_name(ctx: click.Context | None = None) -> str:
    """`cozyrender <command>` for the command running now (its full path, e.g.
    `cozyrender gpuclass validate`), or `cozyrender` outside any command."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return "cozyrender"
    path = ctx.command_path.split()
    # A command invoked on its own (tests' CliRunner) is still shown under cozyrender.
    if path and path[0] != "cozyrender":
        path.insert(0, "cozyrender")
    return " ".join(path)


def _strip_label(message: str, label: str) -> str:
    """`message` without a leading `label:` (any case), so no line says it twice."""
    text = message.strip()
    while text.lower().startswith(label + ":"):
        text = text[len(label) + 1:].lstrip()
    return text


def format_error(message: str, command: str | None = None) -> str:
    """The one error line every command writes: `cozyrender <command>: error: ...`."""
    text = " ".join(_strip_label(message, "error").split())
    return f"{command or command_name()}: error: {text}"


def warn(message: str, command: str | None = None) -> None:
    """`cozyrender <command>: warning: ...` on stderr (a leading `warning:` is not repeated)."""
    text = _strip_label(message, "warning")
    click.echo(f"{command or command_name()}: warning: {text}", err=True)


def shown(value: str, longest: int = 80, quoted: bool = False) -> str:
    """`value` as a message quotes what was typed: whole when short, else cut
    to its ends with its length (a 5,000-digit number is not a 5 kB line);
    in single quotes when `quoted`, the length after them."""
    mark = "'" if quoted else ""
    if len(value) <= longest:
        return f"{mark}{value}{mark}"
    return f"{mark}{value[:20]}…{value[-8:]}{mark} ({len(value)} characters)"


class CommandError(click.ClickException):
    """Bad input or a failed step: one line `cozyrender <command>: error: ...` on
    stderr, exit 2 (or `exit_code`), no traceback."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        self.command = command_name()  # the context is live where the error is raised

    def show(self, file=None) -> None:
        click.echo(format_error(self.format_message(), self.command), file=file, err=file is None)


BadInput = CommandError  # the name the commands used first


def fail(message: str, exit_code: int = EXIT_BAD_INPUT) -> NoReturn:
    raise CommandError(message, exit_code)


def os_problem(err: OSError) -> str:
    """An OSError in words (`cozyrender.oserrors.describe`)."""
    return describe(err)


# ---------------------------------------------------------------- input

_STDIN_READ = "cozyrender.stdin_read"


def _read_stdin() -> bytes:
    """Standard input, once per command run (a second `-` would read nothing)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.find_root().meta if ctx is not None else {}
    if meta.get(_STDIN_READ):
        fail("standard input ('-') can be given only once")
    meta[_STDIN_READ] = True
    return sys.stdin.buffer.read()


def read_bytes(path: str | os.PathLike) -> bytes:
    """A file's bytes, or standard input for `-`; CommandError naming the file otherwise."""
    if os.fspath(path) == STDIN:
        return _read_stdin()
    try:
        return Path(path).read_bytes()
    except OSError as err:
        fail(f"{path}: {os_problem(err)}")


def read_text(path: str | os.PathLike) -> str:
    """A file's UTF-8 text, or standard input's for `-`."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        fail(f"{source_name(path)}: not UTF-8 text (byte {err.start}: {err.reason})")


def read_kubeconfig(path: str) -> None:
    """Check that `path` is a readable kubeconfig (a YAML mapping), before a
    Kubernetes client reads it: its problems in the commands' own words."""
    import yaml

    from cozyrender.yamlio import load_all_bounded, yaml_problem

    text = read_text(path)
    try:
        documents = list(load_all_bounded(text))
    except yaml.YAMLError as err:
        fail(f"{path}: not valid YAML: {yaml_problem(err)}")
    except ValueError as err:
        fail(f"{path}: {err}")
    if len(documents) != 1 or not isinstance(documents[0], dict) or not documents[0].get("clusters"):
        fail(f"{path}: not a kubeconfig (a YAML mapping with clusters, users and contexts)")


def source_name(path: str | os.PathLike) -> str:
    """How messages name an input: the path, or `<stdin>` for `-`."""
    return STDIN_NAME if os.fspath(path) == STDIN else os.fspath(path)


def expand_paths(paths: Iterable[str | os.PathLike], suffixes: Sequence[str] = STATE_SUFFIXES,
                 skipped: list[tuple[str, str]] | None = None) -> list[str]:
    """Files as given, `-` as given, folders replaced by the files below them
    whose names end in `suffixes` in any letter case (`tenants.YAML`), in name
    order; names starting with `.` (`.gitkeep`, `.git/`) are skipped. Each
    file or folder skipped is added to `skipped` with why, when given, and
    so is a folder given that holds no file at all. A path
    that does not exist is an error."""
    wanted = tuple(suffix.lower() for suffix in suffixes)
    out: list[str] = []
    for raw in paths:
        text = os.fspath(raw)
        path = Path(text)
        if text == STDIN or path.is_file():
            out.append(text)
        elif path.is_dir():
            before = (len(out), len(skipped) if skipped is not None else 0)
            for root, folders, files in os.walk(path):
                hidden = sorted(name for name in folders if name.startswith("."))
                folders[:] = sorted(name for name in folders if not name.startswith("."))
                if skipped is not None:
                    skipped.extend((os.path.join(root, name) + "/", "a hidden folder") for name in hidden)
                for name in sorted(files):
                    full = os.path.join(root, name)
                    if name.startswith("."):
                        why = "a hidden file"
                    elif not name.lower().endswith(wanted):
                        why = f"not {_either(suffixes)}"
                    else:
                        out.append(full)
                        continue
                    if skipped is not None:
                        skipped.append((full, why))
            if skipped is not None and (len(out), len(skipped)) == before:
                skipped.append((text.rstrip("/") + "/", EMPTY_FOLDER))  # given, and nothing read from it
        else:
            fail(f"{text}: no such file or folder")
    return out


def _either(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


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
    """`cozyrender check: read 2 files (3 Tenant, 1 Namespace)`."""
    files = getattr(objects, "read", [])
    counts = kinds_read(objects)
    kinds = ", ".join(f"{count} {kind}" for kind, count in counts.items()) or "no objects"
    return f"{command}: read {plural(len(files), 'file')} ({kinds})"


# What a state for the budget rules holds, as one kubectl command (help, errors, docs).
STATE_KUBECTL = ("kubectl get tenants,namespaces,vminstances,kubernetesnodes,kuberneteses,resourcequotas,pods,"
                 "gpuclasses,secrets -A -o yaml")


def require_budget_state(objects, what: str) -> None:
    """`require_kinds` for the budget rules: a Tenant and a Namespace (a
    cluster always lists the root Tenant and the tenants' Namespaces, which
    carry the vGPU labels). `what` says what needs them ("an audit checks")."""
    require_kinds(objects, "Tenant", "Namespace",
                  why=f"{what} the tenants' budgets and the Namespaces' vGPU labels ({STATE_KUBECTL})")


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


# ---------------------------------------------------------------- output

def output_option(*choices: str, default: str = "table", help: str | None = None
                  ) -> Callable[[Callable], Callable]:
    """`-o/--output` with the shared vocabulary (a subset of table, wide, json, yaml)."""
    choices = choices or OUTPUTS
    unknown = set(choices) - set(OUTPUTS)
    if unknown:
        raise ValueError(f"not in the shared -o vocabulary: {sorted(unknown)}")
    text = help or ("table for people (default), wide for more columns, json or yaml for scripts"
                    if "wide" in choices else "table for people (default), json or yaml for scripts")
    return click.option("-o", "--output", type=click.Choice(choices), default=default,
                        show_default=True, help=text)


def emit(data: Any, output: str) -> None:
    """`data` (JSON-compatible) on stdout as JSON (indented) or YAML (block style)."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        from cozyrender.yamlio import dump_readable

        click.echo(dump_readable(data), nl=False)
    else:
        raise ValueError(f"emit writes json or yaml, not {output}")


def plural(count: int, word: str, words: str | None = None) -> str:
    """`1 case`, `2 cases`, `0 cases`."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def state_options(function: Callable) -> Callable:
    """A state's paths as `check` and `tree` take them: `--state PATH`
    (repeatable) and the same as arguments; the command receives
    `state_paths` and `more_state` (give `load_state` both)."""
    function = click.argument("more_state", nargs=-1, metavar="[PATH]...")(function)
    return click.option("--state", "state_paths", multiple=True, metavar="PATH",
                        help="File or folder of YAML/JSON objects (kubectl -o yaml|json output or manifests), "
                             "'-' for standard input; repeatable.")(function)


# ---------------------------------------------------------------- values

def values_options(function: Callable) -> Callable:
    """Helm's values flags; the command receives values_files, sets,
    set_string, set_json and set_file (pass them to `user_values`)."""
    for decorator in reversed((
        click.option("-f", "--values", "values_files", multiple=True, metavar="FILE",
                     help="A values file ('-' for standard input); repeat to merge, later files win."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="A value in Helm's --set syntax; repeatable, applied after the files."),
        click.option("--set-string", "set_string", multiple=True, metavar="KEY=VALUE",
                     help="As --set, but every value stays a string."),
        click.option("--set-json", "set_json", multiple=True, metavar="KEY=JSON",
                     help="As --set, each value a JSON document (or a whole JSON object)."),
        click.option("--set-file", "set_file", multiple=True, metavar="KEY=PATH",
                     help="As --set, each value read from a file."),
    )):
        function = decorator(function)
    return function


_VALUES_READ = "cozyrender.values_read"


def _read_values_file(path: str | os.PathLike) -> str:
    """`read_text`, once per file per command run: a command that merges the
    values for several releases (`flux --check` over a file) reads `-f -`
    and every file once, and each release sees the same text."""
    ctx = click.get_current_context(silent=True)
    cache = ctx.find_root().meta.setdefault(_VALUES_READ, {}) if ctx is not None else {}
    key = os.fspath(path)
    if key not in cache:
        cache[key] = read_text(path)
    return cache[key]


def user_values(values_files: Sequence[str] = (), sets: Sequence[str] = (),
                set_string: Sequence[str] = (), set_json: Sequence[str] = (),
                set_file: Sequence[str] = (), inline: Sequence[dict] = ()) -> dict[str, Any]:
    """The values of `values_options` merged in Helm's order (files, inline layers,
    --set-json, --set, --set-string, --set-file); a RenderError as a CommandError."""
    from cozyrender.render import RenderError, load_values

    if list(values_files).count(STDIN) > 1:
        fail("standard input ('-') can be given only once")
    try:
        return load_values(values_files, sets, inline, set_json=set_json, set_string=set_string,
                           set_file=set_file, read=_read_values_file)
    except RenderError as err:
        fail(str(err))


# ---------------------------------------------------------------- help

def examples(*lines: str) -> str:
    """An `Examples:` epilog for `--help`, lines kept as written."""
    body = "\n".join(f"  {line}" for line in lines)
    return f"\b\nExamples:\n{body}"
