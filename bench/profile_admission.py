"""Where admission time goes (issue 34 item 1): AdmissionReviews decided in
process the way the server decides them (the body parsed, its depth
checked, the Arbiter's decision, the answer encoded), under cProfile; prints
the time per decision and the functions taking the most own and cumulative
time. `bench_webhook` runs it on its own state and writes after the HTTPS
figures (so `make bench` shows both in one run); alone:
`.venv/bin/python bench/profile_admission.py`."""

from __future__ import annotations

import cProfile
import importlib.util
import json
import pstats
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent / "tests") not in sys.path:
    sys.path.insert(0, str(HERE.parent / "tests"))


def profile_decisions(arbiter, bodies: list[bytes], top: int = 8) -> None:
    from cozyrender.webhook.server import _too_deep

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
    stats = pstats.Stats(profile)
    total = sum(row[2] for row in stats.stats.values())  # own time of every function
    print(f"  profile: {len(bodies):,} AdmissionReviews decided in process under cProfile, "
          f"{took / len(bodies) * 1e3:.2f} ms each; by own time:")
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (path, line, name), (_, calls, own, cumulative, _) in rows:
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else path
        print(f"    {own / total * 100:5.1f} % own, {cumulative / total * 100:5.1f} % cumulative  {name}  "
              f"({where}, {calls:,} calls)")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    from cozyrender.budgets.live import LiveIndex
    from cozyrender.webhook.ledger import Arbiter
    from cozyrender.webhook.metrics import Metrics

    budgets, webhook = _load("bench_budgets"), _load("bench_webhook")
    objects = budgets.generate_state()
    index = LiveIndex(objects)
    index.state  # noqa: B018 - the first read indexes
    writes = webhook.bench_writes(objects, budgets)
    bodies = [json.dumps(webhook._review(obj, op, old, f"p{i}")).encode() for i, (obj, op, old) in enumerate(writes)]
    profile_decisions(Arbiter(index, threading.Lock(), Metrics()), bodies, top=18)


if __name__ == "__main__":
    main()
