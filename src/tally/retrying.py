"""The one retry loop: run something again while it loses a race, a bounded number
of times in all, and raise when it gives up, never fall out of the loop as if it
had worked.

Server side, `tally.db.retry` runs a write again when the database aborted it
(jittered backoff, counted in /metrics); client side, a generation race that
Placement refused (`placement.concurrent_update`) or a claim another claim beat is
read and tried again (`tally.clients.races`). Both go through `retried`. It needs
nothing but the standard library, so any layer may use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=Exception)


def retried(
    attempt: Callable[[], T],
    *,
    attempts: int,
    on: tuple[type[E], ...],
    when: Callable[[E], bool] = lambda _exc: True,
    gave_up: Callable[[E], Exception],
    pause: Callable[[int], float] | None = None,
    before_again: Callable[[E], object] | None = None,
) -> T:
    """`attempt()`, run again after an error of one of the types `on` for which
    `when(error)` holds (a lost race), at most `attempts` runs in all; any other
    error goes up at once. When the last run lost too, `gave_up(last error)` is
    raised (chained to it). Between two runs: `before_again(error)` (counting,
    logging), then a sleep of `pause(run)` seconds (run counts from 1)."""
    limit = max(1, attempts)
    for run in range(1, limit + 1):
        try:
            return attempt()
        except on as exc:
            if not when(exc):
                raise
            lost = exc
        if run < limit:
            if before_again is not None:
                before_again(lost)
            if pause is not None:
                time.sleep(pause(run))
    raise gave_up(lost) from lost
