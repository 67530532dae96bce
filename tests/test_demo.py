"""`make demo` on the bundled tenant tree: what each tenant gets."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_demo_summarises_the_tree():
    result = subprocess.run([sys.executable, "-m", "cozyrender.demo"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.startswith("tenant-")}
    assert list(rows) == ["tenant-root", "tenant-gpu", "tenant-mixed", "tenant-mixed-ml", "tenant-mixed-web"]
    assert rows["tenant-gpu"][-2:] == ["no", "true"] and "dropped" in rows["tenant-gpu"]
    assert rows["tenant-mixed"][-2:] == ["yes", "true"] and "kept," in rows["tenant-mixed"]
    assert rows["tenant-mixed-ml"][-2:] == ["no", "true"]
    assert rows["tenant-mixed-web"][-2:] == ["yes", "false"]
    assert "demo-output" in result.stdout
    assert (ROOT / "demo-output" / "mixed-ml" / "rendered.yaml").is_file()
