"""The ported Kubernetes tables carry their provenance and licence, and the
docs account of them (docs/concepts/kubernetes-semantics.md) stays true."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.k8s_tables import DATA

FILES = sorted(DATA.glob("*.yaml"))


def _rows(path) -> list:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [row for value in data.values() if isinstance(value, list) for row in value]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_table_cites_its_upstream_file_commit_and_licence(path):
    header = path.read_text(encoding="utf-8").split("\n\n")[0]
    assert re.search(r"Ported from \S+/\S+ \S+_test\.go", header.replace("\n# ", " "))
    assert re.search(r"\b[0-9a-f]{40}\b", header)
    assert "Apache-2.0" in header and "LICENSE-APACHE-2.0.md" in header
    assert re.search(r"Left out|All \d+ rows|All rows", header)
    for row in _rows(path):
        if isinstance(row, dict) and "deliberate" in row:
            assert len(row["deliberate"]) > 20  # a reason, not a flag


def test_the_licence_is_kept_with_the_data():
    assert "Apache License, Version 2.0" in (DATA / "LICENSE-APACHE-2.0.md").read_text()


def test_the_readme_counts_are_true(repo_root):
    readme = (repo_root / "docs" / "concepts" / "kubernetes-semantics.md").read_text(encoding="utf-8")
    match = re.search(r"(\d+) rows are ported; all pass; (\d+) are deliberate differences", readme)
    assert match
    rows = [row for path in FILES for row in _rows(path)]
    deliberate = [row for row in rows if isinstance(row, dict) and "deliberate" in row]
    assert (int(match[1]), int(match[2])) == (len(rows), len(deliberate))
