"""GET /allocation_candidates: the search as a pipeline, one module per step;
imports point down this list only (a test checks the import graph has no ring).

    kept_answers.py  answers to requests asked again, per tree, until the tree
                     changes (over the store of answer_cache.py)
    render.py        the answer written straight to JSON (newest shape)
    summaries.py     limit, provider summaries, the answer in uuids and names
    why.py           why a request finds no tree (or few): each constraint judged
                     alone per tree, the search telling which trees fit
    search.py        names -> ids, run the groups, combine them into candidates
    walk.py          ... tree by tree, stopping at `limit` (over a whole source)
    combine.py       one part of every group per anchor tree
    narrow.py        the trees that can anchor a candidate at all
    groups.py        what each group can take, per anchor tree
    options.py       how the server runs a search (cap, order, sampling, budget)
    budget.py        how much work one search may do, and for how long
    request.py       the query as request groups and request-wide parameters
    source.py        `Source`: every question the steps above ask of what they read
    view.py          the index as a Source, for one search (the one module that
                     reads the index's structures)
    index.py         the data held in memory per worker, kept current by the
                     ledger journal (the default); it tells answer_cache.py's
                     `KeptAnswers` what changed, once per load or catch-up
    snapshot.py      the Source read in a few bulk SQL queries (the fallback),
                     and the data shapes (stock rows, parts, candidates)

`find_candidates` is the one entry point (`search_in` for a connection already
open, always on the database; `search_over` for any `Source`; `first_over` for
the candidates alone, in ids); `candidates_answer`
gives the same answer as the JSON body of the newest microversion
(`candidates_json`, joined; `answer_over` for any `Source`). `explain` says why a
request finds what it does (why.py); `answer_and_verdict` gives an empty answer
with its verdict.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger.candidates import kept_answers as answers
from tally.placement.ledger.candidates import render, search, summaries
from tally.placement.ledger.candidates import view as views
from tally.placement.ledger.candidates import why as why_module
from tally.placement.ledger.candidates.answer_cache import VERDICTS_KEPT
from tally.placement.ledger.candidates.budget import AnswerTooLarge, SearchTooLong
from tally.placement.ledger.candidates.groups import Context
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.candidates.options import Options
from tally.placement.ledger.candidates.render import Answer
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.candidates.snapshot import Candidate, Snapshot
from tally.placement.ledger.candidates.source import Source
from tally.placement.ledger.candidates.summaries import Result

LOG = logging.getLogger(__name__)

__all__ = [
    "Answer",
    "AnswerTooLarge",
    "CandidateRequest",
    "Index",
    "Options",
    "Result",
    "SearchTooLong",
    "Source",
    "answer_and_verdict",
    "answer_over",
    "candidates_answer",
    "candidates_json",
    "find_candidates",
    "first_over",
    "search_in",
    "explain",
    "search_over",
    "verdict_or_none",
]


def find_candidates(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> Result:
    """Allocation requests and provider summaries satisfying `request`: from
    `index` brought up to date, else read from the database, in one transaction."""
    with _source(engine, index) as source:
        return search_over(source, request, options)


def candidates_answer(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> Answer:
    """`find_candidates` as the JSON body of microversion 1.34 on (mappings,
    summaries with parents and roots), made while the index is held, in the pieces
    a server sends a chunk at a time."""
    with _source(engine, index) as source:
        return answer_over(source, request, options)


def candidates_json(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> bytes:
    """`candidates_answer` joined."""
    return bytes(candidates_answer(engine, request, options, index))


def explain(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> dict[str, Any]:
    """Why `request` finds what it finds (`why.explain`), as the API shows it."""
    with _source(engine, index) as source:
        found = _verdict(source, request, options or Options())
    return _shown(engine, *found)


def answer_and_verdict(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> tuple[Answer, dict[str, Any] | None]:
    """`candidates_answer`, and when it is empty the verdict (`explain`) from the
    state that search read."""
    options = options or Options()
    with _source(engine, index) as source:
        answer = answer_over(source, request, options)
        found = None if answer.requests else _verdict_or_none(source, request, options, True)
    return answer, None if found is None else _shown(engine, *found)


def verdict_or_none(
    engine: sa.Engine,
    request: CandidateRequest,
    options: Options | None = None,
    index: Index | None = None,
) -> dict[str, Any] | None:
    """`explain`, or None when it could not be worked out (logged): a verdict
    never fails the answer it explains."""
    with _source(engine, index) as source:
        found = _verdict_or_none(source, request, options or Options())
    return None if found is None else _shown(engine, *found)


def _verdict_or_none(
    source: Source, request: CandidateRequest, options: Options, found_none: bool = False
) -> tuple[why_module.Verdict, dict[int, str]] | None:
    try:
        return _verdict(source, request, options, found_none)
    except (SearchTooLong, AnswerTooLarge) as exc:
        LOG.warning("no verdict for an empty answer: %s", exc)
    except Exception:
        LOG.exception("no verdict for an empty answer")
    return None


def _verdict(
    source: Source, request: CandidateRequest, options: Options, found_none: bool = False
) -> tuple[why_module.Verdict, dict[int, str]]:
    """The verdict, with the uuids of the trees it names (read while `source` is held);
    kept by the source until anything changes, when it keeps answers."""
    kept = source.kept()
    key = (answers.signature(request), request.nested_aware, found_none)
    if kept is not None and key in kept.verdicts:
        return kept.verdicts[key]
    verdict = why_module.explain(source, request, options, found_none)
    roots = [miss.root for miss in verdict.closest]
    source.load_providers(roots)
    found = verdict, {rp: source.rows[rp][0] for rp in roots}
    if kept is not None:
        if len(kept.verdicts) >= VERDICTS_KEPT:
            kept.verdicts.clear()
        kept.verdicts[key] = found
    return found


def _shown(engine: sa.Engine, verdict: why_module.Verdict, uuids: dict[int, str]) -> dict:
    names = provider_names(engine, uuids.values())
    return verdict.as_dict(uuids.__getitem__, lambda rp: names.get(uuids[rp]))


def provider_names(engine: sa.Engine, uuids: Iterable[str]) -> dict[str, str]:
    """Providers' names by uuid (the index keeps none)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    rp = t.resource_providers
    with transaction(engine) as conn:
        rows = conn.execute(sa.select(rp.c.uuid, rp.c.name).where(rp.c.uuid.in_(wanted)))
        return {uuid: name for uuid, name in rows}


@contextlib.contextmanager
def _source(engine: sa.Engine, index: Index | None) -> Iterator[Source]:
    """What a search reads, in one transaction: `index` brought up to date, or
    the database when there is none or it is off."""
    if index is not None:
        with views.of(index, engine) as view:
            if view is not None:
                yield view
                return
    with transaction(engine) as conn:
        yield Snapshot(conn)


def answer_over(
    source: Source, request: CandidateRequest, options: Options | None = None
) -> Answer:
    """`candidates_answer` over `source` (held for as long as this runs)."""
    options = options or Options()
    budget = options.new_budget()  # the deadline runs from here, the count per try
    kept = answers.body(source, request, options, budget)
    if kept is not None:
        return kept
    budget = budget.fresh()
    ctx, found = search.run(source, request, options, budget=budget)
    if ctx is None:
        return render.EMPTY
    return render.body(ctx, request, summaries.choose(ctx, request, found, options))


def search_in(
    conn: sa.Connection, request: CandidateRequest, options: Options | None = None
) -> Result:
    """The search on the database, over a connection already open."""
    return search_over(Snapshot(conn), request, options)


def first_over(
    source: Source,
    request: CandidateRequest,
    options: Options | None = None,
    until: Callable[[Candidate], bool] | None = None,
    walked: list[int] | None = None,
) -> tuple[Context | None, list[Candidate]]:
    """The candidates `search_over` answers with, in ids and without summaries
    (for a caller that takes one of them): the first `limit` in the answer's
    order, or, when the walk tree by tree runs (`walk.first`), only those up to
    the first that `until` accepts; `walked` gets the trees the walk came to."""
    options = options or Options()
    ctx, found = search.run(source, request, options, until=until, walked=walked)
    chosen = None if ctx is None else summaries.choose(ctx, request, found, options)
    return ctx, [] if chosen is None else chosen[0]


def search_over(
    source: Source, request: CandidateRequest, options: Options | None = None
) -> Result:
    """`find_candidates` over `source` (held for as long as this runs)."""
    options = options or Options()
    ctx, found = search.run(source, request, options)
    if ctx is None:
        return Result([], {})
    return summaries.build(ctx, request, found, options)
