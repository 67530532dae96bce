"""Large quotas and the cost of verifying edits (issue 13), side by side with
a peer in the same run. Not a test: nothing here asserts a time.

1. One ResourceQuota of N GPU budget keys (N = 5,000, 20,000, 40,000) plus
   one ordinary key, and a mixed one of N budget and N ordinary keys: the
   whole `cozyrender post-render` process (median of 3) against PyYAML's
   libyaml load + dump of the same document, the floor any reader that
   parses it pays.
2. The verification step (every edited document parsed again and compared
   with the original plus the intended changes): the CPU time spent inside
   it against the whole post-render's, in process, on the 300-release stream
   of bench_postrender and on the mixed 40,000-key quota.
"""

from __future__ import annotations

import importlib.util
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cozyrender.postrender import document as document_module  # noqa: E402
from cozyrender.postrender import filters as filters_module  # noqa: E402
from cozyrender.postrender import post_render  # noqa: E402

COZYRENDER = [str(Path(sys.executable).parent / "cozyrender"), "post-render"]


def quota(budget: int, ordinary: int) -> bytes:
    hard = "".join(f"    c{i}.gpuclass.cozystack.io/devices: 1\n" for i in range(budget))
    hard += "".join(f"    example.com/r{i}: 1\n" for i in range(max(ordinary, 1)))
    return ("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: tenant-quota, namespace: tenant-a}\n"
            "spec:\n  hard:\n" + hard).encode()


def process_seconds(data: bytes, runs: int = 3) -> tuple[float, float]:
    """(median wall seconds, least CPU seconds) of the whole process; CPU time
    (user + system of the child) is what a loaded machine disturbs least."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(COZYRENDER, input=data, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(cpus)


def pyyaml_seconds(data: bytes, runs: int = 3) -> float:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    cpus = []
    for _ in range(runs):
        started = time.process_time()
        yaml.dump(yaml.load(data, Loader=loader), Dumper=dumper)
        cpus.append(time.process_time() - started)
    return min(cpus)


def bench_quotas() -> None:
    print("one ResourceQuota, whole process (wall: median of 3; CPU: least of 3), "
          "against PyYAML libyaml load + dump of it (in process, CPU):")
    for budget, ordinary in ((5000, 1), (20000, 1), (40000, 1), (20000, 20000), (40000, 40000)):
        data = quota(budget, ordinary)
        (wall, ours), peer = process_seconds(data), pyyaml_seconds(data)
        print(f"  {budget:6,} budget + {ordinary:6,} ordinary keys ({len(data) / 2**20:4.1f} MiB)   "
              f"cozyrender {wall:5.2f} s ({ours:5.2f} s CPU)   PyYAML {peer:5.2f} s CPU   ratio {peer / ours:4.1f}x")


def bench_verification() -> None:
    """CPU time spent inside the verification (Document.verified for every
    edited document, filters.verify_values for every edited values.yaml),
    against the whole run's, least of several runs each."""
    spec = importlib.util.spec_from_file_location("bench_postrender", Path(__file__).with_name("bench_postrender.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = [("300 releases", b"".join(module.build_release(i) for i in range(300)), 7),
             ("quota, 40,000 + 40,000 keys", quota(40000, 40000), 5)]
    spent = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - started
        return wrapper

    originals = (document_module.Document.verified, filters_module.verify_values)
    document_module.Document.verified = timed(originals[0])
    filters_module.verify_values = timed(originals[1])
    print("\nthe verification step, in process (CPU, least of the runs):")
    try:
        for label, data, runs in cases:
            totals, verifying = [], []
            for _ in range(runs):
                spent[0] = 0.0
                started = time.process_time()
                output = post_render(data).output
                totals.append(time.process_time() - started)
                verifying.append(spent[0])
            edited = len(data) != len(output)
            print(f"  {label:28} post-render {min(totals):5.2f} s, of which verifying {min(verifying) * 1000:5.0f} ms "
                  f"({min(verifying) / min(totals):5.1%}){'' if edited else ' (nothing edited?)'}")
    finally:
        document_module.Document.verified, filters_module.verify_values = originals


def run() -> None:
    bench_quotas()
    bench_verification()


if __name__ == "__main__":
    run()
