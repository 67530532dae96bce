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
`Fraction` of a value beyond 10**MAX_DIGITS (Kubernetes accepts those values
and pays in time and memory). The other deliberate difference is in
writing (`Quantity.canonical`): where Kubernetes' String() has no suffix for
an exponent and drops it (1e21 and up held as decimal SI), cozyrender writes
the exponent form, and a binary value beyond the cap (a sum) is written in
decimal, so that every written quantity reads back to itself.

Two entry points:

* `parse(text)` is ParseQuantity, strict (what CEL's `quantity()` and
  `isQuantity()` call).
* `parse_quantity(value)` reads a quantity from a decoded object (pod
  requests, limits, overhead and resize status; ResourceQuota
  `status.used`; node `status.allocatable`; Tenant `resourceQuotas`; read
  through it, most via `kube.shape.quantity`): the API server's JSON decoding
  trims surrounding whitespace first (`Quantity.UnmarshalJSON` calls
  `strings.TrimSpace`), and a YAML/JSON number is read from its decimal
  spelling. It returns the exact value as a `Fraction`.
"""

from cozyrender.kube.quantity.parsing import (
    ERR_FORMAT, ERR_NUMERIC, ERR_SUFFIX, decoded, is_quantity, parse, parse_quantity, split,
)
from cozyrender.kube.quantity.spelling import format_binary_quantity, format_quantity
from cozyrender.kube.quantity.value import (
    BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, INT64_MAX, INT64_MIN, MAX_DIGITS, NANO, ZERO,
    InvalidQuantity, Quantity, QuantityTooLarge, from_int,
)

__all__ = [
    "BINARY_SI", "DECIMAL_EXPONENT", "DECIMAL_SI", "ERR_FORMAT", "ERR_NUMERIC", "ERR_SUFFIX", "INT64_MAX",
    "INT64_MIN", "MAX_DIGITS", "NANO", "ZERO", "InvalidQuantity", "Quantity", "QuantityTooLarge", "decoded",
    "format_binary_quantity", "format_quantity", "from_int", "is_quantity", "parse", "parse_quantity", "split",
]
