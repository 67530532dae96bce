"""Reading quantities as Kubernetes' ParseQuantity does, and as its JSON
decoding does (surrounding white space trimmed). Pure, no I/O."""

from __future__ import annotations

from fractions import Fraction

from cozyrender.kube.quantity.value import (
    _BINARY_SUFFIXES, _DECIMAL_SUFFIXES, _INT64_MAX_Q, _ONE, BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI,
    INT64_MAX, INT64_MIN, MAX_DIGITS, NANO, ZERO, InvalidQuantity, Quantity, QuantityTooLarge,
)

ERR_FORMAT = ("quantities must match the regular expression "
              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip also
# strips \x1c-\x1f, which Go keeps).
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def split(text: str) -> tuple[bool, str, str, str, str]:
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
    positive, value, num, denom, suffix = split(text)
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
    text = value.strip(GO_SPACE)
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
