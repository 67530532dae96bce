"""Readable spellings of exact values (messages, budgets) that always parse
back. Pure, no I/O."""

from __future__ import annotations

from fractions import Fraction

from cozyrender.kube.quantity.value import _BINARY_SUFFIXES, INT64_MAX

def format_quantity(value: Fraction) -> str:
    """A readable spelling of an exact value that parses back to it: whole
    numbers plainly, then the largest of `m`, `u`, `n` that is exact. A
    value finer than the nanounit (which no quantity holds) is rounded up
    to it, as Kubernetes rounds every quantity."""
    if value.denominator == 1:
        return str(value.numerator)
    for suffix, factor in (("m", 10**3), ("u", 10**6), ("n", 10**9)):
        scaled = value * factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    nanos = value * 10**9
    rounded = -((-abs(nanos)) // 1)  # ceil of the magnitude: away from zero
    return f"{rounded if value > 0 else -rounded}n"


_BINARY_DESCENDING = sorted(((name, 2**exp) for name, exp in _BINARY_SUFFIXES.items()), key=lambda item: -item[1])


def format_binary_quantity(value: Fraction) -> str:
    """A readable, exact spelling for byte quantities: a whole number of
    bytes that is a multiple of 1Ki is written with the largest binary
    suffix that divides it exactly (`10Gi`, `6465Mi`, `1536Mi`); any other
    value as `format_quantity` writes it. The result parses back to `value`
    (a value finer than the nanounit rounded up, as Kubernetes would). A
    value beyond the int64 maximum is written plainly: Kubernetes caps a
    binary-suffix value there."""
    if value.denominator == 1 and value.numerator != 0 and abs(value.numerator) <= INT64_MAX:
        for suffix, factor in _BINARY_DESCENDING:
            if value.numerator % factor == 0:
                return f"{value.numerator // factor}{suffix}"
    return format_quantity(value)
