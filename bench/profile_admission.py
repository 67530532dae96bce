"""Where admission time goes (issue 34 item 1): the bench state of
bench_webhook (bench_budgets' 10,000 tenants) in a LiveIndex, and the same
AdmissionReviews decided in process the way the server decides them (the
body parsed, its depth checked, the Arbiter's decision, the answer
encoded), under cProfile. Prints the functions taking the most cumulative
and own time. Not part of `make bench`: run it as
`.venv/bin/python bench/profile_admission.py`."""

from __future__ import annotations

import cProfile
import importlib.util
import io
import json
import pstats
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    from cozyrender.budgets.live import LiveIndex
    from cozyrender.webhook.ledger import Arbiter
    from cozyrender.webhook.metrics import Metrics
    from cozyrender.webhook.server import _too_deep

    budgets, webhook = _load("bench_budgets"), _load("bench_webhook")
    objects = budgets.generate_state()
    index = LiveIndex(objects)
    index.state  # noqa: B018 - the first read indexes
    writes = webhook.bench_writes(objects, budgets)
    bodies = [json.dumps(webhook._review(obj, op, old, f"p{i}")).encode() for i, (obj, op, old) in enumerate(writes)]
    arbiter = Arbiter(index, threading.Lock(), Metrics())

    def decide_all() -> None:
        for data in bodies:
            body = json.loads(data)
            _too_deep(body)
            json.dumps(arbiter(body), separators=(",", ":")).encode()

    decide_all()  # warm
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    decide_all()
    profile.disable()
    took = time.perf_counter() - started
    print(f"{len(bodies):,} AdmissionReviews decided in process under cProfile: {took / len(bodies) * 1e3:.2f} ms each")
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(18)
        print(out.getvalue().split("\n", 6)[-1])


if __name__ == "__main__":
    main()
