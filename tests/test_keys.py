"""Budget keys: the domain test, parsing, spelling, validation, budget values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cozyrender.keys import (
    ALL_CLASSES_KEY,
    MAX_WHOLE,
    BudgetKey,
    BudgetValueTooLarge,
    InvalidBudgetKey,
    InvalidBudgetValue,
    declared_in_budget_domain,
    in_budget_domain,
    parse_budget_key,
    parse_budget_value,
    quota_key_problem,
    spell_budget_key,
)


@pytest.mark.parametrize(
    "key",
    [
        "gpuclass.cozystack.io/devices",
        "a100.gpuclass.cozystack.io/devices",
        "requests.a100.gpuclass.cozystack.io/devices",
        "limits.gpuclass.cozystack.io/devices",
        "x.y.gpuclass.cozystack.io/memory",
        "A100.GPUCLASS.Cozystack.IO/devices",
    ],
)
def test_in_domain(key):
    assert in_budget_domain(key)


@pytest.mark.parametrize(
    "key",
    [
        "nvidia.com/gpu",
        "requests.nvidia.com/gpu",
        "evilgpuclass.cozystack.io/devices",
        "gpuclass.cozystack.io.example.com/devices",
        "gpuclass.cozystack.io",
        "cpu",
        "devices/gpuclass.cozystack.io",
    ],
)
def test_outside_domain(key):
    assert not in_budget_domain(key)


def test_parse_and_spell_round_trip():
    assert parse_budget_key(ALL_CLASSES_KEY) == BudgetKey(None)
    assert parse_budget_key("a100.gpuclass.cozystack.io/devices") == BudgetKey("a100")
    assert spell_budget_key("a100") == "a100.gpuclass.cozystack.io/devices"
    assert spell_budget_key(None) == ALL_CLASSES_KEY
    assert BudgetKey(None).covers("h100") and BudgetKey("a100").covers("a100")
    assert not BudgetKey("a100").covers("h100")


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("A100.gpuclass.cozystack.io/devices", "lower case"),
        ("a100.gpuclass.cozystack.io/memory", "'devices', not 'memory'"),
        ("x.y.gpuclass.cozystack.io/devices", "one class label"),
        ("requests.gpuclass.cozystack.io/devices", "'requests.' prefix"),
        ("limits.a100.gpuclass.cozystack.io/devices", "'limits.' prefix"),
        ("-a.gpuclass.cozystack.io/devices", "DNS-1123"),
        ("a_b.gpuclass.cozystack.io/devices", "DNS-1123"),
        ("a" * 64 + ".gpuclass.cozystack.io/devices", "longer than 63"),
        ("evilgpuclass.cozystack.io/devices", "not in the"),
    ],
)
def test_malformed_keys_have_precise_reasons(key, reason):
    with pytest.raises(InvalidBudgetKey) as err:
        parse_budget_key(key)
    assert reason in err.value.reason


def test_quota_key_problem_accepts_one_flattening_prefix():
    assert quota_key_problem("requests.a100.gpuclass.cozystack.io/devices") is None
    assert quota_key_problem("limits.gpuclass.cozystack.io/devices") is None
    assert quota_key_problem("requests.requests.gpuclass.cozystack.io/devices") is not None
    assert quota_key_problem("x.y.gpuclass.cozystack.io/memory") is not None


@pytest.mark.parametrize(("value", "expected"), [(2, 2), ("2", 2), (0, 0), ("0", 0)])
def test_budget_values(value, expected):
    assert parse_budget_value(value) == expected


@pytest.mark.parametrize("value", [1.5, "1.5", "500m", -1, "-1", "2Gi", True, None, "", "1e3"])
def test_bad_budget_values(value):
    with pytest.raises(InvalidBudgetValue):
        parse_budget_value(value)


labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@given(labels)
def test_every_class_key_parses_back(gpu_class):
    key = spell_budget_key(gpu_class)
    assert in_budget_domain(key)
    assert parse_budget_key(key).gpu_class == gpu_class


@given(st.text(max_size=40))
def test_domain_test_is_case_insensitive(key):
    assert in_budget_domain(key) == in_budget_domain(key.upper()) == in_budget_domain(key.lower())


@pytest.mark.parametrize("key", ["gpuclass.cozystack.io", "a100.gpuclass.cozystack.io", "A100.GPUCLASS.cozystack.io"])
def test_a_declared_key_without_a_slash_is_in_the_budget_domain_and_malformed(key):
    # issue 11 item 10: malformed budget keys, not ordinary ones; quota and resource names keep
    # `in_budget_domain`, where a name without '/' is a plain resource name (the CRD agrees)
    assert declared_in_budget_domain(key) and not in_budget_domain(key)
    with pytest.raises(InvalidBudgetKey, match="after '/'|lower case"):
        parse_budget_key(key)


@given(st.text(max_size=40))
def test_declared_domain_extends_the_quota_domain_only_to_keys_without_a_slash(key):
    if "/" in key or in_budget_domain(key):
        assert declared_in_budget_domain(key) == in_budget_domain(key)


@pytest.mark.parametrize("value", ["9" * 5000, 10**4000, str(MAX_WHOLE + 1), MAX_WHOLE + 1, "0" * 30 + "1" + "0" * 19])
def test_budget_values_past_the_bound_are_too_large_and_never_converted_whole(value):
    with pytest.raises(BudgetValueTooLarge) as err:
        parse_budget_value(value)
    assert len(str(err.value)) < 120  # a hostile number is not echoed in full


def test_the_bound_itself_and_leading_zeros_are_fine():
    assert parse_budget_value(str(MAX_WHOLE)) == MAX_WHOLE
    assert parse_budget_value("0" * 40 + "7") == 7
