"""apimachinery's own quantity tables (tests/data/k8s/apimachinery_quantity.yaml),
run against cozyrender.kube.quantity."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cozyrender.kube.quantity import InvalidQuantity, Quantity, decoded, parse, split
from tests.k8s_tables import fraction, load

TABLES = load("apimachinery_quantity.yaml")


def _quantity(value: Fraction, fmt: str) -> Quantity:
    """A quantity holding `value` (whose denominator is a power of ten)."""
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    return Quantity(value.numerator, exponent, fmt)


@pytest.mark.parametrize("row", TABLES["valid"], ids=lambda r: r["input"])
def test_parse(row):
    expected = fraction(row["value"])
    for sign, factor in (("", 1), ("-", -1), ("+", 1)):
        got = parse(sign + row["input"])
        assert got.to_fraction() == factor * expected
        assert got.format == row["format"]


@pytest.mark.parametrize("text", TABLES["invalid"])
def test_parse_refuses(text):
    with pytest.raises(InvalidQuantity):
        parse(text)


def test_parse_refuses_empty():
    with pytest.raises(InvalidQuantity):
        parse("")


@pytest.mark.parametrize("row", TABLES["split"], ids=lambda r: r["input"])
def test_split(row):
    assert split(row["input"]) == (row["positive"], row["value"], row["num"], row["denom"], row["suffix"])


@pytest.mark.parametrize("row", TABLES["string"], ids=lambda r: f"{r['value']}-{r['format']}")
def test_string(row):
    value = fraction(row["value"])
    assert _quantity(value, row["format"]).canonical() == row["expect"]
    if value:
        assert _quantity(-value, row["format"]).canonical() == "-" + row["expect"]
    assert parse(row["expect"]).canonical() == row["expect"]
    if row["alternate"]:
        assert parse(row["alternate"]).canonical() == row["expect"]


@pytest.mark.parametrize("row", TABLES["emit"], ids=lambda r: r["input"])
def test_parse_emit(row):
    assert parse(row["input"]).canonical() == row["expect"]
    assert parse("-" + row["input"]).canonical() == "-" + row["expect"]


@pytest.mark.parametrize("row", TABLES["cmp"], ids=lambda r: f"{r['x']}-{r['y']}")
def test_cmp(row):
    assert parse(row["x"]).cmp(parse(row["y"])) == row["expect"]


@pytest.mark.parametrize("row", TABLES["whitespace"], ids=lambda r: r["json"])
def test_json_whitespace(row):
    text = row["json"].strip(" ")
    value = text[1:-1] if text.startswith('"') else row["json"]
    assert decoded(value).canonical() == row["expect"]
    if value != value.strip():
        with pytest.raises(InvalidQuantity):
            parse(value)


@pytest.mark.parametrize("row", TABLES["arithmetic"], ids=lambda r: f"{r['op']}-{r['a']['value']}-{r['b']['value']}")
def test_arithmetic(row):
    a = _quantity(fraction(row["a"]["value"]), row["a"]["format"])
    b = _quantity(fraction(row["b"]["value"]), row["b"]["format"])
    result = a.add(b) if row["op"] == "add" else a.sub(b)
    assert result.to_fraction() == fraction(row["expected"])
