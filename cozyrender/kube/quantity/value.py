"""The quantity value: a coefficient and a power of ten, with Kubernetes'
comparison, arithmetic and canonical spelling, and bounded cost whatever
the exponent (see the package docstring). Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
# Significant decimal digits cozyrender holds exactly (Python's own int()
# refuses more than 4300 by default, to bound the conversion's cost).
MAX_DIGITS = 4096
NANO = -9

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_NAMES = {exp: name for name, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_NAMES = {exp: name for name, exp in _BINARY_SUFFIXES.items()}


class InvalidQuantity(ValueError):
    """Not a Kubernetes quantity (the message is Kubernetes' own where it has one)."""


class QuantityTooLarge(InvalidQuantity):
    """A quantity Kubernetes accepts but whose exact value needs more than
    MAX_DIGITS digits; cozyrender refuses it rather than spend time and
    memory in proportion to its exponent."""


@dataclass(frozen=True)
class Quantity:
    """value = coefficient * 10**exponent, exactly.

    `small` says Kubernetes holds the value as its int64Amount (the fast
    path: a coefficient within int64), not as an inf.Dec; its `AsInt64`
    answers from that representation. `format` is the one Kubernetes keeps
    for writing the value back."""

    coefficient: int
    exponent: int
    format: str = DECIMAL_SI
    small: bool = True

    # -- reading ---------------------------------------------------------
    def sign(self) -> int:
        return (self.coefficient > 0) - (self.coefficient < 0)

    def _magnitude_digits(self) -> int:
        """Decimal digits of |value| left of the point (an upper bound's
        exponent), computed without expanding the value."""
        return len(str(abs(self.coefficient))) + self.exponent

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1, as Quantity.Cmp; never expands a large exponent."""
        a, b = self.sign(), other.sign()
        if a != b or a == 0:
            return (a > b) - (a < b)
        da, db = self._magnitude_digits(), other._magnitude_digits()
        if da != db:
            bigger = (da > db) - (da < db)
            return bigger if a > 0 else -bigger
        # Same order of magnitude: the exponents differ by at most the
        # coefficients' digit counts, so aligning them is cheap.
        low = min(self.exponent, other.exponent)
        x = self.coefficient * 10 ** (self.exponent - low)
        y = other.coefficient * 10 ** (other.exponent - low)
        return (x > y) - (x < y)

    def __eq__(self, other: object) -> bool:  # by value, as Quantity.Equal
        return isinstance(other, Quantity) and self.cmp(other) == 0

    def __hash__(self) -> int:
        return hash(self.normalized())

    def __lt__(self, other: Quantity) -> bool:
        return self.cmp(other) < 0

    def normalized(self) -> tuple[int, int]:
        """(coefficient, exponent) with no trailing zeros: one pair per value."""
        if self.coefficient == 0:
            return 0, 0
        digits = str(abs(self.coefficient))
        stripped = digits.rstrip("0")
        zeros = len(digits) - len(stripped)
        return self.sign() * int(stripped), self.exponent + zeros

    def to_fraction(self) -> Fraction:
        """The exact value; QuantityTooLarge beyond 10**MAX_DIGITS."""
        if self.coefficient == 0:
            return Fraction(0)
        coefficient, exponent = self.normalized()
        if len(str(abs(coefficient))) + exponent > MAX_DIGITS:
            raise QuantityTooLarge(f"{self.canonical()!r} is too large to handle exactly "
                                   f"(more than {MAX_DIGITS} digits)")
        if exponent >= 0:
            return Fraction(coefficient * 10**exponent)
        return Fraction(coefficient, 10**-exponent)

    def as_int64(self) -> tuple[int, bool]:
        """Kubernetes' AsInt64: from its int64 representation only, so a
        value held as inf.Dec, or with a fractional scale (`1.0`, `1000m`),
        says no even when it is a whole number."""
        if not self.small:
            return 0, False
        if self.exponent == 0:
            return self.coefficient, True
        if self.exponent < 0:
            return 0, False
        if self.coefficient == 0:
            return 0, True
        if self.exponent > 18:
            return 0, False
        value = self.coefficient * 10**self.exponent
        return (value, True) if INT64_MIN <= value <= INT64_MAX else (0, False)

    def approximate_float(self) -> float:
        """AsApproximateFloat64: the nearest double, ±inf beyond its range."""
        coefficient, exponent = self.normalized()
        if coefficient == 0:
            return 0.0
        if len(str(abs(coefficient))) + exponent > 400:
            return float("inf") if coefficient > 0 else float("-inf")
        if len(str(abs(coefficient))) + exponent < -400:
            return 0.0
        return float(Fraction(coefficient) * Fraction(10) ** exponent)

    # -- arithmetic ----------------------------------------------------------
    def add(self, other: Quantity) -> Quantity:
        """Quantity.Add: exact. While both are held as int64 and the sum
        fits, the result is too (int64Amount.Add, at the smaller exponent);
        otherwise an inf.Dec. QuantityTooLarge when the exact sum needs more
        than MAX_DIGITS digits (Kubernetes would build it)."""
        fmt = other.format if self.coefficient == 0 else self.format
        if self.small and other.small:
            if other.coefficient == 0:
                return Quantity(self.coefficient, self.exponent, fmt, True)
            if self.coefficient == 0:
                return Quantity(other.coefficient, other.exponent, fmt, True)
        low = min(self.exponent, other.exponent)
        high = max(self._magnitude_digits(), other._magnitude_digits())
        if high - low > MAX_DIGITS + 1:
            raise QuantityTooLarge(f"the sum of {self.canonical()!r} and {other.canonical()!r} "
                                   f"needs more than {MAX_DIGITS} digits")
        total = self.coefficient * 10 ** (self.exponent - low) + other.coefficient * 10 ** (other.exponent - low)
        small = (self.small and other.small and INT64_MIN <= total <= INT64_MAX
                 and _scaled_fits(self, low) and _scaled_fits(other, low))
        return Quantity(total, low, fmt, small)

    def neg(self) -> Quantity:
        return Quantity(-self.coefficient, self.exponent, self.format, self.small)

    def sub(self, other: Quantity) -> Quantity:
        return self.add(other.neg())

    # -- writing ------------------------------------------------------------
    def canonical(self) -> str:
        """The string Kubernetes writes (Quantity.String), which always
        parses back to the same value. One deliberate difference: where
        Kubernetes has no suffix for the exponent (a decimal value of 1e21
        and up, or a binary one of 1024Ei and up) it drops the exponent and
        writes a wrong number; cozyrender writes the exponent form (`1e21`). And
        a binary value beyond the int64 maximum (a sum: `8Ei` plus `8Ei`) is
        written in decimal, since its binary spelling would read back capped."""
        if self.coefficient == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI:
            coefficient, exponent = self.normalized()
            if self.cmp(Quantity(1024, 0)) < 0 and self.cmp(Quantity(-1024, 0)) > 0 or exponent < 0:
                fmt = DECIMAL_SI  # small, or not whole: decimal, nothing rounded
            elif self.cmp(_INT64_MAX_Q) > 0 or self.cmp(_INT64_MAX_Q.neg()) < 0:
                fmt = DECIMAL_SI  # a binary spelling would read back capped at int64's maximum
            elif exponent <= MAX_DIGITS:
                number, power = coefficient * 10**exponent, 0
                while number % 1024 == 0:
                    number //= 1024
                    power += 10
                if power == 0:
                    return str(number)
                if power in _BINARY_NAMES:
                    return f"{number}{_BINARY_NAMES[power]}"
                fmt = DECIMAL_EXPONENT  # beyond Ei: Kubernetes would drop the exponent
            else:
                fmt = DECIMAL_EXPONENT
        coefficient, exponent = self.normalized()
        while exponent % 3:
            coefficient *= 10
            exponent -= 1
        if fmt == DECIMAL_SI and exponent in _DECIMAL_NAMES:
            return f"{coefficient}{_DECIMAL_NAMES[exponent]}"
        return f"{coefficient}e{exponent}" if exponent else str(coefficient)

    def __str__(self) -> str:
        return self.canonical()


def _scaled_fits(q: Quantity, low: int) -> bool:
    shift = q.exponent - low
    return shift <= 18 and INT64_MIN <= q.coefficient * 10**shift <= INT64_MAX


ZERO = Quantity(0, 0)
_ONE = Quantity(1, 0)
_INT64_MAX_Q = Quantity(INT64_MAX, 0)


def from_int(value: int) -> Quantity:
    """resource.NewQuantity(value, DecimalExponent), as CEL's `add(int)` uses."""
    return Quantity(value, 0, DECIMAL_EXPONENT, INT64_MIN <= value <= INT64_MAX)
