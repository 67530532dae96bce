"""Values as the API server hands them to CRD rules (k8s.io/apiserver
pkg/cel/common/values.go, v0.35.7): decoded JSON, except that a string
whose schema format is `byte`, `duration`, `date` or `date-time` becomes
bytes, a duration or a timestamp (the types `kubecel_types` gives them).

The rules (Kubernetes', via go-openapi strfmt): `byte` is standard base64;
`duration` is a Go duration (`1h30m`, `-1.5s`) or a number and a unit word
(`3 days`, `2w`); `date` is `YYYY-MM-DD`; `date-time` is RFC 3339 (read
with Python's ISO 8601 reader, a little more lenient than strfmt). They
reach cel-expr-python as protobuf Timestamp and Duration messages. A string
that does not read is passed on unconverted; the rule then fails when it
is evaluated (the API server also reports an error there). Pure, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Mapping
from fractions import Fraction
from functools import cache

from google.protobuf import duration_pb2, timestamp_pb2

from cozyrender.gpuclass.kubecel_types import DeclType

_GO_DURATION = re.compile(r"\A([+-]?)((?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+|0)\Z")
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_NS = 10**9
_GO_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": _NS, "m": 60 * _NS, "h": 3600 * _NS}
_WORD_DURATION = re.compile(r"\A(\d+)\s*([a-zA-Z]+)\Z")
_WORD_UNITS = {
    "ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": _NS, "m": 60 * _NS, "h": 3600 * _NS,
    "d": 86400 * _NS, "w": 604800 * _NS, "nanosecond": 1, "microsecond": 10**3, "millisecond": 10**6,
    "second": _NS, "minute": 60 * _NS, "hour": 3600 * _NS, "day": 86400 * _NS, "week": 604800 * _NS,
}
# CEL's duration range (about ±10000 years), as cel-go checks it.
_MAX_DURATION_NS = 315576000000 * _NS


def _duration(text: str) -> duration_pb2.Duration | None:
    """A duration as CEL takes it from Python: a protobuf Duration."""
    nanos = None
    match = _GO_DURATION.match(text)
    if match:
        total = sum(Fraction(number) * _GO_UNITS[unit] for number, unit in _GO_PART.findall(match[2]))
        nanos = int(-total if match[1] == "-" else total)
    else:
        match = _WORD_DURATION.match(text)
        if match and len(match[1]) <= 20:
            unit = match[2].lower().removesuffix("s") if len(match[2]) > 2 else match[2].lower()
            if unit in _WORD_UNITS:
                nanos = int(match[1]) * _WORD_UNITS[unit]
    if nanos is None or abs(nanos) > _MAX_DURATION_NS:
        return None
    seconds, rest = divmod(abs(nanos), _NS)
    sign = -1 if nanos < 0 else 1
    return duration_pb2.Duration(seconds=sign * seconds, nanos=sign * rest)


def _timestamp(text: str, date_only: bool) -> timestamp_pb2.Timestamp | None:
    """A timestamp as CEL takes it from Python: a protobuf Timestamp."""
    try:
        if date_only:
            if len(text) != 10:
                return None
            day = dt.date.fromisoformat(text)
            value = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        else:
            value = dt.datetime.fromisoformat(text)
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _bytes(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def to_cel(value: object, declaration: DeclType | None) -> object:
    """`value` with its formatted strings converted as the API server
    converts them; everything else unchanged (and not copied)."""
    if declaration is None or value is None:
        return value
    kind = declaration.kind
    if isinstance(value, str) and kind in ("bytes", "duration", "timestamp"):
        converted = (_bytes(value) if kind == "bytes" else _duration(value) if kind == "duration"
                     else _timestamp(value, declaration.name == "date"))
        return value if converted is None else converted
    if kind == "object" and isinstance(value, Mapping):
        fields = dict(declaration.fields)
        if not any(_needs_conversion(t) for t in fields.values()):
            return value
        return {key: to_cel(item, fields.get(key)) for key, item in value.items()}
    if kind == "list" and isinstance(value, list) and _needs_conversion(declaration.element):
        return [to_cel(item, declaration.element) for item in value]
    if kind == "map" and isinstance(value, Mapping) and _needs_conversion(declaration.element):
        return {key: to_cel(item, declaration.element) for key, item in value.items()}
    return value


@cache
def _needs_conversion(declaration: DeclType | None) -> bool:
    if declaration is None:
        return False
    if declaration.kind in ("bytes", "duration", "timestamp"):
        return True
    if declaration.kind == "object":
        return any(_needs_conversion(t) for _, t in declaration.fields)
    return declaration.kind in ("list", "map") and _needs_conversion(declaration.element)


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def holds_nul(value: object) -> bool:
    """Whether a string anywhere in `value` (a key or a value) holds a NUL
    character."""
    return any("\x00" in text for text in _strings(value))


def without_nul(*values: object) -> tuple:
    """`values` with every NUL character replaced by one stand-in character
    that occurs in none of their strings.

    cel-expr-python passes strings to cel-cpp as C strings, cut at the first
    NUL, so a rule would judge a different value than the API server does
    (`"ok\\x00BAD"` would match a name rule as `"ok"`, and an immutable
    `"A\\x00B"` changed to `"A\\x00C"` would read unchanged). The stand-in,
    a private-use character, keeps what the CRD rules can observe: every
    string's length in characters, equality between any two strings (the
    replacement is one-to-one), `has()`, and what a regular expression's
    letter, digit, `/` or `.` classes match (neither character is in any of
    them). It does not keep byte order against other characters: no rule of
    the shipped CRD compares strings by order. Values without a NUL are
    returned as they are."""
    if not any(holds_nul(value) for value in values):
        return values
    used = set()
    for value in values:
        for text in _strings(value):
            used.update(text)
    stand_in = next(chr(code) for code in range(0xE000, 0xF900) if chr(code) not in used)
    return tuple(_replace_nul(value, stand_in) for value in values)


def _replace_nul(value: object, stand_in: str):
    if isinstance(value, str):
        return value.replace("\x00", stand_in)
    if isinstance(value, Mapping):
        return {_replace_nul(key, stand_in): _replace_nul(item, stand_in) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace_nul(item, stand_in) for item in value]
    return value

