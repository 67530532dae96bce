"""Golden cases: reading case.yaml, finding the chart, finding the cases of a
suite and the files no case uses (stale)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cozyrender import render as rendering
from cozyrender.oserrors import describe
from cozyrender.yamlio import SafeLoader, yaml_problem

CASE_FILE = "case.yaml"
RAW_FILE = "raw.yaml"
RENDERED_FILE = "rendered.yaml"
EXPECTED_FILES = (RAW_FILE, RENDERED_FILE)
_CASE_KEYS = ("chart", "release", "namespace", "values", "set", "set_string", "set_json", "inline",
              "parent", "description", "expect_error", "api_versions", "kube_version")

_Loader = SafeLoader


class CaseError(Exception):
    """A case that cannot be run (bad case.yaml, render or post-render failure)."""


class CaseFileError(CaseError):
    """A case.yaml that cannot be read or makes no case: bad input (exit 2),
    not a failing case."""


class RenderFailure(CaseError):
    """Helm or the post-renderer refused the case's values (what expect_error matches)."""


@dataclass
class Case:
    path: Path
    chart: Path
    release: str
    namespace: str
    values_files: list[Path]
    sets: list[str]
    inline: dict[str, Any]
    parent: Path | None
    expect_error: str | None = None
    set_string: list[str] = field(default_factory=list)
    set_json: list[str] = field(default_factory=list)
    capabilities: rendering.Capabilities = rendering.NO_CAPABILITIES

    @property
    def name(self) -> str:
        return self.path.name

    def referenced_files(self) -> set[Path]:
        expected = () if self.expect_error is not None else EXPECTED_FILES
        return {self.path / CASE_FILE, *self.values_files, *(self.path / f for f in expected)}


def _find_chart(case_dir: Path, chart: str) -> Path:
    """A chart path relative to the case folder or to any folder above it (the
    repository), or the current folder; else a chart bundled with cozyrender
    (`charts/tenant`, `tenant`), so cases run outside this repository too."""
    from cozyrender.resources import chart_path

    for base in (case_dir, *case_dir.parents, Path.cwd()):
        candidate = (base / chart).resolve()
        if (candidate / "Chart.yaml").is_file():
            return candidate
    bundled = chart_path(chart)
    if (bundled / "Chart.yaml").is_file():
        return bundled.resolve()
    raise CaseError(f"{case_dir / CASE_FILE}: chart {chart!r} not found: no folder with a Chart.yaml "
                    f"at {chart} next to the case, in a folder above it or in the current folder")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or ``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _string_list(spec: Mapping, key: str, what: str, where: Path) -> list[str]:
    value = spec.get(key) or []
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise CaseError(f"{where}: {key!r} is a list of {what}")
    return list(value)


def load_case(case_dir: Path) -> Case:
    """The case in `case_dir`; CaseFileError naming its case.yaml when it makes none."""
    try:
        return _load_case(case_dir.resolve())
    except CaseFileError:
        raise
    except CaseError as err:
        raise CaseFileError(str(err)) from None


def _load_case(case_dir: Path) -> Case:
    path = case_dir / CASE_FILE
    try:
        spec = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except OSError as err:
        raise CaseError(f"{path}: cannot read: {describe(err)}") from None
    except UnicodeDecodeError as err:
        raise CaseError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except yaml.YAMLError as err:
        raise CaseError(f"{path}: not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(spec, dict):
        raise CaseError(f"{case_dir / CASE_FILE}: a case is a mapping")
    unknown = sorted(str(key) for key in spec if key not in _CASE_KEYS)
    if unknown:
        raise CaseError(f"{case_dir / CASE_FILE}: unknown key " + ", ".join(
            f"{key!r}{did_you_mean(key, _CASE_KEYS)}" for key in unknown)
            + f"; a case takes {', '.join(_CASE_KEYS)}")
    for key in ("chart", "release", "namespace"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise CaseError(f"{case_dir / CASE_FILE}: {key!r} is required (a string)")
    where = case_dir / CASE_FILE
    values = _string_list(spec, "values", "file names", where)
    sets = _string_list(spec, "set", "KEY=VALUE strings", where)
    set_string = _string_list(spec, "set_string", "KEY=VALUE strings", where)
    set_json = _string_list(spec, "set_json", "KEY=JSON strings", where)
    api_versions = _string_list(spec, "api_versions", "API versions (group/version or group/version/Kind)",
                                where)
    kube_version = spec.get("kube_version")
    if isinstance(kube_version, (int, float)) and not isinstance(kube_version, bool):
        # 1.30 read as a YAML number is 1.3: refuse it rather than render for another version
        raise CaseError(f"{where}: 'kube_version' is a string; quote it (kube_version: \"1.35\")")
    if kube_version is not None and (not isinstance(kube_version, str) or not kube_version):
        raise CaseError(f"{where}: 'kube_version' is a version string such as \"1.35\"")
    inline = spec.get("inline") or {}
    if not isinstance(inline, dict):
        raise CaseError(f"{case_dir / CASE_FILE}: 'inline' is a mapping of values")
    expect_error = spec.get("expect_error")
    if expect_error is not None and (not isinstance(expect_error, str) or not expect_error):
        raise CaseError(f"{case_dir / CASE_FILE}: 'expect_error' is a non-empty string "
                        "(a part of the expected error message)")
    parent = spec.get("parent")
    return Case(
        path=case_dir,
        chart=_find_chart(case_dir, spec["chart"]),
        release=spec["release"],
        namespace=spec["namespace"],
        values_files=[(case_dir / v).resolve() for v in values],
        sets=list(sets),
        inline=inline,
        parent=(case_dir / parent).resolve() if isinstance(parent, str) else None,
        expect_error=expect_error,
        set_string=set_string,
        set_json=set_json,
        capabilities=rendering.Capabilities(tuple(api_versions), kube_version),
    )


def _hidden(path: Path, base: Path) -> bool:
    """A file or folder whose name starts with `.` (`.gitkeep`, `.git/`): not part of a suite."""
    return any(part.startswith(".") for part in path.relative_to(base).parts)


def find_cases(cases_dir: Path) -> list[Path]:
    base = cases_dir.resolve()
    return sorted(p.parent for p in base.rglob(CASE_FILE) if not _hidden(p, base))


def find_stale(cases_dir: Path, cases: list[Case], unloaded: Iterable[Path] = ()) -> list[Path]:
    """Expected files no case renders, and files in a case folder that the case does not use.
    The folders of cases that could not be loaded (`unloaded`) are not judged: they are errors."""
    case_dirs = {c.path for c in cases}
    skipped = set(unloaded)
    used = set().union(*(c.referenced_files() for c in cases)) if cases else set()
    stale = []
    base = cases_dir.resolve()
    for path in sorted(base.rglob("*")):
        if not path.is_file() or path in used or _hidden(path, base) or path.parent in skipped:
            continue
        if path.name in EXPECTED_FILES or path.parent in case_dirs:
            stale.append(path)
    return stale
