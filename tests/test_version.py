"""One version (issue 29 item 5): the wheel, the webhook chart's version and
appVersion, the image tag its values name, and the Helm plugin all say
cozyrender/__init__.py's `__version__`, the one source (pyproject.toml reads
it: `[tool.setuptools.dynamic]`). `tools/set_version.py NEW` rewrites them all."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

import yaml

from tests.conftest import ROOT

WEBHOOK_CHART = ROOT / "charts" / "cozyrender-webhook"


def source_version() -> str:
    """`__version__` as written in cozyrender/__init__.py (read, not imported: the
    installed package may be another checkout's)."""
    tree = ast.parse((ROOT / "cozyrender" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"]:
            return node.value.value
    raise AssertionError("cozyrender/__init__.py has no __version__")


def stated_versions() -> dict[str, str]:
    """Every place that states the version, by where."""
    chart = yaml.safe_load((WEBHOOK_CHART / "Chart.yaml").read_text())
    image = yaml.safe_load((WEBHOOK_CHART / "values.yaml").read_text())["image"]
    plugin = yaml.safe_load((ROOT / "plugins" / "cozyrender" / "plugin.yaml").read_text())
    return {
        "charts/cozyrender-webhook/Chart.yaml version": str(chart["version"]),
        "charts/cozyrender-webhook/Chart.yaml appVersion": str(chart["appVersion"]),
        "charts/cozyrender-webhook/values.yaml image tag": image.rpartition(":")[2],
        "plugins/cozyrender/plugin.yaml version": str(plugin["version"]),
    }


def test_the_version_is_a_semantic_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", source_version())


def test_pyproject_reads_the_one_source():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "cozyrender.__version__"}


def test_every_stated_version_is_the_source():
    version = source_version()
    assert {where: v for where, v in stated_versions().items() if v != version} == {}


def test_the_command_reports_it():
    done = subprocess.run([sys.executable, "-m", "cozyrender", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith(source_version()), done


def test_set_version_rewrites_every_place(tmp_path):
    """tools/set_version.py on a copy of the files: every stated version follows, nothing else changes."""
    import shutil

    for rel in ("cozyrender/__init__.py", "charts/cozyrender-webhook/Chart.yaml",
                "charts/cozyrender-webhook/values.yaml", "plugins/cozyrender/plugin.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "set_version.py"), "9.8.7", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    chart = yaml.safe_load((tmp_path / "charts/cozyrender-webhook/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == ("9.8.7", "9.8.7")
    assert yaml.safe_load((tmp_path / "charts/cozyrender-webhook/values.yaml").read_text())["image"].endswith(":9.8.7")
    assert yaml.safe_load((tmp_path / "plugins/cozyrender/plugin.yaml").read_text())["version"] == "9.8.7"
    assert '__version__ = "9.8.7"' in (tmp_path / "cozyrender/__init__.py").read_text()
    before = (ROOT / "charts/cozyrender-webhook/values.yaml").read_text().splitlines()
    after = (tmp_path / "charts/cozyrender-webhook/values.yaml").read_text().splitlines()
    assert [(a, b) for a, b in zip(before, after) if a != b] == [
        (line, line.rpartition(":")[0] + ':9.8.7"') for line in before if line.startswith("image:")]
