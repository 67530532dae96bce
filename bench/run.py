"""Run every benchmark under bench/ (`make bench`): each bench_*.py module has a
`run()` that measures cozyrender side by side with a peer in the same run and
prints the figures and their ratios. Not a test: nothing here asserts a time.

Each benchmark runs in a process of its own (`python bench/run.py NAME` runs one),
so none is measured on a heap the earlier ones filled (the budgets bench alone
leaves 312,529 generated objects and their indexes behind). A name that is not a
benchmark is an error (exit 2), never a silent run of nothing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return [path.stem.removeprefix("bench_") for path in sorted(HERE.glob("bench_*.py"))]


def run_one(name: str) -> None:
    path = HERE / f"bench_{name}.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print(f"\n== {name} ==", flush=True)
    module.run()


def main(selected: list[str]) -> int:
    known = names()
    unknown = sorted(set(selected) - set(known))
    if unknown:
        print(f"bench/run.py: error: no benchmark named {', '.join(unknown)} (there are: {', '.join(known)})",
              file=sys.stderr)
        return 2
    chosen = [name for name in known if not selected or name in selected]
    if len(chosen) == 1:
        run_one(chosen[0])
        return 0
    failed = [name for name in chosen if subprocess.run([sys.executable, __file__, name]).returncode != 0]
    if failed:
        print(f"bench/run.py: error: {', '.join(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
