"""Where the whole-state audit's time goes (issue 26 item 2): the bench
state of `bench_budgets` indexed and audited under cProfile, the functions
printed by their own time and by cumulative time. Not part of `make bench`'s
figures (a profiler slows the code it watches); run it by hand:

    .venv/bin/python bench/profile_audit.py [--top N]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import pstats
import sys
import time
from pathlib import Path

from cozyrender.budgets import audit, index_state

HERE = Path(__file__).resolve().parent


def _bench_budgets():
    spec = importlib.util.spec_from_file_location("bench_budgets", HERE / "bench_budgets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="how many functions to print per table")
    args = parser.parse_args(argv)
    objects = _bench_budgets().generate_state()
    gc.freeze()  # as `cozyrender check` does once the state is loaded
    start = time.process_time()
    audit(index_state(objects))
    plain = time.process_time() - start
    profiler = cProfile.Profile()
    profiler.enable()
    audit(index_state(objects))
    profiler.disable()
    print(f"{len(objects):,} objects; index + audit without the profiler: {plain:.2f} s CPU")
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main(sys.argv[1:])
