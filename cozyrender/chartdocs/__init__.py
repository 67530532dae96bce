"""`values.schema.json` and the README parameters table, generated from the
`## @param` comments of a chart's values.yaml (Cozystack's cozyvalues-gen
convention), with hand-written schema parts from `values.schema.overlay.json`.

    grammar.py  comments -> Model
    schema.py   Model -> JSON schema; the overlay merge
    readme.py   Model -> the README `## Parameters` section (jinja2)

`generate` is pure (texts in, texts out); `plan` reads a chart folder and says
which files differ from what they should be.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cozyrender.chartdocs.grammar import parse
from cozyrender.chartdocs.model import DocsError, Model
from cozyrender.chartdocs.readme import render_section, splice
from cozyrender.chartdocs.schema import build_schema, deep_merge, dump_schema
from cozyrender.oserrors import describe

__all__ = ["DocsError", "FileUpdate", "generate", "plan", "schema_for", "VALUES", "SCHEMA",
           "OVERLAY", "README"]

VALUES = "values.yaml"
SCHEMA = "values.schema.json"
OVERLAY = "values.schema.overlay.json"
README = "README.md"


def schema_for(model: Model, overlay: Any = None) -> dict[str, Any]:
    """The generated schema with the overlay (a JSON object, or None) merged in."""
    schema = build_schema(model)
    if overlay is None:
        return schema
    if not isinstance(overlay, dict):
        raise DocsError(f"{OVERLAY} must hold a JSON object")
    return deep_merge(schema, overlay)


def generate(values_text: str, readme_text: str, overlay: Any = None, title: str = "chart",
             source: str = VALUES) -> tuple[str, str]:
    """(values.schema.json text, README.md text) for a values.yaml."""
    model = parse(values_text, source=source)
    schema_text = dump_schema(schema_for(model, overlay))
    return schema_text, splice(readme_text, render_section(model), title)


@dataclass(frozen=True)
class FileUpdate:
    path: Path
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            self.old.splitlines(keepends=True), self.new.splitlines(keepends=True),
            fromfile=f"{self.path} (on disk)", tofile=f"{self.path} (generated)"))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError as err:
        raise DocsError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise DocsError(f"{path}: cannot read: {'is a folder, not a file' if path.is_dir() else describe(err)}") from None


def _chart_title(chart: Path) -> str:
    import yaml

    from cozyrender.yamlio import SafeLoader

    try:
        meta = yaml.load(_read(chart / "Chart.yaml"), Loader=SafeLoader)
    except yaml.YAMLError:
        meta = None
    return str(meta.get("name")) if isinstance(meta, dict) and meta.get("name") else chart.name


def plan(chart: str | Path) -> list[FileUpdate]:
    """What `values.schema.json` and `README.md` of a chart folder should hold."""
    chart = Path(chart)
    values_path = chart / VALUES
    if values_path.is_dir():
        raise DocsError(f"{values_path}: is a folder, not a file")
    if not values_path.is_file():
        raise DocsError(f"{chart}: no {VALUES}")
    overlay_path = chart / OVERLAY
    overlay = None
    if overlay_path.is_file():
        from cozyrender.yamlio import loads_json

        try:
            overlay = loads_json(_read(overlay_path))
        except ValueError as err:  # JSONDecodeError, or a key twice, a number too long
            raise DocsError(f"{overlay_path}: invalid JSON: {err}") from None
    readme_path = chart / README
    schema_text, readme_text = generate(_read(values_path), _read(readme_path), overlay,
                                        _chart_title(chart), source=str(values_path))
    return [FileUpdate(chart / SCHEMA, _read(chart / SCHEMA), schema_text),
            FileUpdate(readme_path, _read(readme_path), readme_text)]
