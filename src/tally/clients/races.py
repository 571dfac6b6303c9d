"""A generation race lost to another writer, read again and tried again.

Placement refuses a write made with a stale generation (409
`placement.concurrent_update`, from 1.23; a bare 409 before). The caller's attempt
reads afresh each time; after `ATTEMPTS` lost races `GaveUp` is raised: losing
every race is a failure, never a write that silently did not happen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tally.clients.errors import GaveUp, PlacementError
from tally.retrying import retried

T = TypeVar("T")
CONCURRENT_UPDATE = "placement.concurrent_update"
ATTEMPTS = 3


def generation_race(exc: PlacementError) -> bool:
    """Placement said the generation we sent is stale (only that: a 409 refusing
    capacity is not a race)."""
    return exc.code == CONCURRENT_UPDATE


def any_conflict(exc: PlacementError) -> bool:
    """A generation race, or any 409 (for a write whose only conflict is the
    generation, such as a provider's traits, on servers before 1.23's codes)."""
    return exc.code == CONCURRENT_UPDATE or exc.status == 409


def until_won(
    attempt: Callable[[], T],
    what: str,
    *,
    attempts: int = ATTEMPTS,
    race: Callable[[PlacementError], bool] = generation_race,
) -> T:
    """`attempt()` (which reads what it writes afresh), again after a lost race, at
    most `attempts` runs in all; GaveUp naming `what` when every run lost."""
    return retried(
        attempt,
        attempts=attempts,
        on=(PlacementError,),
        when=race,
        gave_up=lambda exc: GaveUp(f"{what} kept changing: gave up after {attempts} tries"),
    )
