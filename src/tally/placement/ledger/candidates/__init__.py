"""GET /allocation_candidates: the search, one module per step.

    request.py    the query as request groups and request-wide parameters
    snapshot.py   the data the search reads, in a few bulk SQL queries
    groups.py     what each group can take, per anchor tree
    search.py     names -> ids, run the groups, combine them into candidates
    summaries.py  limit, provider summaries, the answer in uuids and names

`find_candidates` is the one entry point (`search_in` for a connection already
open); a future in-memory index replaces `Snapshot` behind it without touching
the handler.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

import sqlalchemy as sa

from tally.db.engine import transaction
from tally.placement.ledger.candidates import search, summaries
from tally.placement.ledger.candidates.request import CandidateRequest, parse_query
from tally.placement.ledger.candidates.search import Options
from tally.placement.ledger.candidates.snapshot import Snapshot
from tally.placement.ledger.candidates.summaries import Result

__all__ = [
    "CandidateRequest",
    "Options",
    "Result",
    "find_candidates",
    "gc_paused",
    "parse_query",
    "search_in",
]


def find_candidates(
    engine: sa.Engine, request: CandidateRequest, options: Options | None = None
) -> Result:
    """Allocation requests and provider summaries satisfying `request`, read
    in one transaction."""
    with transaction(engine) as conn:
        return search_in(conn, request, options)


def search_in(
    conn: sa.Connection, request: CandidateRequest, options: Options | None = None
) -> Result:
    options = options or Options()
    ctx, found = search.run(Snapshot(conn), request, options)
    if ctx is None:
        return Result([], {})
    return summaries.build(ctx, request, found, options)


_gc_lock = threading.Lock()
_gc_pausers = 0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a search runs and its answer is
    rendered. A big search creates hundreds of thousands of small containers
    and no cycles; the collector would walk them again and again (a third of
    the time at 10,000 trees). Let them all die (by reference counting) inside
    the block and the collector never sees them. Counted, so overlapping
    searches in other threads keep it paused."""
    global _gc_pausers
    with _gc_lock:
        ours = _gc_pausers > 0 or gc.isenabled()  # else someone else turned it off
        if ours:
            _gc_pausers += 1
            gc.disable()
    try:
        yield
    finally:
        if ours:
            with _gc_lock:
                _gc_pausers -= 1
                if _gc_pausers == 0:
                    gc.enable()
