"""Kubernetes' own tables for effective pod resources (component-helpers
resource/helpers_test.go) and toleration matching (k8s.io/api
core/v1/toleration_test.go, component-helpers scheduling/corev1/helpers_test.go),
run against cozyrender.kube.pods and cozyrender.kube.nodes."""

from __future__ import annotations

import pytest

from cozyrender.kube.nodes import tolerated, tolerates
from cozyrender.kube.pods import effective_pod_resources
from cozyrender.kube.quantity import parse_quantity
from tests.k8s_tables import load

RESOURCE_ROWS = load("component_helpers_resource.yaml")["rows"]
TOLERATION_ROWS = load("api_toleration.yaml")["rows"]
TAINT_ROWS = load("component_helpers_taints.yaml")["rows"]


@pytest.mark.parametrize("row", RESOURCE_ROWS, ids=lambda r: f"{r['test']}:{r['side']}:{r['name']}")
def test_pod_resources(row):
    got = effective_pod_resources(row["pod"], row["side"])
    expected = row["cozyrender"] if "deliberate" in row else row["expected"]
    assert got == {name: parse_quantity(value) for name, value in expected.items()}
    if "deliberate" in row:  # the row does differ from the upstream answer
        assert got != {name: parse_quantity(value) for name, value in row["expected"].items()}


@pytest.mark.parametrize("row", TOLERATION_ROWS, ids=lambda r: r["description"][:70])
def test_toleration_tolerates_taint(row):
    assert tolerates(row["toleration"], row["taint"]) is row["tolerated"]


def _applies(taint: dict, which: str) -> bool:
    return {"all": True, "none": False}.get(which, taint.get("effect") == which)


@pytest.mark.parametrize("row", TAINT_ROWS, ids=lambda r: r["description"][:70])
def test_find_matching_untolerated_taint(row):
    applying = [taint for taint in row["taints"] if _applies(taint, row["filter"])]
    assert all(tolerated(taint, row["tolerations"]) for taint in applying) is row["tolerated"]
