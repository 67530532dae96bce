"""Kubernetes' CEL semver library (k8s.io/apiserver pkg/cel/library/semverlib.go
at v0.35.7, `SemverLib(SemverVersion(1))` as the 1.34 compatibility
environment registers it), declared with the API server's overload ids:

    semver(string) -> Semver            semver(string, bool) -> Semver   (bool: normalize)
    isSemver(string) -> bool            isSemver(string, bool) -> bool
    <Semver>.major() / .minor() / .patch() -> int
    <Semver>.isGreaterThan(Semver) / .isLessThan(Semver) -> bool
    <Semver>.compareTo(Semver) -> int

Versions are read as blang/semver v4's `Parse` reads them: exactly
MAJOR.MINOR.PATCH, decimal without leading zeros, then an optional
`-prerelease` (dot-separated identifiers of letters, digits and `-`, numeric
ones without leading zeros) and `+build` metadata. With `normalize`, as
Kubernetes' normalizeAndParse: a leading `v` is dropped, leading zeros are
trimmed from the first three parts, and a short version is padded with
`.0` (a short one with `-` or `+` is refused). Precedence is SemVer's, build
metadata ignored; a Semver value is a message holding the version without
its build metadata, so `==` compares as Kubernetes' `Version.EQ` does.
"""

from __future__ import annotations

from cel_expr_python import cel
from google.protobuf import descriptor_pb2

SEMVER_TYPE = "kubernetes.Semver"
_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_UINT64_MAX = 2**64 - 1


def add_message(file: descriptor_pb2.FileDescriptorProto) -> None:
    """Declare `kubernetes.Semver` in `file` (package `kubernetes`)."""
    message = file.message_type.add(name="Semver")
    message.field.add(name="text", number=1, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)


Version = tuple[int, int, int, tuple]  # major, minor, patch, prerelease identifiers


def _number(text: str, what: str) -> int:
    if set(text) - _NUMBERS:
        raise ValueError(f"Invalid character(s) found in {what} number {_q(text)}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{what.capitalize()} number must not contain leading zeroes {_q(text)}")
    if not text:
        raise ValueError(f"strconv.ParseUint: parsing {_q(text)}: invalid syntax")
    if len(text) > 20 or int(text) > _UINT64_MAX:
        raise ValueError(f"strconv.ParseUint: parsing {_q(text)}: value out of range")
    return int(text)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse(text: str) -> Version:
    """blang/semver v4 Parse."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text, build, prerelease = parts[2], None, None
    if "+" in patch_text:
        patch_text, build = patch_text.split("+", 1)
    if "-" in patch_text:
        patch_text, prerelease = patch_text.split("-", 1)
    patch = _number(patch_text, "patch")
    identifiers: list = []
    for item in prerelease.split(".") if prerelease is not None else ():
        if not item:
            raise ValueError("Prerelease is empty")
        if not set(item) - _NUMBERS:
            if len(item) > 1 and item[0] == "0":
                raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_q(item)}")
            if len(item) > 20 or int(item) > _UINT64_MAX:
                raise ValueError(f"strconv.ParseUint: parsing {_q(item)}: value out of range")
            identifiers.append(int(item))
        elif not set(item) - _ALPHANUM:
            identifiers.append(item)
        else:
            raise ValueError(f"Invalid character(s) found in prerelease {_q(item)}")
    for item in build.split(".") if build is not None else ():
        if not item:
            raise ValueError("Build meta data is empty")
        if set(item) - _ALPHANUM:
            raise ValueError(f"Invalid character(s) found in build meta data {_q(item)}")
    return major, minor, patch, tuple(identifiers)


def normalize_and_parse(text: str) -> Version:
    """Kubernetes' normalizeAndParse."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[index] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def compare(a: Version, b: Version) -> int:
    """SemVer precedence: numbers, then a release above its prereleases,
    then identifier by identifier (numeric below alphanumeric)."""
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if not pa or not pb:
        return (not pa) - (not pb)
    for x, y in zip(pa, pb):
        if x == y:
            continue
        if isinstance(x, int) != isinstance(y, int):
            return -1 if isinstance(x, int) else 1
        return -1 if x < y else 1
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


def spell(version: Version) -> str:
    major, minor, patch, pre = version
    text = f"{major}.{minor}.{patch}"
    return text + ("-" + ".".join(str(p) for p in pre) if pre else "")


def overloads(message_class: type | None) -> dict[str, list[tuple]]:
    """name -> [(overload id, return type, parameters, is_member, impl)]."""
    T, S = cel.Type, cel.Type(SEMVER_TYPE)

    def read(message) -> Version:
        return parse(message.text)

    def make(text: str, normalize: bool = False):
        return message_class(text=spell(normalize_and_parse(text) if normalize else parse(text)))

    def check(text: str, normalize: bool = False) -> bool:
        try:
            normalize_and_parse(text) if normalize else parse(text)
        except ValueError:
            return False
        return True

    def as_int(value: int) -> int:
        return value - 2**64 if value > 2**63 - 1 else value  # Go's int64(uint64)

    return {
        "semver": [("string_to_semver", S, [T.STRING], False, make),
                   ("string_bool_to_semver", S, [T.STRING, T.BOOL], False, make)],
        "isSemver": [("is_semver_string", T.BOOL, [T.STRING], False, check),
                     ("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], False, check)],
        "isGreaterThan": [("semver_is_greater_than", T.BOOL, [S, S], True,
                           lambda a, b: compare(read(a), read(b)) == 1)],
        "isLessThan": [("semver_is_less_than", T.BOOL, [S, S], True, lambda a, b: compare(read(a), read(b)) == -1)],
        "compareTo": [("semver_compare_to", T.INT, [S, S], True, lambda a, b: compare(read(a), read(b)))],
        "major": [("semver_major", T.INT, [S], True, lambda a: as_int(read(a)[0]))],
        "minor": [("semver_minor", T.INT, [S], True, lambda a: as_int(read(a)[1]))],
        "patch": [("semver_patch", T.INT, [S], True, lambda a: as_int(read(a)[2]))],
    }
