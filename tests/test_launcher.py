"""Issue 19 item 7: the installed `cozyrender` command (bin/cozyrender, the
wheel's script) says in one line what Python cannot: standard input is a
folder. Everything else reaches cozyrender.cli.main unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

LAUNCHER = ROOT / "bin" / "cozyrender"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COZYRENDER_PYTHON": sys.executable}


def _run(*args: str, stdin=None, data: bytes | None = None, cwd=None) -> subprocess.CompletedProcess:
    extra = {"input": data} if data is not None else {"stdin": stdin if stdin is not None else subprocess.DEVNULL}
    return subprocess.run([str(LAUNCHER), *args], capture_output=True, env=ENV, timeout=120, cwd=cwd, **extra)


@pytest.mark.parametrize(("args", "code", "name"), [
    (["post-render"], 1, "cozyrender post-render"), (["check", "--state", "-"], 2, "cozyrender check"),
    ([], 2, "cozyrender"), (["gpuclass", "validate", "-"], 2, "cozyrender gpuclass validate"),
    (["chart", "docs", "charts/tenant"], 2, "cozyrender chart docs"), (["gpuclass", "--help"], 2, "cozyrender gpuclass"),
])
def test_standard_input_a_folder_is_one_line(args, code, name, tmp_path):
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        result = _run(*args, stdin=folder)
    finally:
        os.close(folder)
    err = result.stderr.decode()
    assert result.returncode == code and result.stdout == b""
    assert err.count("\n") == 1 and err.startswith(f"{name}: error: standard input is a folder"), err
    assert "Fatal Python error" not in err


def test_python_alone_cannot_say_it(tmp_path):
    """Why the launcher exists: the interpreter stops before any of our code."""
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        result = subprocess.run([sys.executable, "-m", "cozyrender", "post-render"], stdin=folder,
                                capture_output=True, env=ENV, timeout=120)
    finally:
        os.close(folder)
    assert result.returncode != 0 and b"init_sys_streams" in result.stderr


def test_everything_else_reaches_the_cli(tmp_path):
    assert _run("post-render", data=b"").returncode == 0
    version = _run("--version")
    assert version.returncode == 0 and b"cozyrender" in version.stdout
    (tmp_path / "cozyrender").mkdir()  # a folder named like the package: not imported from the cwd
    (tmp_path / "cozyrender" / "__init__.py").write_text("raise SystemExit('the wrong cozyrender')\n")
    assert _run("--version", cwd=tmp_path).returncode == 0
    bad = _run("catalog", "--state", str(tmp_path / "missing"))
    assert bad.returncode == 2 and bad.stderr.decode().startswith("cozyrender catalog: error: ")
