"""Build once: an output is rebuilt only when the digest of its inputs changed.

Rule: the digest is SHA-256 over the key (the build command, with the clone's own folder left
out, and what else the caller names, such as `go env GOVERSION`) and every input file's path
(as given, relative to the clone) and bytes (a folder stands for every
file under it, in sorted order). File timestamps play no part, so a fresh clone, whose files
are all newer than what was built before, rebuilds nothing whose inputs are the same.

- The digest of what was built is kept beside the first output, as `.<name>.digest`; the same
  digest and every output present: nothing is run.
- With `--store DIR` (the Makefile's BUILD_STORE, default ~/.cache/cozyrender-build) the outputs
  are also kept under DIR/<name>/<digest>/, and a clone whose inputs have that digest copies
  them from there instead of building: a second clone on the machine (CI's, a worktree's)
  reuses what the first built, and only for identical inputs. An empty `--store` keeps nothing;
  the store keeps the three newest digests of each name.
- Adoption, once: an output built before this rule (no digest recorded) that is newer than every
  input is taken as built from them, as the timestamp rule it replaces would have taken it.

    python tools/cached_build.py NAME --out FILE_OR_DIR... --in FILE_OR_DIR... \
        [--key TEXT] [--store DIR] -- COMMAND...

The command runs through the shell from the current folder. Bad input: one line
`cached_build: error: ...` on stderr, exit 2; a failed command's exit status is passed on.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

KEEP = 3  # digests kept per name in the store


def input_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such input")
    return files


def digest(key: str, inputs: list[Path]) -> str:
    sha = hashlib.sha256(key.encode() + b"\0")
    for path in input_files(inputs):
        sha.update(str(path).encode() + b"\0")
        sha.update(path.read_bytes())
        sha.update(b"\0")
    return sha.hexdigest()


def portable(command: str, outputs: list[Path]) -> str:
    """The command as the digest reads it: the clone's own folder (an output's absolute path,
    the current folder) left out, so two clones of the same inputs agree."""
    for output in outputs:
        command = command.replace(str(output), output.name)
    return command.replace(str(Path.cwd()), ".")


def record(outputs: list[Path], name: str) -> Path:
    first = outputs[0]
    return first.parent / f".{name}.digest"


def _copy(source: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target)


def _newest_input(inputs: list[Path]) -> float:
    return max((p.stat().st_mtime for p in input_files(inputs)), default=0.0)


def up_to_date(name: str, outputs: list[Path], inputs: list[Path], wanted: str) -> bool:
    stamp = record(outputs, name)
    if not all(o.exists() for o in outputs):
        return False
    if stamp.exists():
        return stamp.read_text().strip() == wanted
    if min(o.stat().st_mtime for o in outputs) >= _newest_input(inputs):  # adoption, once
        stamp.write_text(wanted + "\n")
        return True
    return False


def prune(folder: Path, keep: int = KEEP) -> None:
    """Keep the `keep` newest digests of one name in the store (a Go binary is up to 100 MB)."""
    kept = sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.endswith(".partial")),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def build(name: str, outputs: list[Path], inputs: list[Path], key: str, store: Path | None,
          command: list[str]) -> int:
    wanted = digest(key, inputs)
    if up_to_date(name, outputs, inputs, wanted):
        return 0
    kept = store / name / wanted if store else None
    if kept is not None and all((kept / o.name).exists() for o in outputs):
        for output in outputs:
            _copy(kept / output.name, output)
        print(f"cached_build: {name}: inputs {wanted[:12]} built before; copied from {kept}", file=sys.stderr)
    else:
        status = subprocess.run(" ".join(command), shell=True).returncode
        if status:
            return status
        missing = [str(o) for o in outputs if not o.exists()]
        if missing:
            print(f"cached_build: error: {name}: the command wrote no {', '.join(missing)}", file=sys.stderr)
            return 2
        if kept is not None:
            partial = kept.with_name(kept.name + f".{os.getpid()}.partial")
            for output in outputs:
                _copy(output, partial / output.name)
            if kept.exists():
                shutil.rmtree(partial)
            else:
                partial.rename(kept)
            prune(kept.parent)
    record(outputs, name).write_text(wanted + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("cached_build: error: no command: give it after `--`", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="cached_build", description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--out", nargs="+", type=Path, required=True)
    parser.add_argument("--in", dest="inputs", nargs="+", type=Path, required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--store", default="")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        print("cached_build: error: no command: give it after `--`", file=sys.stderr)
        return 2
    try:
        outputs = [o.absolute() for o in args.out]
        return build(args.name, outputs, args.inputs, args.key + "\0" + portable(" ".join(command), outputs),
                     Path(args.store).expanduser() if args.store else None, command)
    except OSError as err:
        print(f"cached_build: error: {args.name}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
