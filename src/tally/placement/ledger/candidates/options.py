"""How the server runs a search (settings, not the request): a cap on
candidates, the order trees are taken in, random sampling, and the budget."""

from __future__ import annotations

import dataclasses

from tally.placement.ledger.candidates.budget import Budget


@dataclasses.dataclass(frozen=True)
class Options:
    max_candidates: int = -1  # stop after this many distinct candidates; -1: all
    strategy: str = "depth-first"  # or 'breadth-first': round-robin over anchor trees
    randomize: bool = False  # sample `limit` at random instead of taking the first
    budget: int = -1  # most work (candidates, parts, combinations tried) of a search; -1: any
    seconds: float = 0  # the deadline of a search, in seconds; 0: none

    def new_budget(self) -> Budget:
        """The budget of one request's search, its deadline running from now."""
        return Budget(self.budget, self.seconds)
