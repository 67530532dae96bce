"""Running a golden suite: render each case (parents first), post-render it,
validate the manifests, compare with (or write) the expected files."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cozyrender import render as rendering
from cozyrender import validate
from cozyrender.golden.cases import (
    CASE_FILE,
    RAW_FILE,
    RENDERED_FILE,
    Case,
    CaseError,
    CaseFileError,
    RenderFailure,
    find_cases,
    find_stale,
    load_case,
)
from cozyrender.golden.normalise import diff_objects, format_normalised, normalise, normalise_objects
from cozyrender.values_secret import SECRET_NAME as VALUES_SECRET
from cozyrender.values_secret import ValuesSecretError, is_values_secret, read_values
from cozyrender.yamlio import SafeLoader, yaml_problem

_Loader = SafeLoader

PostRender = Callable[[bytes], tuple[bytes, list[str]]]


def secret_values(rendered: str, namespace: str) -> dict[str, Any]:
    """The values.yaml of the cozystack-values Secret in `namespace` (stringData or data)."""
    for obj in yaml.load_all(rendered, Loader=_Loader):
        if isinstance(obj, dict) and is_values_secret(obj, namespace):
            try:
                return read_values(obj)
            except ValuesSecretError as err:
                raise CaseError(f"the {VALUES_SECRET} Secret of {namespace}: {err}") from None
    raise CaseError(f"no {VALUES_SECRET} Secret for namespace {namespace} in the parent's output")


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
    # case.yaml files that make no case, and "no cases at all": bad input, nothing was run
    bad_input: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.bad_input and not self.stale and not self.errors and all(r.ok for r in self.results)


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
                result.problems.append(f"{label}: invalid YAML: {yaml_problem(err)}")
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
                result.problems.append(f"{label}: {path} is not YAML: {yaml_problem(err)}")
                continue
            problems = diff_objects(expected, actual, label)
            if not problems and expected_text != format_normalised(actual):
                problems.append(f"{label}: {path} matches but is not normalised "
                                "(run with --update to rewrite it)")
            result.problems.extend(problems)


def run_golden(cases_dir: Path, update: bool = False,
               post_render: PostRender | None = None) -> GoldenReport:
    """Run every case under `cases_dir` (recursively); write expected files when updating."""
    runner = _Runner(post_render, update)
    case_dirs = find_cases(cases_dir)
    if not case_dirs:  # a mistyped path must not pass CI as "0 cases, 0 failed"
        return GoldenReport([], [], bad_input=[
            f"no cases under {cases_dir}: a case is a folder holding a {CASE_FILE} "
            "(chart, release, namespace); see `cozyrender golden --help`"])
    unreadable = []  # every case.yaml is read before anything renders: bad input is said first
    for case_dir in case_dirs:
        try:
            load_case(case_dir)
        except CaseFileError as err:
            unreadable.append(str(err))
    if unreadable:
        return GoldenReport([], [], bad_input=unreadable)
    errors: list[str] = []
    error_cases: list[Path | None] = []
    for case_dir in case_dirs:
        try:
            runner.run(case_dir)
        except CaseError as err:
            errors.append(str(err))
            error_cases.append(case_dir)
    results = sorted(runner.results.values(), key=lambda r: r.case.path)
    stale = find_stale(cases_dir, [r.case for r in results], [d for d in error_cases if d])
    return GoldenReport(results, stale, errors, error_cases)
