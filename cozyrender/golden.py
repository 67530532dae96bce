"""Golden-file chart tests: render each case, compare with the expected files.

A case is a folder holding `case.yaml`:

    chart: charts/tenant      # relative to the case folder or any folder above it
    release: tenant-a
    namespace: tenant-root
    values: [values.yaml]     # values files in the case folder, merged in order
    set: ["gpu.vgpu=true"]    # optional, Helm --set syntax, applied last
    set_string: [...]         # optional, as --set-string; set_json: [...] as --set-json
    inline: {...}             # optional inline values, merged after the files
    parent: ../root           # optional: start from the values.yaml of the
                              # cozystack-values Secret that the parent case's
                              # post-rendered output puts in this release's
                              # namespace (what Flux's valuesFrom hands the chart)
    expect_error: "must be"   # optional: the render (or post-render) must fail
                              # with a message containing this; no expected files
    api_versions: [cozystack.io/v1alpha1/GPUClass]   # optional, as `helm template -a`
    kube_version: "1.35"      # optional, as `helm template --kube-version`

and the expected `raw.yaml` (Helm's output) and `rendered.yaml` (after the
post-renderer), each normalised: one document per object, ordered by
kind/namespace/name, so diffs are stable and name the object. Every rendered
manifest is validated offline against the Kubernetes schemas.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cozyrender import render as rendering
from cozyrender import validate
from cozyrender.values_secret import SECRET_NAME as VALUES_SECRET
from cozyrender.values_secret import ValuesSecretError, is_values_secret, read_values
from cozyrender.yamlio import SafeLoader, dump_readable

CASE_FILE = "case.yaml"
RAW_FILE = "raw.yaml"
RENDERED_FILE = "rendered.yaml"
EXPECTED_FILES = (RAW_FILE, RENDERED_FILE)
_CASE_KEYS = ("chart", "release", "namespace", "values", "set", "set_string", "set_json", "inline",
              "parent", "description", "expect_error", "api_versions", "kube_version")

_Loader = SafeLoader

PostRender = Callable[[bytes], tuple[bytes, list[str]]]


class CaseError(Exception):
    """A case that cannot be run (bad case.yaml, render or post-render failure)."""


class RenderFailure(CaseError):
    """Helm or the post-renderer refused the case's values (what expect_error matches)."""


# ---------------------------------------------------------------- normalising



def _sort_key(obj: Any) -> tuple[str, str, str]:
    if not isinstance(obj, Mapping):
        return ("", "", "")
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return (str(obj.get("kind") or ""), str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""))


def normalise(text: str) -> list[tuple[str, str]]:
    """[(object id, normalised YAML)] for a stream, ordered by kind/namespace/name.
    Empty and comment-only documents are left out; a repeated id gets a #n suffix."""
    return normalise_objects(yaml.load_all(text, Loader=_Loader))


def normalise_objects(documents: Iterable[Any]) -> list[tuple[str, str]]:
    """`normalise` for documents already parsed."""
    objects = sorted((o for o in documents if o is not None), key=_sort_key)
    out: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for obj in objects:
        oid = validate.object_id(obj) if isinstance(obj, Mapping) else "?"
        seen[oid] = seen.get(oid, 0) + 1
        if seen[oid] > 1:
            oid = f"{oid}#{seen[oid]}"
        body = dump_readable(obj, width=1 << 30)
        out.append((oid, body))
    return out


def format_normalised(objects: list[tuple[str, str]]) -> str:
    """The expected-file text: each object under a `---` and a comment naming it."""
    return "".join(f"---\n# {oid}\n{body}" for oid, body in objects)


def diff_objects(expected: list[tuple[str, str]], actual: list[tuple[str, str]], label: str
                 ) -> list[str]:
    """One unified diff per object that differs, missing or unexpected, named kind/namespace/name."""
    want, got = dict(expected), dict(actual)
    problems = []
    for oid in sorted(want.keys() | got.keys()):
        if want.get(oid) == got.get(oid):
            continue
        what = ("missing object" if oid not in got else
                "unexpected object" if oid not in want else "object differs")
        diff = difflib.unified_diff(
            want.get(oid, "").splitlines(keepends=True), got.get(oid, "").splitlines(keepends=True),
            fromfile=f"expected {label}: {oid}", tofile=f"rendered {label}: {oid}")
        problems.append(f"{label}: {what}: {oid}\n{''.join(diff)}")
    return problems


# ---------------------------------------------------------------- cases

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
    case_dir = case_dir.resolve()
    try:
        spec = yaml.load((case_dir / CASE_FILE).read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise CaseError(f"{case_dir / CASE_FILE}: {' '.join(str(err).split())}") from None
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


def secret_values(rendered: str, namespace: str) -> dict[str, Any]:
    """The values.yaml of the cozystack-values Secret in `namespace` (stringData or data)."""
    for obj in yaml.load_all(rendered, Loader=_Loader):
        if isinstance(obj, dict) and is_values_secret(obj, namespace):
            try:
                return read_values(obj)
            except ValuesSecretError as err:
                raise CaseError(f"the {VALUES_SECRET} Secret of {namespace}: {err}") from None
    raise CaseError(f"no {VALUES_SECRET} Secret for namespace {namespace} in the parent's output")


# ---------------------------------------------------------------- running

@dataclass
class CaseResult:
    case: Case
    values: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    rendered: str = ""
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    post_render_warnings: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    seconds: float = 0.0  # this case's own render and check, its parent's excluded

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class GoldenReport:
    results: list[CaseResult]
    stale: list[Path]
    errors: list[str] = field(default_factory=list)
    # the case folder each error belongs to (None: the suite's), in errors' order
    error_cases: list[Path | None] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.stale and not self.errors and all(r.ok for r in self.results)


def default_post_render(data: bytes) -> tuple[bytes, list[str]]:
    from cozyrender.postrender import PostRenderError, post_render

    try:
        result = post_render(data)
    except PostRenderError as err:
        raise CaseError(f"post-render failed: {err}") from None
    return result.output, list(result.warnings)


class _Runner:
    def __init__(self, post_render: PostRender | None, update: bool) -> None:
        self.post_render = post_render or default_post_render
        self.update = update
        self.results: dict[Path, CaseResult] = {}
        self.running: set[Path] = set()

    def run(self, case_dir: Path) -> CaseResult:
        if case_dir in self.results:
            return self.results[case_dir]
        if case_dir in self.running:
            raise CaseError(f"{case_dir}: the parent chain loops back to this case")
        self.running.add(case_dir)
        started = time.perf_counter()
        try:
            case = load_case(case_dir)
            result = CaseResult(case)
            if case.parent is not None and (case.parent / CASE_FILE).is_file():
                try:  # first, so its time is not counted here
                    self.run(case.parent)
                except CaseError:
                    pass  # reported where the parent's output is needed (_render)
                started = time.perf_counter()
            if case.expect_error is not None:
                self._expect_error(result, case.expect_error)
            else:
                try:
                    self._render(result)
                    self._check(result)
                except CaseError as err:
                    result.problems.append(str(err))
        finally:
            self.running.discard(case_dir)
        result.seconds = time.perf_counter() - started
        self.results[case_dir] = result
        return result

    def _expect_error(self, result: CaseResult, expected: str) -> None:
        """Pass when rendering fails with `expected` in the message; nothing is written."""
        try:
            self._render(result)
        except RenderFailure as err:
            if expected not in str(err):
                result.problems.append(f"expected an error containing {expected!r}, got: {err}")
            return
        except CaseError as err:  # the case could not be run at all (e.g. its parent)
            result.problems.append(str(err))
            return
        result.problems.append(f"rendered without error, expected an error containing "
                               f"{expected!r}")
        result.raw = result.rendered = ""  # a child case must not build on it

    def _render(self, result: CaseResult) -> None:
        case = result.case
        base: dict[str, Any] = {}
        if case.parent is not None:
            if not (case.parent / CASE_FILE).is_file():
                raise CaseError(f"parent {case.parent} is not a case")
            parent = self.run(case.parent)
            if not parent.rendered:
                raise CaseError(f"parent case {parent.case.name} did not render")
            base = secret_values(parent.rendered, case.namespace)
        try:
            user = rendering.load_values(case.values_files, case.sets, [case.inline],
                                         set_string=case.set_string, set_json=case.set_json)
            result.values = rendering.merge_values(base, user)
            raw = rendering.template(case.chart, result.values, case.release, case.namespace,
                                     capabilities=case.capabilities)
        except rendering.RenderError as err:
            raise RenderFailure(f"render failed: {err}") from None
        try:
            output, warnings = self.post_render(raw)
        except RenderFailure:
            raise
        except CaseError as err:
            raise RenderFailure(str(err)) from None
        result.raw, result.rendered = raw.decode("utf-8"), output.decode("utf-8")
        result.post_render_warnings.extend(warnings)
        result.warnings.extend(f"post-render: {w}" for w in warnings)

    def _check(self, result: CaseResult) -> None:
        for label, text in ((RAW_FILE, result.raw), (RENDERED_FILE, result.rendered)):
            try:  # parsed once, for the schemas and for the comparison
                documents = list(yaml.load_all(text, Loader=_Loader))
            except yaml.YAMLError as err:
                result.problems.append(f"{label}: invalid YAML: {' '.join(str(err).split())}")
                continue
            for finding in validate.validate_objects(documents):
                (result.problems if finding.error else result.warnings).append(
                    f"{label}: {finding}")
            actual = normalise_objects(documents)
            path = result.case.path / label
            if self.update:
                canonical = format_normalised(actual)
                if not path.is_file() or path.read_text(encoding="utf-8") != canonical:
                    path.write_text(canonical, encoding="utf-8")
                    result.written.append(path)
                continue
            if not path.is_file():
                result.problems.append(f"{label}: expected file {path} is missing "
                                       "(run with --update to write it, then review it)")
                continue
            expected_text = path.read_text(encoding="utf-8")
            try:
                expected = normalise(expected_text)
            except yaml.YAMLError as err:
                result.problems.append(f"{label}: {path} is not YAML: {' '.join(str(err).split())}")
                continue
            problems = diff_objects(expected, actual, label)
            if not problems and expected_text != format_normalised(actual):
                problems.append(f"{label}: {path} matches but is not normalised "
                                "(run with --update to rewrite it)")
            result.problems.extend(problems)


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


def run_golden(cases_dir: Path, update: bool = False,
               post_render: PostRender | None = None) -> GoldenReport:
    """Run every case under `cases_dir` (recursively); write expected files when updating."""
    runner = _Runner(post_render, update)
    case_dirs = find_cases(cases_dir)
    # A mistyped path must not pass CI as "0 cases, 0 failed".
    errors = [] if case_dirs else [
        f"no cases under {cases_dir}: a case is a folder holding a {CASE_FILE} "
        "(chart, release, namespace); see `cozyrender golden --help`"]
    error_cases: list[Path | None] = [None] * len(errors)
    for case_dir in case_dirs:
        try:
            runner.run(case_dir)
        except CaseError as err:
            errors.append(str(err))
            error_cases.append(case_dir)
    results = sorted(runner.results.values(), key=lambda r: r.case.path)
    stale = find_stale(cases_dir, [r.case for r in results], [d for d in error_cases if d])
    return GoldenReport(results, stale, errors, error_cases)
