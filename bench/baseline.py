"""The code issue 26's benchmarks compare with: the `cozyrender` package of
BASELINE (main before the compact cache), extracted with `git archive`."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "9258299"  # main before issue 26's cache work


def extract(tmp: Path) -> Path | None:
    """BASELINE's package under `tmp/baseline`, or None when git or the commit is missing."""
    target = tmp / "baseline"
    target.mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE, "cozyrender"], capture_output=True,
                                 check=True, timeout=60).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return target
