"""The Kubernetes CEL quantity library registered in cel-expr-python."""

from __future__ import annotations

import pytest

from cozyrender.gpuclass.kubecel import CompiledRule, RuleCompileError, RuleEvaluationError


@pytest.mark.parametrize("rule", [
    "isQuantity('40Gi') && isQuantity('500m') && isQuantity('1e3') && !isQuantity('4 Gi')",
    "quantity('1Gi').isGreaterThan(quantity('1000Mi'))",
    "quantity('999m').isLessThan(quantity('1'))",
    "quantity('1k').compareTo(quantity('1000')) == 0",
    "quantity('-2').sign() == -1 && quantity('0').sign() == 0 && quantity('3m').sign() == 1",
    "quantity('2Ki').asInteger() == 2048 && quantity('1.5').isInteger() == false",
    "quantity('1.5').add(quantity('500m')).compareTo(quantity('2')) == 0",
    "quantity('3').sub(1).compareTo(quantity('2')) == 0",
    "'nvidia.com/gpu'.indexOf('/') == 10 && 'ABC'.lowerAscii() == 'abc'",  # strings extension
])
def test_library_functions(rule):
    assert CompiledRule(rule).holds(None)


def test_a_quantity_is_typed_not_a_string():
    with pytest.raises(RuleCompileError):
        CompiledRule("quantity('1') == '1'")


def test_run_time_failures_raise_never_admit():
    with pytest.raises(RuleEvaluationError):
        CompiledRule("quantity(self) == quantity('1')").holds("one")
    with pytest.raises(RuleEvaluationError):
        CompiledRule("quantity('1.5').asInteger() == 1").holds(None)
    with pytest.raises(RuleEvaluationError):
        CompiledRule("self.missing == 1").holds({})


def test_old_self_is_bound_only_when_given():
    rule = CompiledRule("self == oldSelf")
    assert rule.holds("a", "a") and not rule.holds("a", "b")
    with pytest.raises(RuleEvaluationError):
        rule.holds("a")
