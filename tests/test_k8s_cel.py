"""The API server's CEL quantity library table (apiserver pkg/cel/library/quantity_test.go)
and cel-go's strings extension tables (ext/strings_test.go at v0.26.0), run in
cozyrender.kube.cel.environment's environment."""

from __future__ import annotations

import re

import pytest

from cozyrender.kube.cel.environment import Expression, RuleCompileError, RuleEvaluationError, quantity_value
from cozyrender.kube.quantity import parse
from tests.k8s_tables import load

QUANTITY_ROWS = load("apiserver_cel_quantity.yaml")["rows"]
STRINGS = load("cel_go_strings.yaml")


@pytest.mark.parametrize("row", QUANTITY_ROWS, ids=lambda r: r["name"])
def test_quantity_library(row):
    if "compileError" in row:
        with pytest.raises(RuleCompileError) as caught:
            Expression(row["expr"])
        for pattern in row["compileError"]:
            assert re.search(pattern, str(caught.value))
        return
    expression = Expression(row["expr"])
    if "runtimeError" in row:
        with pytest.raises(RuleEvaluationError) as caught:
            expression.evaluate()
        assert re.search(row["runtimeError"], str(caught.value))
        return
    value = expression.evaluate()
    if "quantity" in row:
        assert parse(quantity_value(value)) == parse(row["quantity"])
    else:
        assert value == row["value"] and type(value) is type(row["value"])


@pytest.mark.parametrize("row", STRINGS["strings"], ids=lambda r: r["expr"][:60])
def test_strings_extension(row):
    if "deliberate" in row:
        with pytest.raises(RuleCompileError, match="undeclared reference to 'reverse'"):
            Expression(row["expr"])
        return
    if "error" not in row:
        assert Expression(row["expr"]).evaluate() is True
        return
    if row.get("parseOnly") or row["error"] == "no such overload":
        with pytest.raises((RuleCompileError, RuleEvaluationError)):
            Expression(row["expr"]).evaluate()
        return
    with pytest.raises(RuleEvaluationError) as caught:
        Expression(row["expr"]).evaluate()
    assert row["error"] in str(caught.value)


@pytest.mark.parametrize("row", STRINGS["versions"], ids=lambda r: f"v{r['version']}-{r['function']}")
def test_strings_version_2(row):
    if row["version"] <= 2:
        assert Expression(row["expr"]).evaluate() is True
    else:
        with pytest.raises(RuleCompileError, match="undeclared reference"):
            Expression(row["expr"])


NET = load("apiserver_cel_net.yaml")


@pytest.mark.parametrize("row", NET["ip"] + NET["cidr"], ids=lambda r: r["name"])
def test_ip_and_cidr_libraries(row):
    if "deliberate" in row:
        with pytest.raises(RuleCompileError, match="no matching overload for 'string'"):
            Expression(row["expr"])
        return
    if "compileErrors" in row:
        with pytest.raises(RuleCompileError) as caught:
            Expression(row["expr"])
        for pattern in row["compileErrors"]:
            assert re.search(pattern, str(caught.value))
        return
    expression = Expression(row["expr"])
    if "runtimeError" in row:
        with pytest.raises(RuleEvaluationError) as caught:
            expression.evaluate()
        message = str(caught.value).split(": ", 1)[1]  # cel-cpp's status code first
        expected = row["runtimeError"]
        if row.get("compare") == "prefix":
            head = expected[:expected.index("): ") + 1]
            assert message.startswith(head + ": ")
        else:
            assert message == expected
        return
    value = expression.evaluate()
    if "ip" in row:
        assert value.text == row["ip"]
    elif "cidr" in row:
        assert value.text == row["cidr"]
    else:
        assert value == row["value"] and type(value) is type(row["value"])


SEMVER_ROWS = load("apiserver_cel_semver.yaml")["rows"]


@pytest.mark.parametrize("row", SEMVER_ROWS, ids=lambda r: r["name"])
def test_semver_library(row):
    if "compileError" in row:
        with pytest.raises(RuleCompileError) as caught:
            Expression(row["expr"])
        for pattern in row["compileError"]:
            assert re.search(pattern, str(caught.value))
        return
    expression = Expression(row["expr"])
    if "runtimeError" in row:
        with pytest.raises(RuleEvaluationError) as caught:
            expression.evaluate()
        assert re.search(row["runtimeError"], str(caught.value))
        return
    value = expression.evaluate()
    if "semver" in row:
        assert value.text == row["semver"]
    else:
        assert value == row["value"] and type(value) is type(row["value"])
