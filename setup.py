"""The one build step pyproject.toml cannot declare: the charts (the GPUClass
CRD included) are copied into the wheel as `cozyrender/_charts`, since the
commands read and render them at run time (`cozyrender.resources` finds them).
They stay at the repository's top level, where Helm and the tests use them;
an editable install reads them there."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithCharts(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "cozyrender" / "_charts"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ROOT / "charts", target,
                        ignore=shutil.ignore_patterns(".*", "__pycache__"))


setup(cmdclass={"build_py": BuildPyWithCharts})
