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
    (Fraction(1, 3), "333333334n"),  # finer than 1n: rounded up as Kubernetes rounds, never "1/3"
    (Fraction(1, 10**6), "1u"),
    (Fraction(-3, 10**9), "-3n"),
])
def test_format_binary_quantity(value, text):
    assert format_binary_quantity(Fraction(value)) == text


def test_format_quantity_is_unchanged():
    assert format_quantity(Fraction(10 * 2**30)) == "10737418240"
    assert format_quantity(Fraction(1, 2)) == "500m"


@given(st.integers(-(2**70), 2**70) | st.fractions(max_denominator=1000))
def test_format_binary_quantity_always_parses(value):
    """Every spelling parses; exactly back to the value when the value is a
    whole number of nanounits, else to the value rounded up (away from zero)
    to the nanounit, as Kubernetes rounds."""
    value = Fraction(value)
    text = format_binary_quantity(value)
    back = parse_quantity(text)
    nanos = value * 10**9
    if nanos.denominator == 1:
        assert back == value
    else:
        assert abs(back) > abs(value) and abs(back) - abs(value) < Fraction(1, 10**9)
        assert (back > 0) == (value > 0)


# -- Kubernetes' reading, beyond its own tables ------------------------------------

from cozyrender.kube.quantity import (  # noqa: E402
    MAX_DIGITS, InvalidQuantity, QuantityTooLarge, decoded, is_quantity, parse,
)


@pytest.mark.parametrize("text,value", [
    ("3.001n", Fraction(4, 10**9)),       # rounded up to the nanounit
    ("-3.001n", Fraction(-4, 10**9)),     # away from zero
    ("9Ei", Fraction(2**63 - 1)),         # binary values capped at int64's maximum
    ("-9Ei", Fraction(-(2**63 - 1))),
    ("1000E", Fraction(10**21)),          # decimal values are not capped
    (".", Fraction(0)),
    ("k", Fraction(0)),                   # an empty number part reads as 0
    ("Ki", Fraction(0)),                  # (on Kubernetes' int64 fast path)
    ("1e4294967296", Fraction(1)),        # the exponent is truncated to 32 bits
    ("1e2147483648", Fraction(1, 10**9)),  # ... to -2**31, then rounded up to 1n
])
def test_kubernetes_reading(text, value):
    assert parse(text).to_fraction() == value


@pytest.mark.parametrize("text", [" 1", "1 ", "\t1", "1e99999999999999999999", "1e", "1.1.1", "--1", "1Ki1",
                                  "Pi", "Ei"])  # no digits on the general path: Kubernetes' numeric error
def test_parse_quantity_strict(text):
    assert not is_quantity(text)


def test_decoded_objects_are_trimmed_as_json_decoding_does():
    assert parse_quantity(" 2Gi\n") == 2 * 2**30
    assert parse_quantity(3) == 3 and parse_quantity(0.5) == Fraction(1, 2)
    with pytest.raises(InvalidQuantity):
        parse_quantity("\x1c1")  # Go's TrimSpace keeps \x1c (Python's strip would not)


def test_huge_exponents_are_held_not_expanded():
    q = parse("1e2000000000")
    assert q.canonical() == "100e1999999998"  # Kubernetes writes exponents in multiples of 3
    assert q.cmp(parse("9" * 100)) == 1 and parse("-1e2000000000").cmp(parse("1")) == -1
    assert parse("1e2000000000") == parse("10e1999999999")
    with pytest.raises(QuantityTooLarge):
        q.to_fraction()
    with pytest.raises(QuantityTooLarge):
        parse_quantity("1e2000000000")
    with pytest.raises(QuantityTooLarge):
        q.add(parse("1"))


def test_many_digits():
    with pytest.raises(QuantityTooLarge):
        parse("1" * (MAX_DIGITS + 1))
    assert parse("1" + "0" * 100_000).canonical() == "10e99999"
    assert parse("0." + "0" * 100_000 + "1").canonical() == "1n"   # rounded up, read as a string
    assert parse("1" * MAX_DIGITS).to_fraction() == int("1" * MAX_DIGITS)
    assert isinstance(QuantityTooLarge("x"), InvalidQuantity)


_QUANTITY_TEXT = st.from_regex(r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,25})?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,3})?\Z")


@given(_QUANTITY_TEXT)
def test_value_is_the_exact_number_rounded_up_to_the_nanounit(text):
    """An independent reading of the same text: the exact rational value,
    rounded away from zero to 1n, binary values capped at int64's maximum."""
    try:
        q = parse(text)
    except InvalidQuantity:
        # Only texts with no digit at all fail here: "" and, where Kubernetes takes its
        # general path (no int64 fast path), a bare "Pi"/"Ei"; "k", "Ki" and "+" read as 0.
        assert not any(c.isdigit() for c in text)
        return
    body = text.lstrip("+-")
    negative = text.startswith("-")
    number, suffix = body, ""
    for i, c in enumerate(body):
        if c not in "0123456789.":
            number, suffix = body[:i], body[i:]
            break
    exact = Fraction(number) if number.strip(".") else Fraction(0)
    decimal = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    if suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        exact *= 2 ** (10 * ("KMGTPE".index(suffix[0]) + 1))
    elif suffix in decimal:
        exact *= Fraction(10) ** decimal[suffix]
    elif suffix:
        exact *= Fraction(10) ** int(suffix[1:])
    nanos = exact * 10**9
    rounded = Fraction(-((-nanos.numerator) // nanos.denominator), 10**9)
    if suffix.endswith("i"):
        rounded = min(rounded, Fraction(2**63 - 1))
    assert q.to_fraction() == (-rounded if negative else rounded)
    assert parse(q.canonical()) == q          # the written form always parses back


@given(st.text(max_size=40))
def test_any_text_is_a_quantity_or_invalid(text):
    try:
        parse(text)
    except InvalidQuantity:
        pass
    try:
        decoded(text)
    except InvalidQuantity:
        pass


# -- invariants of the bounded representation ----------------------------------------------

from cozyrender.kube.quantity import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, Quantity  # noqa: E402

_COEFFICIENTS = st.integers(-(10**30), 10**30)
_FORMATS = st.sampled_from([DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT])


@given(_COEFFICIENTS, st.integers(-9, 40), _COEFFICIENTS, st.integers(-9, 40))
def test_cmp_and_add_agree_with_exact_fractions(a, ea, b, eb):
    x, y = Quantity(a, ea), Quantity(b, eb)
    fx, fy = Fraction(a) * Fraction(10) ** ea, Fraction(b) * Fraction(10) ** eb
    assert x.cmp(y) == (fx > fy) - (fx < fy)
    assert (x == y) == (fx == fy)
    assert x.add(y).to_fraction() == fx + fy
    assert x.sub(y).to_fraction() == fx - fy


@given(_COEFFICIENTS, st.integers(-9, 3 * 10**9), _FORMATS)
def test_canonical_form_parses_back_and_stays_small(coefficient, exponent, fmt):
    """Whatever the exponent, the written form is short (no expansion) and
    parses back to the same value (binary values beyond Kubernetes' cap are
    written in decimal, so they do too)."""
    q = Quantity(coefficient, exponent, fmt)
    text = q.canonical()
    assert len(text) <= max(len(str(coefficient)) + len(str(exponent)) + 8, 24)  # binary: <= int64 digits
    if exponent <= 2**31 - 1 - 40:  # exponents the 32-bit reading keeps
        assert parse(text) == q


@given(st.integers(1, 10**6), st.integers(10**4, 2**31 - 1))  # beyond, Kubernetes wraps to 32 bits
def test_an_attacker_s_exponent_costs_nothing(coefficient, exponent):
    text = f"{coefficient}e{exponent}"
    q = parse(text)
    assert q.cmp(parse("1e9999")) == 1
    assert len(q.canonical()) <= len(text) + 4
    with pytest.raises(QuantityTooLarge):
        q.to_fraction()
    with pytest.raises(QuantityTooLarge):
        q.add(parse("1"))
