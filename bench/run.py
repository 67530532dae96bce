"""Run every benchmark under bench/ (`make bench`): each bench_*.py module has a
`run()` that measures cozyrender side by side with a peer in the same run and
prints the figures and their ratios. Not a test: nothing here asserts a time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(selected: list[str]) -> None:
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if selected and name not in selected:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(f"\n== {name} ==", flush=True)
        module.run()


if __name__ == "__main__":
    main(sys.argv[1:])
