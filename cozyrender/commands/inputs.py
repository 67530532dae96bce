"""What every command reads: `-` for standard input wherever a file is taken (`read_text`,
`read_bytes`), read once per process; folders wherever files are taken (`expand_paths`: the
YAML/JSON files below, suffixes in any letter case, in name order, dotfiles and dot-folders
skipped, every skipped file named in a warning with why); a kubeconfig checked before use."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

from .messages import fail, os_problem

STDIN = "-"
STDIN_NAME = "<stdin>"
STATE_SUFFIXES = (".yaml", ".yml", ".json")
EMPTY_FOLDER = "an empty folder"



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
        fail(f"{path}: not valid YAML: {yaml_problem(err, text=text)}")
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


