"""Near misses: how far one word is from another (Levenshtein's edit
distance) and the closest of a few choices, for the `did you mean` of every
message that names a typo (a field, a namespace, a budget key, a value).

Pure functions, no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def edit_distance(one: str, other: str, limit: int | None = None) -> int:
    """The fewest single-character insertions, deletions and substitutions
    that turn `one` into `other`; past `limit`, `limit + 1` (the work stops
    there: a hostile 10,000-character key costs a row, not a square)."""
    if limit is not None and abs(len(one) - len(other)) > limit:
        return limit + 1
    previous = list(range(len(other) + 1))
    for i, a in enumerate(one, 1):
        current = [i]
        for j, b in enumerate(other, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        if limit is not None and min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def closest(word: str, choices: Iterable[str], limit: int | None = None) -> str | None:
    """The choice nearest `word` by edit distance (ties: the first in sorted
    order), when it is within `limit` edits (default: a third of the word's
    length, at least 2) or difflib finds it close (a word with a part left
    out or added); None when nothing is near."""
    options = sorted(set(choices))
    if not options:
        return None
    bound = limit if limit is not None else max(2, len(word) // 3)
    scored = sorted((edit_distance(word, choice, bound), choice) for choice in options if choice != word)
    if scored and scored[0][0] <= bound:
        return scored[0][1]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.8)
    return close[0] if close and close[0] != word else None


def did_you_mean(word: str, choices: Iterable[str], limit: int | None = None) -> str:
    """`; did you mean X?` for the choice nearest `word`, or ``."""
    near = closest(word, choices, limit)
    return f"; did you mean {near}?" if near else ""
