"""The Kubernetes CEL quantity library registered in cel-expr-python."""

from __future__ import annotations

import pytest

from cozyrender.gpuclass.kubecel import CompiledRule, RuleCompileError, RuleEvaluationError


@pytest.mark.parametrize("rule", [
    "isQuantity('40Gi') && isQuantity('500m') && isQuantity('1e3') && !isQuantity('4 Gi')",
    "quantity('1Gi').isGreaterThan(quantity('1000Mi'))",
    "quantity('999m').isLessThan(quantity('1'))",
    "quantity('1k').compareTo(quantity('1000')) == 0",
    # sign is a global function in Kubernetes' quantity library (not a member)
    "sign(quantity('-2')) == -1 && sign(quantity('0')) == 0 && sign(quantity('3m')) == 1",
    "quantity('200M') == quantity('0.2G') && quantity('1Ki') != quantity('1k')",  # == compares values
    "quantity('1n').sub(quantity('1n')) == quantity('0') && quantity('1m').add(quantity('1n')).compareTo(quantity('1000001n')) == 0",
    "!isQuantity(' 1') && !isQuantity('1 ') && isQuantity('.') && quantity('3.001n') == quantity('4n')",
    "quantity('9Ei') == quantity('9223372036854775807') && quantity('50.703k').asApproximateFloat() == 50703.0",
    "'abc'.indexOf('c', 5) == -1 && 'abc'.lastIndexOf('a', 5) == -1 && ['a', 'b'].join('-') == 'a-b'",
    "quantity('2Ki').asInteger() == 2048 && quantity('1.5').isInteger() == false",
    "quantity('1.5').add(quantity('500m')).compareTo(quantity('2')) == 0",
    "quantity('3').sub(1).compareTo(quantity('2')) == 0",
    "'nvidia.com/gpu'.indexOf('/') == 10 && 'ABC'.lowerAscii() == 'abc'",  # strings extension
])
def test_library_functions(rule):
    assert CompiledRule(rule).holds(None)


@pytest.mark.parametrize("rule", [
    "quantity('1').sign() == 1",   # the API server: found no matching overload for 'sign'
    "'abc'.reverse() == 'cba'",    # strings extension v3, Kubernetes 1.35 registers v2
    "isQuantity(1)",
])
def test_what_the_api_server_refuses_does_not_compile(rule):
    with pytest.raises(RuleCompileError):
        CompiledRule(rule)


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
