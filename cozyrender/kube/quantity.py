"""Kubernetes resource quantities, as apimachinery's `resource.ParseQuantity`
(Kubernetes 1.35) reads and writes them. Pure functions, no I/O.

Rules (each one Kubernetes', learnt from `pkg/api/resource/quantity.go` and
`suffix.go`, and checked by its own test tables under tests/data/k8s/):

* Syntax: an optional sign, digits with at most one `.`, then a suffix: a
  binary one (Ki..Ei), a decimal SI one (n, u, m, "", k, M, G, T, P, E) or an
  exponent (`e3`, `E-3`, `e+5`). No whitespace anywhere: `" 1"` and `"1 "` are
  refused by ParseQuantity. `"."` and even a bare suffix (`"k"`) read as 0,
  as Kubernetes reads them (its number part may be empty).
* An exponent is read as a 64-bit integer and then truncated to 32 bits, as
  Kubernetes does (`int32(parsed)`): `1e4294967296` is 1. An exponent that does
  not fit 64 bits is a suffix error.
* A non-zero value is rounded up (away from zero) to the nanounit:
  `3.001n` is `4n`, `0.1n` is `1n`, so anyone who asks for some gets some.
* A binary-suffix value is capped at the int64 maximum (`9Ei` is
  9223372036854775807); a binary value below 1 is written as decimal SI.
* Errors are Kubernetes' three: the format, the numeric part, the suffix.

Hostile numbers cost nothing extra: a value is held as a coefficient and a
power of ten, never expanded, so `1e2000000000` is as cheap as `1e3`, and
comparison never expands either. Where Kubernetes would build a number with
as many digits as the exponent (its `inf.Dec`), cozyrender refuses instead
(`QuantityTooLarge`, an `InvalidQuantity`): a coefficient of more than
`MAX_DIGITS` significant digits, an exact sum that would need more, and a
`Fraction` of a value beyond 10**MAX_DIGITS. That is the one deliberate
difference; Kubernetes accepts those values and pays in time and memory.

Two entry points:

* `parse(text)` is ParseQuantity, strict (what CEL's `quantity()` and
  `isQuantity()` call).
* `parse_quantity(value)` reads a quantity from a decoded object (a pod's
  requests, a ResourceQuota's hard limits): the API server's JSON decoding
  trims surrounding whitespace first (`Quantity.UnmarshalJSON` calls
  `strings.TrimSpace`), and a YAML/JSON number is read from its decimal
  spelling. It returns the exact value as a `Fraction`.
"""

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

ERR_FORMAT = ("quantities must match the regular expression "
              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_NAMES = {exp: name for name, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_NAMES = {exp: name for name, exp in _BINARY_SUFFIXES.items()}
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip also
# strips \x1c-\x1f, which Go keeps).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


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


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise InvalidQuantity(ERR_FORMAT)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, or the suffix error."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if not body or any(c not in _DIGITS for c in body) or len(body.lstrip("0")) > 19:
            raise InvalidQuantity(ERR_SUFFIX)
        parsed = int(digits)
        if not INT64_MIN <= parsed <= INT64_MAX:
            raise InvalidQuantity(ERR_SUFFIX)
        exponent = (parsed + 2**31) % 2**32 - 2**31  # Go's int32(parsed)
        return 10, exponent, DECIMAL_EXPONENT
    raise InvalidQuantity(ERR_SUFFIX)


def parse(text: str) -> Quantity:
    """resource.ParseQuantity: strict, no surrounding whitespace."""
    if not isinstance(text, str):
        raise InvalidQuantity(f"{text!r} is not a quantity")
    if not text:
        raise InvalidQuantity(ERR_FORMAT)
    if text == "0":
        return ZERO
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)

    # Kubernetes' fast path: a value that fits int64 at a scale of at least
    # the nanounit is held exactly as an int64 (no rounding needed).
    if fmt == BINARY_SI:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - (exponent * 3 // 10) - 1
        else:
            mantissa, precision = 1, -1
        scale = 0
    else:
        mantissa, scale, precision = 1, exponent, 18 - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= NANO:
            result = int(num + denom) * mantissa
            if result <= INT64_MAX:
                return Quantity(result if positive else -result, scale, fmt, True)

    # The general path (Kubernetes' inf.Dec), on digit strings so that the
    # cost follows the input's length, never its exponent.
    if not any(c in _DIGITS for c in value):
        raise InvalidQuantity(ERR_NUMERIC)
    digits = (num + denom).lstrip("0")
    scale = -len(denom) + (exponent if base == 10 else 0)
    stripped = digits.rstrip("0")
    scale += len(digits) - len(stripped)
    digits = stripped
    if not digits:
        return Quantity(0, 0, fmt, False)
    if base == 10:
        if scale < NANO:
            # Round the magnitude up to the nanounit: the digits below it
            # only decide whether to round.
            cut = NANO - scale
            kept, dropped = (digits[:-cut], digits[-cut:]) if cut < len(digits) else ("", digits)
            _check_digits(kept, text)
            coefficient = int(kept or "0") + (1 if dropped.strip("0") else 0)
            scale = NANO
        else:
            _check_digits(digits, text)
            coefficient = int(digits)
    else:
        _check_digits(digits, text)
        coefficient = int(digits) << exponent
        if scale < NANO:
            cut = NANO - scale
            if cut > len(str(coefficient)):
                coefficient = 1
            else:
                whole, rest = divmod(coefficient, 10**cut)
                coefficient = whole + (1 if rest else 0)
            scale = NANO
        if Quantity(coefficient, scale).cmp(_INT64_MAX_Q) > 0:
            coefficient, scale = INT64_MAX, 0
        if Quantity(coefficient, scale).cmp(_ONE) < 0:
            fmt = DECIMAL_SI
    return Quantity(coefficient if positive else -coefficient, scale, fmt, False)


def _check_digits(digits: str, text: str) -> None:
    if len(digits) > MAX_DIGITS:
        raise QuantityTooLarge(f"{_short(text)} has more than {MAX_DIGITS} significant digits")


def decoded(value: object) -> Quantity:
    """A quantity from a decoded object, as the API server's JSON decoding
    reads it: a string trimmed of surrounding whitespace (Go's TrimSpace),
    a number from its decimal spelling."""
    if isinstance(value, bool) or value is None:
        raise InvalidQuantity(f"{value!r} is not a quantity")
    if isinstance(value, int):
        text = str(value) if abs(value) < 10**MAX_DIGITS else None
        if text is None:
            raise QuantityTooLarge(f"an integer of more than {MAX_DIGITS} digits is too large to handle exactly")
        return parse(text)
    if isinstance(value, float):
        # YAML numbers such as 0.5 arrive as floats; their shortest decimal
        # spelling is what the user wrote (and what JSON carries).
        value = repr(value)
    if not isinstance(value, str):
        raise InvalidQuantity(f"{value!r} is not a quantity")
    text = value.strip(_GO_SPACE)
    try:
        return parse(text)
    except QuantityTooLarge:
        raise
    except InvalidQuantity as err:
        raise InvalidQuantity(f"{_short(value)} is not a Kubernetes quantity: {err}") from None


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity read from a decoded object (see
    `decoded`); InvalidQuantity when it is none, QuantityTooLarge when it
    needs more than MAX_DIGITS digits."""
    return decoded(value).to_fraction()


def is_quantity(text: object) -> bool:
    """Whether ParseQuantity accepts `text` (strict: no whitespace trimmed),
    as CEL's `isQuantity`."""
    try:
        parse(text)  # type: ignore[arg-type]
    except InvalidQuantity:
        return False
    return True


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
