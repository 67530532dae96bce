"""The Kubernetes CEL quantity library registered in cel-expr-python."""

from __future__ import annotations

import pytest

from cozyrender.kube.cel.environment import CompiledRule, RuleCompileError, RuleEvaluationError


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


# -- self typed from the schema, as the API server types it ------------------------------

from cozyrender.kube.cel.environment import type_check  # noqa: E402
from cozyrender.kube.cel.types import decl_type, escape  # noqa: E402

_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "replicas": {"type": "integer"},
                "ratio": {"type": "number"},
                "enabled": {"type": "boolean"},
                "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
                "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                "created": {"type": "string", "format": "date-time"},
                "timeout": {"type": "string", "format": "duration"},
                "blob": {"type": "string", "format": "byte"},
                "x-dashed": {"type": "string"},
                "namespace": {"type": "string"},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object", "properties": {"image": {"type": "string"}}}}},
            },
        },
    },
}


@pytest.mark.parametrize("rule", [
    "self.spec.replicas > 0 && self.spec.ratio < 1.5 && self.spec.enabled",
    "type(self.spec.size) == int ? self.spec.size > 0 : self.spec.size.endsWith('%')",  # int-or-string is dyn
    "self.spec.labels.all(k, self.spec.labels[k].size() < 64)",
    "self.spec.ports.all(p, p.port > 0 && p.port < 65536)",
    "self.spec.matrix.size() < 3",
    "self.spec.created < timestamp('2030-01-01T00:00:00Z') && self.spec.timeout < duration('1h')",
    "size(self.spec.blob) < 1024",
    "self.spec.x__dash__dashed != '' && self.spec.__namespace__ != ''",  # escaped property names
    "self.spec.template.kind == 'Pod' && self.spec.template.metadata.name != '' && self.spec.template.spec.image != ''",
    "self.metadata.name != '' && self.apiVersion != '' && self.kind != ''",  # the resource root
    "self.spec.?replicas.orValue(1) > 0",  # optional types
])
def test_typed_rules_compile(rule):
    type_check(rule, _SCHEMA, resource_root=True)


@pytest.mark.parametrize("rule,reason", [
    ("self.spec.unknown == 1", "undefined field"),  # preserve-unknown-fields does not type unknown fields
    ("self.spec.replicas == 'one'", "no matching overload"),
    ("self.spec.labels['a'] > 1", "no matching overload"),
    ("self.spec.ports[0].port.startsWith('8')", "no matching overload"),
    ("self.spec.created == 'yesterday'", "no matching overload"),
    ("self.metadata.labels['a'] == 'b'", "undefined field"),  # root metadata: name and generateName only
    ("self.spec.template.metadata.namespace == 'x'", "undefined field"),
    ("self.spec.replicas", "must evaluate to a bool"),
])
def test_typed_rules_the_api_server_refuses(rule, reason):
    with pytest.raises(RuleCompileError, match=reason):
        type_check(rule, _SCHEMA, resource_root=True)


def test_property_names_are_escaped_as_the_api_server_escapes_them():
    assert escape("foo-bar") == "foo__dash__bar"
    assert escape("a.b/c") == "a__dot__b__slash__c"
    assert escape("a__b") == "a__underscores__b"
    assert escape("namespace") == "__namespace__" and escape("if") == "__if__"
    assert escape("1abc") is None and escape("a b") is None and escape("") is None


def test_untyped_schema_nodes_are_not_accessible():
    assert decl_type({"description": "no type"}) is None
    assert decl_type({"type": "array"}) is None  # no items
    root = decl_type({"type": "object", "properties": {"free": {"x-kubernetes-preserve-unknown-fields": True}}},
                     resource_root=True)
    assert "free" not in dict(root.fields)


def test_property_names_whose_protobuf_spellings_collide_still_type():
    schema = {"type": "object", "properties": {
        "a_b": {"type": "object", "additionalProperties": {"type": "string"}},
        "aB": {"type": "object", "additionalProperties": {"type": "integer"}},
        "x-y": {"type": "object", "additionalProperties": {"type": "boolean"}},
    }}
    type_check("self.a_b['k'] == 'v' && self.aB['k'] == 1 && self.x__dash__y['k']", schema)
    with pytest.raises(RuleCompileError, match="no matching overload"):
        type_check("self.aB['k'] == 'v'", schema)


# -- Kubernetes' lists library ---------------------------------------------------------------

from cozyrender.kube.cel.environment import Expression  # noqa: E402


@pytest.mark.parametrize("expression,value", [
    ("[1, 2, 2, 3].isSorted()", True),
    ("['b', 'a'].isSorted()", False),
    ("[1.5, 0.5].isSorted()", False),
    ("[3, 1, 2].max()", 3),
    ("['b', 'c', 'a'].min()", "a"),
    ("[0.5, 2.5].max() + 1.0", 3.5),   # typed: max of list(double) is a double
    ("[1, 2, 3].sum() + 1", 7),        # typed: sum of list(int) is an int
    ("[1.5, 2.0].sum()", 3.5),
    ("[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && ['a'].indexOf('b') == -1", True),
    ("'abc'.indexOf('c') == 2 && ['abc'].indexOf('abc') == 0", True),  # strings and lists share the names
])
def test_lists_library(expression, value):
    assert Expression(expression).evaluate() == value


@pytest.mark.parametrize("expression", [
    "[true, false].sum()",      # bool is not summable
    "[[1]].isSorted()",         # lists are not comparable
    "[1].indexOf('a')",         # element and needle types differ
    "[1, 2].max() == 'a'",      # max of list(int) is an int
])
def test_lists_library_refuses_what_the_api_server_refuses(expression):
    with pytest.raises(RuleCompileError):
        Expression(expression)


@pytest.mark.parametrize("expression,error", [
    ("[].max()", "max called on empty list"),
    ("[9223372036854775807, 1].sum()", "integer overflow"),
])
def test_lists_library_run_time_errors(expression, error):
    with pytest.raises(RuleEvaluationError, match=error):
        Expression(expression).evaluate()


def test_lists_library_on_dyn_values():
    rule = CompiledRule("self.sum() == 6 && self.isSorted() && self.max() == 3")
    assert rule.holds([1, 2, 3]) and not rule.holds([3, 2, 1])


@pytest.mark.parametrize("expression,value", [
    ("sets.contains([1, 2, 3], [3, 1])", True),
    ("sets.contains([1, 2], [3])", False),
    ("sets.contains([1], [])", True),
    ("sets.equivalent([1, 1, 2], [2, 1])", True),
    ("sets.equivalent(['a'], ['a', 'b'])", False),
    ("sets.intersects(['a'], ['b', 'a'])", True),
    ("sets.intersects([true], [false])", False),
])
def test_sets_extension(expression, value):
    assert Expression(expression).evaluate() is value


def test_sets_extension_is_typed():
    with pytest.raises(RuleCompileError):
        Expression("sets.contains([1], ['a'])")


@pytest.mark.parametrize("expression,value", [
    ("isIP('10.0.0.1') && isIP('2001:db8::1') && isIP('::1.2.3.4')", True),
    ("isIP('010.0.0.1')", False),            # Go's netip: no leading zeros
    ("isIP('::ffff:10.0.0.1')", False),      # Kubernetes: no IPv4-mapped IPv6
    ("isIP('fe80::1%eth0')", False),         # Kubernetes: no zones
    ("isIP(' 10.0.0.1')", False),
    ("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:0db8::1')", True),
    ("ip('10.1.2.3').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()", True),
    ("isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/08') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')", True),
    ("!isCIDR('10.0.0.0/255.0.0.0') && !isCIDR('fe80::/10%eth0')", True),
    ("cidr('10.0.0.0/8').containsCIDR('10.0.0.0/8') && !cidr('10.0.0.0/16').containsCIDR('10.0.0.0/8')", True),
    ("!cidr('10.0.0.0/8').containsIP('::1')", True),  # families differ
])
def test_ip_and_cidr_parsing(expression, value):
    assert Expression(expression).evaluate() is value


@pytest.mark.parametrize("expression,value", [
    ("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))", True),   # SemVer's precedence example
    ("semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", True),
    ("semver('1.0.0-beta.2').isLessThan(semver('1.0.0-beta.11'))", True),
    ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True),
    ("semver('1.0.0+build.1') == semver('1.0.0+build.2')", True),          # build metadata ignored
    ("isSemver('1.0.0-01') || isSemver('1.0.0-') || isSemver('1.0.0+') || isSemver('1.0.0-a_b')", False),
    ("isSemver('1.2-beta', true)", False),                                   # short with a prerelease
    ("semver('1.10.0').compareTo(semver('1.9.0')) == 1 && quantity('10').compareTo(quantity('9')) == 1", True),
])
def test_semver_library(expression, value):
    assert Expression(expression).evaluate() is value


def test_semver_and_quantity_do_not_mix():
    with pytest.raises(RuleCompileError):
        Expression("semver('1.0.0').compareTo(quantity('1'))")


# -- the API server's compile-time validators ---------------------------------------------------

_PLAIN = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"},
                                           "d": {"x-kubernetes-int-or-string": True}}}


@pytest.mark.parametrize("rule,error", [
    ("self.s.matches('[')", "invalid matches argument"),
    ("matches('(', self.s)", "invalid matches argument"),      # cel-go checks the first argument
    ("duration('1x') > duration('1m')", "invalid duration argument"),
    ("timestamp('2020-13-01T00:00:00Z') < timestamp('2021-01-01T00:00:00Z')", "invalid timestamp argument"),
    ("self.n in [1, 'a']", "homogeneous"),
    ("{'a': 1, 'b': 'x'}.size() == 2", "homogeneous"),
    ("[self.n, self.d].size() == 2", "homogeneous"),           # int and dyn differ too
])
def test_validators_refuse_what_the_api_server_refuses(rule, error):
    with pytest.raises(RuleCompileError, match=error):
        type_check(rule, _PLAIN)


@pytest.mark.parametrize("rule", [
    "self.s.matches('^[a-z]+$') && matches(self.s, '(')",  # the pattern of the global form is not checked
    "duration('1h30m') > duration('1m') && timestamp('2020-01-01T00:00:00Z') < timestamp(1700000000)",
    "self.n in [1, 2, 3] && {'a': 1, 'b': 2}.size() == 2 && [[1], [2]].size() == 2",
    "'%s %s'.format([1, 'a']) != ''",                      # format calls are exempt
    "self.s.split(',').all(x, x.size() > 0)",
])
def test_validators_accept_what_the_api_server_accepts(rule):
    type_check(rule, _PLAIN)


@pytest.mark.parametrize("text", [
    "18446744073709551616.0.0",          # beyond uint64, as Go's ParseUint refuses
    "1.0.0-18446744073709551616",
    "1.0.0-" + "9" * 5000,               # never converted whole
])
def test_semver_numbers_beyond_uint64_are_refused(text):
    assert Expression(f"isSemver('{text}')").evaluate() is False


# -- formatted strings reach rules as the API server converts them ---------------------------

from cozyrender.kube.cel.environment import TypedScope  # noqa: E402


def _typed_rule(rule: str, schema: dict) -> CompiledRule:
    declaration = decl_type(schema)
    return CompiledRule(rule, TypedScope([declaration]), declaration)


def test_formatted_strings_are_converted_for_rules():
    schema = {"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "wait": {"type": "string", "format": "duration"},
        "blob": {"type": "string", "format": "byte"},
        "items": {"type": "array", "items": {"type": "string", "format": "duration"}},
    }}
    rule = _typed_rule(
        "self.at > timestamp('2020-01-01T00:00:00Z') && self.day == timestamp('2024-02-29T00:00:00Z')"
        " && self.wait == duration('90m') && self.blob == b'hi' && self.items.all(d, d < duration('1h'))",
        schema)
    value = {"at": "2024-05-01T10:00:00+02:00", "day": "2024-02-29", "wait": "1h30m", "blob": "aGk=",
             "items": ["30s", "2 minutes"]}
    assert rule.holds(value)
    assert not rule.holds({**value, "wait": "1h"})
    with pytest.raises(RuleEvaluationError):  # a string that does not read stays a string: the rule fails
        rule.holds({**value, "at": "yesterday"})
