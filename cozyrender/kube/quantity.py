"""Kubernetes resource quantities with exact arithmetic.

`parse_quantity("500m") == Fraction(1, 2)`; binary (Ki..Ei), decimal SI
(n, u, m, k, M..E) and exponent (`1e3`) forms, as the API server accepts them.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]+))?\Z"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}


class InvalidQuantity(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity given as a string or a YAML number; exact, never a float rounding."""
    if isinstance(value, bool) or value is None:
        raise InvalidQuantity(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        # YAML numbers such as 0.5 arrive as floats; their decimal spelling is what the user wrote.
        value = repr(value)
    if not isinstance(value, str):
        raise InvalidQuantity(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise InvalidQuantity(f"{value!r} is not a Kubernetes quantity")
    number = Fraction(match["number"])
    if match["sign"] == "-":
        number = -number
    if match["suffix"]:
        number *= _BINARY.get(match["suffix"]) or _DECIMAL[match["suffix"]]
    elif match["exponent"]:
        number *= Fraction(10) ** int(match["exponent"])
    return number


def is_quantity(value: object) -> bool:
    try:
        parse_quantity(value)
    except InvalidQuantity:
        return False
    return True


def format_quantity(value: Fraction) -> str:
    """A readable, exact spelling: whole numbers plainly, milli-units with `m`,
    anything finer as a decimal fraction."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{value.numerator}/{value.denominator}"


_BINARY_DESCENDING = sorted(_BINARY.items(), key=lambda item: -item[1])


def format_binary_quantity(value: Fraction) -> str:
    """A readable, exact spelling for byte quantities: a whole number of
    bytes that is a multiple of 1Ki is written with the largest binary
    suffix that divides it exactly (`10Gi`, `6465Mi`, `1536Mi`); any other
    value as `format_quantity` writes it. The result parses back to `value`."""
    if value.denominator == 1 and value.numerator != 0:
        for suffix, factor in _BINARY_DESCENDING:
            if value.numerator % factor == 0:
                return f"{value.numerator // factor}{suffix}"
    return format_quantity(value)
