"""Quantity parsing and the readable spellings used in messages."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cozyrender.kube.quantity import format_binary_quantity, format_quantity, parse_quantity


@pytest.mark.parametrize("value,text", [
    (10 * 2**30, "10Gi"),
    (6465 * 2**20, "6465Mi"),
    (1536 * 2**20, "1536Mi"),
    (2**10, "1Ki"),
    (3 * 2**60, "3Ei"),
    (-2 * 2**30, "-2Gi"),
    (0, "0"),
    (1000, "1000"),  # not a multiple of 1Ki: plain
    (10**9, "1000000000"),
    (Fraction(1, 2), "500m"),
    (Fraction(1, 3), "1/3"),
])
def test_format_binary_quantity(value, text):
    assert format_binary_quantity(Fraction(value)) == text


def test_format_quantity_is_unchanged():
    assert format_quantity(Fraction(10 * 2**30)) == "10737418240"
    assert format_quantity(Fraction(1, 2)) == "500m"


@given(st.integers(-(2**70), 2**70) | st.fractions(max_denominator=1000))
def test_format_binary_quantity_round_trips(value):
    text = format_binary_quantity(Fraction(value))
    if "/" not in text:
        assert parse_quantity(text) == value
