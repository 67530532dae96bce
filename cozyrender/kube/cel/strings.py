"""CEL's strings extension at version 2, as Kubernetes 1.35 registers it
(`ext.Strings(ext.StringsVersion(2))`, cel-go v0.26.0, the version
k8s.io/apiserver v0.35 pins), with cel-go's overload ids and semantics:

    <string>.charAt(int)                  <string>.indexOf(string[, int])
    <string>.lastIndexOf(string[, int])   <string>.lowerAscii()  .upperAscii()
    <string>.replace(string, string[, int])
    <string>.split(string[, int])         <string>.substring(int[, int])
    <string>.trim()                       <list(string)>.join([string])
    <string>.format(list)                 strings.quote(string)

Version 2 has no `reverse` (version 3 added it), so a rule using it does not
compile. Unlike cel-cpp's own strings extension (which errors), an offset
past the end makes `indexOf`/`lastIndexOf` return -1, as cel-go v0.26.0 does;
an empty needle returns the offset unchecked, as v0.26.0 does (a later
cel-go validates it). Indexes count code points (Go runes). `trim` strips
Go's Unicode white space (strings.TrimSpace). `format` is delegated to
cel-cpp's implementation of the same version; its output can differ from
cel-go's in corner cases (map and timestamp arguments), and cel-go's
compile-time check of format strings is not reproduced.
"""

from __future__ import annotations

from functools import cache

from cel_expr_python import cel
from cel_expr_python.ext.ext_strings import ExtStrings

from cozyrender.kube.quantity.parsing import GO_SPACE  # Go's unicode.IsSpace, as strings.TrimSpace uses

VERSION = 2


def char_at(s: str, index: int) -> str:
    if index < 0 or index > len(s):
        raise ValueError(f"index out of range: {index}")
    return s[index] if index < len(s) else ""


def index_of(s: str, sub: str, offset: int = 0) -> int:
    if sub == "":
        return offset
    if offset < 0:
        raise ValueError(f"index out of range: {offset}")
    if offset >= len(s):
        return -1
    return s.find(sub, offset)


def last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        if sub == "":
            return len(s)
        if len(s.encode()) < len(sub.encode()):
            return -1
        offset = len(s) - 1
    if sub == "":
        return offset
    if offset < 0:
        raise ValueError(f"index out of range: {offset}")
    if offset >= len(s):
        return -1
    return s.rfind(sub, 0, min(offset, len(s) - len(sub)) + len(sub))


def _ascii(s: str, upper: bool) -> str:
    return "".join((c.upper() if upper else c.lower()) if c.isascii() else c for c in s)


def replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's strings.SplitN: n == 0 gives no parts, n < 0 all of them; an
    empty separator splits into code points."""
    if n == 0:
        return []
    if sep == "":
        count = len(s) if n < 0 or n > len(s) else n
        if count == 0:
            return []
        return list(s[:count - 1]) + [s[count - 1:]]
    return s.split(sep, n - 1 if n > 0 else -1)


def substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(s):
            raise ValueError(f"index out of range: {start}")
        return s[start:]
    if start > end:
        raise ValueError(f"invalid substring range. start: {start}, end: {end}")
    for index in (start, end):
        if index < 0 or index > len(s):
            raise ValueError(f"index out of range: {index}")
    return s[start:end]


def join(items: list, separator: str = "") -> str:
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"join: invalid input: {item!r}")
    return separator.join(items)


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                  "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(s: str) -> str:
    return '"' + "".join(_QUOTE_ESCAPES.get(c, c) for c in s) + '"'


@cache
def _formatter():
    env = cel.NewEnv(extensions=[ExtStrings(VERSION)],
                     variables={"f": cel.Type.STRING, "a": cel.Type.List(cel.Type.DYN)})
    return env.compile("f.format(a)")


def format_(template: str, args: list) -> str:
    result = _formatter().eval(data={"f": template, "a": args})
    if result.type() == cel.Type.ERROR:
        raise ValueError(str(result.value()))
    return result.value()


def overloads() -> dict[str, list[tuple]]:
    """name -> [(overload id, return type, parameters, is_member, impl)]."""
    S, I, T = cel.Type.STRING, cel.Type.INT, cel.Type
    strings = T.List(S)
    return {
        "charAt": [("string_char_at_int", S, [S, I], True, char_at)],
        "indexOf": [("string_index_of_string", I, [S, S], True, index_of),
                    ("string_index_of_string_int", I, [S, S, I], True, index_of)],
        "lastIndexOf": [("string_last_index_of_string", I, [S, S], True, last_index_of),
                        ("string_last_index_of_string_int", I, [S, S, I], True, last_index_of)],
        "lowerAscii": [("string_lower_ascii", S, [S], True, lambda s: _ascii(s, False))],
        "upperAscii": [("string_upper_ascii", S, [S], True, lambda s: _ascii(s, True))],
        "replace": [("string_replace_string_string", S, [S, S, S], True, replace),
                    ("string_replace_string_string_int", S, [S, S, S, I], True, replace)],
        "split": [("string_split_string", strings, [S, S], True, split),
                  ("string_split_string_int", strings, [S, S, I], True, split)],
        "substring": [("string_substring_int", S, [S, I], True, substring),
                      ("string_substring_int_int", S, [S, I, I], True, substring)],
        "trim": [("string_trim", S, [S], True, lambda s: s.strip(GO_SPACE))],
        "join": [("list_join", S, [strings], True, join),
                 ("list_join_string", S, [strings, S], True, join)],
        "format": [("string_format", S, [S, T.List(T.DYN)], True, format_)],
        "strings.quote": [("strings_quote", S, [S], False, quote)],
    }
