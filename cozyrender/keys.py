"""GPU budget keys: the single implementation of the domain test, parsing,
spelling and validation that every command (the post-renderer included) uses.

A budget key is `gpuclass.cozystack.io/devices` (every class) or
`<class>.gpuclass.cozystack.io/devices` (one class). Any key whose part
before `/` is `gpuclass.cozystack.io` or ends in `.gpuclass.cozystack.io`,
in any letter case, is in the budget *domain*: it is treated as a budget key
even when malformed, so it never becomes a pod quota.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections import namedtuple

from cozyrender.kube.names import is_dns1123_label

DOMAIN = "gpuclass.cozystack.io"
RESOURCE = "devices"
ALL_CLASSES_KEY = f"{DOMAIN}/{RESOURCE}"

_DOMAIN_SUFFIX = "." + DOMAIN
_WHOLE_NUMBER = re.compile(r"[0-9]+\Z")
# The prefixes a chart's quota flattening puts before a resource name.
QUOTA_PREFIXES = ("requests.", "limits.")


class InvalidBudgetKey(ValueError):
    """A key in the budget domain that is not a valid budget key; str() is the reason."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key!r}: {reason}")
        self.key = key
        self.reason = reason


class InvalidBudgetValue(ValueError):
    """A budget value that is not a whole, non-negative number of devices."""


class BudgetValueTooLarge(InvalidBudgetValue):
    """A whole number past the bound: hostile or absurd input, not a budget."""


# The largest whole number read anywhere in the budget domain (an int64, as
# Kubernetes stores counts); its decimal spelling has at most 19 digits, so
# no text longer than that is ever converted.
MAX_WHOLE = 2**63 - 1
_MAX_WHOLE_DIGITS = len(str(MAX_WHOLE))


class BudgetKey(namedtuple("BudgetKey", "gpu_class")):
    """A parsed budget key. `gpu_class` is None for the all-classes key.
    (A named tuple: hashable and immutable, and cheap to import on the
    post-render path.)"""

    __slots__ = ()

    @property
    def key(self) -> str:
        return spell_budget_key(self.gpu_class)

    def covers(self, gpu_class: str) -> bool:
        """Whether this key's budget counts devices of `gpu_class`."""
        return self.gpu_class is None or self.gpu_class == gpu_class


def in_budget_domain(key: str) -> bool:
    """Whether `key` belongs to the GPU budget domain (case-insensitive).

    >>> in_budget_domain("a100.gpuclass.cozystack.io/devices")
    True
    >>> in_budget_domain("requests.gpuclass.cozystack.io/devices")
    True
    >>> in_budget_domain("evilgpuclass.cozystack.io/devices")
    False
    """
    prefix, slash, _ = key.partition("/")
    if not slash:
        return False
    prefix = prefix.lower()
    return prefix == DOMAIN or prefix.endswith(_DOMAIN_SUFFIX)


def declared_in_budget_domain(key: str) -> bool:
    """For a key a Tenant declares: whether it belongs to the budget domain,
    written with or without a `/` (`a100.gpuclass.cozystack.io` is a
    malformed budget key, refused, never an ordinary quota key: the check
    could not enforce it, and no pod resource is named that way).
    (`in_budget_domain` stays the test for quota and resource names, where
    a name without `/` is a plain resource name.)"""
    if in_budget_domain(key):
        return True
    if "/" in key:
        return False
    lowered = key.lower()
    return lowered == DOMAIN or lowered.endswith(_DOMAIN_SUFFIX)


def spell_budget_key(gpu_class: str | None) -> str:
    """The budget key for one class, or the all-classes key for None."""
    if gpu_class is None:
        return ALL_CLASSES_KEY
    if not is_class_name(gpu_class):
        raise ValueError(f"{gpu_class!r} is not a GPU class name (a DNS-1123 label)")
    return f"{gpu_class}.{ALL_CLASSES_KEY}"


def is_class_name(name: str) -> bool:
    """A GPU class name is a DNS-1123 label: it becomes part of a budget key."""
    return is_dns1123_label(name)


def parse_budget_key(key: str) -> BudgetKey:
    """Parse a key in the budget domain; raise InvalidBudgetKey with a precise reason.

    The caller decides domain membership first (`in_budget_domain`): a key
    outside the domain is not a budget key at all, and is refused here too.
    """
    if not declared_in_budget_domain(key):
        raise InvalidBudgetKey(key, f"not in the {DOMAIN} budget domain")
    prefix, slash, resource = key.partition("/")
    if not slash:
        raise InvalidBudgetKey(
            key, f"a budget key names its resource after '/': declare {ALL_CLASSES_KEY!r} or '<class>.{ALL_CLASSES_KEY}'")
    for quota_prefix in QUOTA_PREFIXES:
        if prefix.lower().startswith(quota_prefix):
            raise InvalidBudgetKey(
                key,
                f"a budget key takes no {quota_prefix!r} prefix; "
                f"declare {ALL_CLASSES_KEY!r} or '<class>.{ALL_CLASSES_KEY}'",
            )
    if key != key.lower():
        raise InvalidBudgetKey(key, "budget keys are lower case")
    if resource != RESOURCE:
        raise InvalidBudgetKey(key, f"the only budgeted resource is {RESOURCE!r}, not {resource!r}")
    if prefix == DOMAIN:
        return BudgetKey(None)
    gpu_class = prefix[: -len(_DOMAIN_SUFFIX)]
    if "." in gpu_class:
        raise InvalidBudgetKey(key, f"one class label goes before {DOMAIN!r}, not {gpu_class!r}")
    if len(gpu_class) > 63:
        raise InvalidBudgetKey(key, f"class name {gpu_class!r} is longer than 63 characters")
    if not is_class_name(gpu_class):
        raise InvalidBudgetKey(
            key,
            f"class name {gpu_class!r} is not a DNS-1123 label "
            "(lower-case letters, digits and '-', starting and ending with a letter or digit)",
        )
    return BudgetKey(gpu_class)


def strip_quota_prefix(key: str) -> str:
    """Drop one `requests.`/`limits.` prefix, as a chart's quota flattening adds it."""
    lowered = key.lower()
    for quota_prefix in QUOTA_PREFIXES:
        if lowered.startswith(quota_prefix):
            return key[len(quota_prefix):]
    return key


def quota_key_problem(key: str) -> str | None:
    """For a ResourceQuota key in the domain: None when it is a budget key,
    bare or behind one flattening prefix; otherwise why it is malformed."""
    try:
        parse_budget_key(strip_quota_prefix(key))
    except InvalidBudgetKey as err:
        return err.reason
    return None


def parse_budget_value(value: object) -> int:
    """A budget value: a whole, non-negative number of devices (`2` or `"2"`).

    Quantities with suffixes, fractions and negative numbers are refused:
    devices are counted, not measured.
    Numbers past MAX_WHOLE raise BudgetValueTooLarge, and are never
    converted from text longer than 19 digits (the cost of reading one
    never depends on its size).
    """
    if isinstance(value, bool):
        raise InvalidBudgetValue(f"{value!r} is not a number of devices")
    if isinstance(value, int):
        if value < 0:
            raise InvalidBudgetValue(f"{_short(value)} is negative; a budget is zero or more devices")
        if value > MAX_WHOLE:
            raise BudgetValueTooLarge(f"{_short(value)} is too large (more than {MAX_WHOLE})")
        return value
    if isinstance(value, str) and _WHOLE_NUMBER.match(value):
        digits = value.lstrip("0") or "0"
        if len(digits) > _MAX_WHOLE_DIGITS or int(digits) > MAX_WHOLE:
            raise BudgetValueTooLarge(f"{_short(value)} is too large (more than {MAX_WHOLE})")
        return int(digits)
    raise InvalidBudgetValue(f"{_short(value)} is not a whole, non-negative number of devices")


def _short(value: object) -> str:
    """A value for a message, cut short: a hostile number may have thousands of digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a number of more than 19 digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# How far a key's domain may be from the budget domain and still be read as a
# typo of it (`gpuclas.cozystack.io`, `gpuclass.cozystak.io`: 1; a swapped
# pair, `gpuclsas`: 2). Three edits reach other names (`gpu.cozystack.io`
# is 5 away), so two is the bound.
NEAR_MISS_EDITS = 2
_NEAR_HINTS = ("cozy", "gpu", "clas", "stack")


def near_miss_budget_key(key: str) -> str | None:
    """For a key outside the budget domain that is a typo of a budget key
    (its domain within NEAR_MISS_EDITS edits of `gpuclass.cozystack.io`, its
    class label glued on, a `requests.`/`limits.` prefix kept): the budget key
    meant; None for every other key. Such a key is an ordinary quota key to
    every rule (it would become a pod quota and budget nothing), so the
    commands warn, naming both.

    >>> near_miss_budget_key("a100.gpuclas.cozystack.io/devices")
    'a100.gpuclass.cozystack.io/devices'
    >>> near_miss_budget_key("nvidia.com/gpu") is None
    True
    """
    lowered = key.lower()
    if len(lowered) > 400 or not any(hint in lowered for hint in _NEAR_HINTS):
        return None  # the hot path: a pod quota key is never near
    if declared_in_budget_domain(key):
        return None  # in the domain: parsed, and refused when malformed
    from cozyrender.nearmiss import edit_distance

    bare = strip_quota_prefix(lowered)
    quota_prefix = lowered[: len(lowered) - len(bare)]
    prefix = bare.partition("/")[0]
    candidates = [(None, prefix)]
    label, dot, rest = prefix.partition(".")
    if dot:
        candidates.append((label, rest))
    if prefix.endswith(DOMAIN) and len(prefix) > len(DOMAIN):  # `a100gpuclass.cozystack.io`: the dot left out
        candidates.append((prefix[: -len(DOMAIN)].rstrip("-_"), DOMAIN))
    for gpu_class, domain in candidates:
        distance = edit_distance(domain, DOMAIN, NEAR_MISS_EDITS)
        if distance <= NEAR_MISS_EDITS and (distance or gpu_class is not None):
            meant = ALL_CLASSES_KEY if not gpu_class else f"{gpu_class}.{ALL_CLASSES_KEY}"
            return quota_prefix + meant if quota_prefix else meant
    return None


def near_miss_message(key: str, meant: str) -> str:
    """The warning every command gives for a near-miss key."""
    return (f"{key!r} is not a GPU budget key but looks like one ({meant!r}?): as written it is an ordinary "
            f"quota key, so it budgets no GPU and becomes a pod quota; budget keys are "
            f"{ALL_CLASSES_KEY!r} or '<class>.{ALL_CLASSES_KEY}'")
