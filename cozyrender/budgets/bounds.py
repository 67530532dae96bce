"""Bounds on the numbers the budget rules read: every count, replica number,
budget and quantity is checked on read, and one past its bound is bad input
naming the field, never a traceback and never a cost that grows with the
number's size.

Why: tenants write their own Tenants, workloads and pods, and one hostile
value (`1e9999999`, thousands of digits) in a state must not stall the
check for everyone. Quantity text is checked before it is parsed (its
length, its exponent), so `kube.quantity` only ever sees short text with a
small exponent; its value is then bounded like every whole number here.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from cozyrender.keys import MAX_WHOLE
from cozyrender.kube.shape import ShapeError, got, quantity

# Longer than any quantity the API server writes ("9223372036854775807m" is 20).
MAX_QUANTITY_TEXT = 64
# 10**64 is past every bound here; anything further out is not a quantity of ours.
MAX_EXPONENT = 64
# int32, as Kubernetes stores replica numbers; device counts share it.
MAX_COUNT = 2**31 - 1

_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)\Z")


TOO_LARGE = f"is too large (at or past {MAX_WHOLE}, where Kubernetes caps a quantity)"


def past_bound(parsed: Fraction) -> bool:
    """Whether a parsed quantity is out of range. Kubernetes caps a
    binary-suffix quantity past int64 at exactly MAX_WHOLE (`9999Ei` reads as
    9223372036854775807), so a value at the cap stands for a number too large
    to hold: bad input, like one past it."""
    return abs(parsed) >= MAX_WHOLE


def quantity_text_problem(value: object) -> str | None:
    """Why `value` is too large to parse as a quantity, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if -MAX_WHOLE <= value <= MAX_WHOLE else "is too large"
    if isinstance(value, float):
        return None if not math.isfinite(value) or abs(value) <= MAX_WHOLE else "is too large"
    if isinstance(value, str):
        if len(value) > MAX_QUANTITY_TEXT:
            return f"is too long for a quantity ({len(value)} characters, at most {MAX_QUANTITY_TEXT})"
        exponent = _EXPONENT.search(value.strip())
        if exponent is not None and abs(int(exponent[1])) > MAX_EXPONENT:
            return f"has an exponent out of range (got {value.strip()!r}, at most e{MAX_EXPONENT})"
    return None


def bounded_quantity(value: object, owner: Mapping, path: str) -> Fraction:
    """A usage figure (a pod's resources, a quota's `status.used`) read from
    `owner` at `path`, bounded: ShapeError naming the field when it is not a
    quantity, its size is out of range, or it is negative. Kubernetes stores
    none below zero, and one would lower its pool's usage: a pod limiting
    `cpu: -100` made room for 100 CPUs of carve-outs."""
    problem = quantity_text_problem(value)
    if problem is not None:
        raise ShapeError.at(owner, path, problem)
    parsed = quantity(value, owner, path)
    if past_bound(parsed):
        raise ShapeError.at(owner, path, TOO_LARGE)
    if parsed < 0:
        raise ShapeError.at(owner, path, f"is negative (got {got(value)}); usage is zero or more")
    return parsed


def check_resources(values: Mapping, owner: Mapping, path: str) -> None:
    """Every value of a resources map (`limits`, `requests`, `overhead`)
    a quantity within bounds; ShapeError naming the first that is not."""
    for name, value in values.items():
        bounded_quantity(value, owner, f"{path}.{name}")
