"""How much one answer may make: candidates, and the combinations tried on the
way to them.

A request of many groups over a wide tree multiplies: six groups of `VCPU:1`
over one root with ten children make a million candidates, a 600 MB answer and
a worker grown past a GiB. `limit` stops the combining of groups early; what
one tree offers one group (a product over its providers of each class) is made
whole either way. A request that would pass the budget is refused, naming the
setting, before its memory is spent.
"""

from __future__ import annotations

from tally import memory
from tally.placement.ledger.errors import BadRequest

SETTING = "candidates_answer_budget"


class AnswerTooLarge(BadRequest):
    """The answer would make more than the budget allows."""


class Budget:
    """A count of what one search made, refused past `most` (-1: no bound)."""

    __slots__ = ("made", "most")

    def __init__(self, most: int = -1) -> None:
        self.most = most
        self.made = 0

    def spend(self, count: int) -> None:
        self.made += count
        if 0 <= self.most < self.made:
            memory.release_soon()  # what it made until here: free once answered
            raise AnswerTooLarge(
                f"This request would make more than {self.most} allocation candidates or "
                f"combinations of providers (the {SETTING} setting): narrow it, or ask "
                "with limit=N."
            )
