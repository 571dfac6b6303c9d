"""How much one search may do: candidates made (each weighing the groups it
joins), parts built, and the steps of combining the groups (each partial
combination tried), all in one count; and how long it may take.

A request of many groups over a wide tree multiplies: six groups of `VCPU:1`
over one root with ten children make a million candidates, a 600 MB answer and
a worker grown past a GiB. And a request that makes nothing can cost as much:
eleven groups of `VCPU:1` over ten children of one VCPU each try every
placement of ten groups before finding the eleventh has no room (10! of them,
70 s). So the count is of the work, not of the answer: a request that would
pass the budget is refused, naming the setting, whatever the answer's size and
with `limit` or without. `limit` stops the combining early; what one tree
offers one group (a product over its providers of each class) is made whole
either way.

The deadline is the last guard, for work the count does not see: past it the
search stops with 503 (the server is too slow or too busy for this request
now), naming its setting.
"""

from __future__ import annotations

import math
import time

from tally import memory
from tally.placement.error_types import BadRequest, ServiceUnavailable

SETTING = "candidates_answer_budget"
DEADLINE_SETTING = "candidates_search_seconds"
CLOCK_EVERY = 4096  # units of work between two looks at the clock


class AnswerTooLarge(BadRequest):
    """The search would do more work than the budget allows."""


class SearchTooLong(ServiceUnavailable):
    """The search ran past its deadline."""


class Budget:
    """A count of the work one search did, refused past `most` (-1: no bound),
    and the moment it must stop by (`math.inf`: none)."""

    __slots__ = ("clock_at", "deadline", "made", "most", "seconds")

    def __init__(self, most: int = -1, seconds: float = 0, deadline: float | None = None) -> None:
        self.most = most
        self.seconds = seconds
        if deadline is None:
            deadline = time.monotonic() + seconds if seconds > 0 else math.inf
        self.deadline = deadline
        self.made = 0
        self.clock_at = CLOCK_EVERY

    def fresh(self) -> Budget:
        """A new count for another try at the same request, under the same deadline."""
        return Budget(self.most, self.seconds, self.deadline)

    def spend(self, count: int) -> None:
        self.made += count
        if 0 <= self.most < self.made:
            memory.release_soon()  # what it made until here: free once answered
            raise AnswerTooLarge(
                f"This request would make more than {self.most} allocation candidates or "
                f"combinations of providers (the {SETTING} setting): narrow it, or ask "
                "with limit=N."
            )
        if self.made >= self.clock_at:
            self.clock_at = self.made + CLOCK_EVERY
            self.check_clock()

    def check_clock(self) -> None:
        """Refuse once past the deadline."""
        if time.monotonic() > self.deadline:
            memory.release_soon()
            raise SearchTooLong(
                f"This request's search ran past {self.seconds:g} seconds (the "
                f"{DEADLINE_SETTING} setting): the server is too busy for it now, or it "
                "asks for too much; narrow it, or retry later.",
                **{"retry-after": str(max(1, math.ceil(self.seconds)))},
            )
