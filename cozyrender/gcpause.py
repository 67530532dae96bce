"""Pausing Python's cyclic garbage collector around bulk work.

Loading a state, indexing it and post-rendering a release each allocate
hundreds of thousands of small objects that hold no reference cycles; the
cyclic collector would re-scan everything alive many times over (a quarter of
the time when indexing 300,000 objects, more than the work itself on a quota of
tens of thousands of keys). Reference counting still frees everything; the
collector's previous state is restored afterwards. No imports beyond the
standard library: the post-render hot path uses it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
