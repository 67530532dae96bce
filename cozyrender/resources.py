"""Files the commands need at run time, found in one place.

The charts (`charts/tenant`, `charts/cozystack-basics`, the GPUClass CRD in
the latter's `crds/`) live at the repository's top level, where Helm users and
the other tools expect them. A wheel carries a copy as package data,
`cozyrender/_charts/` (copied by the build step in setup.py), found through
importlib.resources; in a checkout (an editable install, the tests) that copy
does not exist and the repository's own files are used, so an edit to a chart
is seen at once.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

PACKAGED = "_charts"
BUNDLED_CHARTS = ("tenant", "cozystack-basics")
CRD_FILE = ("cozystack-basics", "crds", "gpuclasses.cozystack.io.yaml")


def charts_dir() -> Path:
    """The folder holding the bundled charts: the wheel's copy, else the checkout's."""
    packaged = files("cozyrender").joinpath(PACKAGED)
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "charts"


def data_path(*parts: str) -> Path:
    """A file or folder under the bundled charts, e.g. data_path("tenant", "values.yaml")."""
    return charts_dir().joinpath(*parts)


def crd_path() -> Path:
    """The GPUClass CRD the commands validate against."""
    return data_path(*CRD_FILE)


def chart_path(ref: str | os.PathLike) -> Path:
    """A chart as a command argument names it: a folder or archive when one exists
    there, else a bundled chart by name (`tenant`, `cozystack-basics`, or
    `charts/tenant` as the README writes it), as `helm template` reads
    `repo/chart` references. Anything else is returned as given (Helm reports it)."""
    path = Path(ref)
    if path.exists():
        return path
    name = path.name if path.parent in (Path("."), Path("charts")) else None
    if name in BUNDLED_CHARTS and data_path(name, "Chart.yaml").is_file():
        return data_path(name)
    return path
