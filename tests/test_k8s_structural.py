"""apiextensions-apiserver's pruning and defaulting tables, run against
cozyrender.gpuclass.structural."""

from __future__ import annotations

import copy

import pytest

from cozyrender.gpuclass.structural import apply_defaults, prune, prune_resource, prune_value
from tests.k8s_tables import load

PRUNE_ROWS = load("apiextensions_pruning.yaml")["rows"]
DEFAULT_ROWS = load("apiextensions_defaulting.yaml")["rows"]


@pytest.mark.parametrize("row", PRUNE_ROWS, ids=lambda r: r["name"])
def test_prune(row):
    if row["resourceRoot"]:
        result, pruned = prune_resource(row["object"], row["schema"] or {})
    else:
        pruned = []
        result = prune_value(copy.deepcopy(row["object"]), row["schema"], pruned)
        pruned.sort()
    assert result == row["expected"]
    assert pruned == sorted(row["pruned"])


@pytest.mark.parametrize("row", DEFAULT_ROWS, ids=lambda r: r["name"])
def test_default(row):
    assert apply_defaults(copy.deepcopy(row["object"]), row["schema"]) == row["expected"]


def test_end_to_end_prune_reduces_metadata_at_the_root_and_embedded_resources():
    """Beyond the pruning table: the API server also decodes metadata as
    ObjectMeta (objectmeta.Coerce) at the root and at each embedded resource."""
    row = next(r for r in PRUNE_ROWS if r["resourceRoot"])
    result, pruned = prune(row["object"], row["schema"] or {})
    assert "unspecified" not in result["metadata"]
    assert "metadata.unspecified" in pruned
    for value in result.values():
        if isinstance(value, dict) and isinstance(value.get("metadata"), dict):
            assert "unspecified" not in value["metadata"]
