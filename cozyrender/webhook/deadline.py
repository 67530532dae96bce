"""The API server's deadline for one admission call, carried by everything
the decision waits on.

Rules:
- An AdmissionReview carries no deadline: the webhook is told the
  configuration's `timeoutSeconds` (`cozyrender webhook --timeout-seconds`,
  set by the chart from the value that renders it), and a call's deadline
  is its arrival (for the request a new connection was dialled for, the
  arrival of the connection's TLS handshake: the API server's clock runs
  from before its dial) plus that timeout, less a margin (`margin`: a quarter of
  the timeout, at most MARGIN) for what happens outside the decision: the
  API server sending the request and the TLS and HTTP reading before it
  arrives, the answer travelling back.
- Whatever a decision waits on (its turn on a shard, a ledger read or
  write, a lookup) waits at most the time that remains; a decision that
  cannot finish in time is refused, saying so.
- Once the deadline has passed, nothing more is written for the call (no
  ledger entry): the API server has answered without us by then.
- The deadline of the call being answered is kept per thread (`within`,
  `current`): the server sets it when a request arrives, the route reads
  it; a route called directly (tests, benchmarks) makes its own from the
  same timeout.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

TIMEOUT = 10.0  # seconds: the chart's timeoutSeconds (the API server allows at most 30)
MARGIN = 1.5  # seconds kept back from the timeout at most


def margin(timeout: float) -> float:
    """The time kept back from a `timeout` of seconds."""
    return min(MARGIN, timeout / 4)


@dataclass(frozen=True)
class Deadline:
    """When a call must be answered by (`at`, on `clock`: monotonic seconds)."""

    at: float
    timeout: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def after(cls, timeout: float = TIMEOUT, arrived: float | None = None,
              clock: Callable[[], float] = time.monotonic) -> Deadline:
        """The deadline of a call that arrived at `arrived` (now when None)
        under a webhook timeout of `timeout` seconds."""
        start = clock() if arrived is None else arrived
        return cls(start + timeout - margin(timeout), timeout, clock)

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self.at

    def said(self) -> str:
        """The deadline in words, for a refusal."""
        return (f"the API server's timeout for this webhook ({self.timeout:g} s, less {margin(self.timeout):g} s "
                "kept for the way there and back)")


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("cozyrender_deadline", default=None)


@contextmanager
def within(deadline: Deadline) -> Iterator[Deadline]:
    """`deadline` as the current call's, for the duration of the block."""
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


def current() -> Deadline | None:
    """The deadline of the call this thread answers, if the server set one."""
    return _current.get()


__all__ = ["MARGIN", "TIMEOUT", "Deadline", "current", "margin", "within"]
