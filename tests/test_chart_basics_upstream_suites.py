"""Cozystack's own helm-unittest suites for cozystack-basics, run against our
chart. The suites are ported as data (tests/data/cozystack-3c780acd/
basics-unittest-suites.json, from packages/system/cozystack-basics/tests/ at
3c780acd; each test keeps its upstream `it` name) and executed here with the
semantics of helm-unittest's assertions, rendering each suite's template files
by name, as helm-unittest does (only that template, documents in file order):
a test written against Cozystack's chart addresses the same files in ours."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BASICS = ROOT / "charts" / "cozystack-basics"
PORT = ROOT / "tests" / "data" / "cozystack-3c780acd" / "basics-unittest-suites.json"
SUITES = json.loads(PORT.read_text())["suites"]
TESTS = [(suite, test) for suite in SUITES for test in suite["tests"]]

_MISSING = object()


# ---------------------------------------------------------------- helm-unittest semantics

def lookup(doc: Any, path: str) -> Any:
    """helm-unittest's path syntax as the suites use it: `a.b`, `a[0]`,
    `a["k.with.dots"]`, `a[?(@.name=="x")]` (the first match). _MISSING when absent."""
    tokens = re.findall(r'\[\?\(@\.(\w+)=="([^"]*)"\)\]|\["([^"]*)"\]|\[(\d+)\]|([^.\[\]]+)', path)
    node = doc
    for field_, wanted, quoted, index, name in tokens:
        if field_:
            matches = [x for x in node if isinstance(x, dict) and x.get(field_) == wanted] \
                if isinstance(node, list) else []
            if not matches:
                return _MISSING
            node = matches[0]
        elif index:
            if not isinstance(node, list) or int(index) >= len(node):
                return _MISSING
            node = node[int(index)]
        else:
            key = quoted or name
            if not isinstance(node, dict) or key not in node:
                return _MISSING
            node = node[key]
    return node


def check(kind: str, spec: dict, docs: list[dict], failed: str | None) -> None:
    if kind == "notFailedTemplate":
        assert failed is None, failed
        return
    assert failed is None, failed
    if kind == "hasDocuments":
        assert len(docs) == spec["count"], [d.get("kind") for d in docs]
        return
    assert docs, "no document to assert on"
    for doc in docs:
        got = lookup(doc, spec["path"])
        if kind == "equal":
            assert got == spec["value"], (spec["path"], got)
        elif kind == "notEqual":
            assert got != spec["value"], (spec["path"], got)
        elif kind == "contains":
            assert isinstance(got, list) and spec["content"] in got, (spec["path"], got)
        elif kind in ("matchRegex", "notMatchRegex"):
            assert isinstance(got, str), (spec["path"], got)
            found = re.search(spec["pattern"], got) is not None
            assert found is (kind == "matchRegex"), (spec["path"], spec["pattern"], got)
        else:
            raise AssertionError(f"assertion {kind} is not ported")


def merge(base: Any, over: Any) -> Any:
    """A test's `set` over its suite's: maps merge, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
    return over


def render(suite: dict, test: dict, template: str, tmp_path: Path
           ) -> tuple[list[dict], str | None]:
    """What helm-unittest renders for one template: the chart with only that
    template (and the `_*.tpl` helpers), the suite's and test's values, the
    suite's capabilities; the documents in the order the file emits them
    (Helm's install-order sort does not apply). Rendered by the Helm SDK in
    process: its native render takes `api_versions` like `--api-versions`."""
    import helm_python
    from helm_python import _native

    chart = tmp_path / "chart"
    if chart.exists():
        shutil.rmtree(chart)
    shutil.copytree(BASICS, chart, ignore=lambda folder, names: [
        n for n in names if Path(folder).name == "templates" and not n.startswith("_")
        and f"templates/{n}" != template])
    values = merge(suite.get("set") or {}, test.get("set") or {})
    release = suite.get("release") or {}
    options = {"name": release.get("name", "cozystack-basics"),
               "namespace": release.get("namespace", "cozy-system"),
               "api_versions": list(suite.get("capabilities") or [])}
    loaded = helm_python.Chart.load(str(chart))
    try:
        files = json.loads(_native.call_string("helm_render", loaded._raw(), json.dumps(values),
                                               json.dumps(options)))
    except helm_python.HelmError as err:
        return [], " ".join(str(err).split())
    finally:
        loaded.close()
    text = next((t for path, t in files.items() if path.endswith("/" + template)), "")
    return [d for d in yaml.safe_load_all(text) if d is not None], None


def run(suite: dict, test: dict, tmp_path: Path) -> int:
    rendered: dict[str, tuple[list[dict], str | None]] = {}
    count = 0
    for assertion in test["asserts"]:
        template = assertion.get("template", suite["templates"][0])
        if template not in rendered:
            rendered[template] = render(suite, test, template, tmp_path)
        docs, failed = rendered[template]
        selector = test.get("documentSelector")
        if selector:
            docs = [d for d in docs if lookup(d, selector["path"]) == selector["value"]]
        index = assertion.get("documentIndex", test.get("documentIndex"))
        if index is not None and not (set(assertion) & {"hasDocuments"}):
            assert index < len(docs), (index, len(docs))
            docs = [docs[index]]
        [kind] = [k for k in assertion if k not in ("documentIndex", "template")]
        check(kind, assertion[kind] or {}, docs, failed)
        count += 1
    return count


# ---------------------------------------------------------------- the suites

def test_every_upstream_test_is_ported() -> None:
    assert len(SUITES) == 9 and len(TESTS) == 56
    for suite in SUITES:
        for template in suite["templates"]:
            assert (BASICS / template).is_file(), template  # same file names as Cozystack


@pytest.mark.parametrize("suite, test", TESTS,
                         ids=[f"{Path(s['file']).stem}::{t['it'][:60]}" for s, t in TESTS])
def test_upstream_suite(suite: dict, test: dict, tmp_path: Path) -> None:
    assert run(suite, test, tmp_path) == len(test["asserts"])


def test_the_runner_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    suite = next(s for s in SUITES if s["file"].endswith("tenant-root_test.yaml"))
    test = {"it": "mutated", "asserts": [
        {"documentIndex": 1, "equal": {"path": "spec.timeout", "value": "5m0s"}}]}
    with pytest.raises(AssertionError):
        run(suite, test, tmp_path)
    test = {"it": "mutated", "asserts": [{"hasDocuments": {"count": 3}}]}
    with pytest.raises(AssertionError):
        run(suite, test, tmp_path)


def test_lookup() -> None:
    doc = {"spec": {"variables": [{"name": "a", "expression": "x"},
                                  {"name": "b", "expression": "y"}]},
           "stringData": {"values.yaml": "v"}, "list": [1, 2]}
    assert lookup(doc, 'spec.variables[?(@.name=="b")].expression') == "y"
    assert lookup(doc, 'stringData["values.yaml"]') == "v"
    assert lookup(doc, "list[1]") == 2
    assert lookup(doc, "list[5]") is _MISSING
    assert lookup(doc, 'spec.variables[?(@.name=="c")].expression') is _MISSING
