"""GET /allocation_candidates (from microversion 1.10)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import falcon
import orjson

from tally import memory
from tally.placement.candidate_query import parse_query
from tally.placement.context import Service
from tally.placement.handlers.common import cache_headers, read_query, since
from tally.placement.ledger import candidates as ledger
from tally.placement.ledger.failure_records import FailureNote
from tally.placement.microversion import MAX_VERSION
from tally.placement.schemas.answer_schemas import fitter_of
from tally.placement.schemas.candidates import (
    DICT_ALLOCATIONS,
    MAPPINGS,
    WHY_PATH,
    allocation_candidates,
)

_FIT = fitter_of(allocation_candidates)  # the answer at a microversion (`schemas.candidates`)


def search_options(service: Service) -> ledger.Options:
    """How this server searches (its settings)."""
    settings = service.settings
    return ledger.Options(
        max_candidates=settings.max_allocation_candidates,
        strategy=settings.allocation_candidates_generation_strategy,
        randomize=settings.randomize_allocation_candidates,
        budget=settings.candidates_answer_budget,
        seconds=settings.candidates_search_seconds,
    )


class AllocationCandidates:
    POLICIES = {"GET": "placement:allocation_candidates:list"}

    def __init__(self, service: Service) -> None:
        self.service = service
        self.options = search_options(service)
        self.index = service.index()

    @since("1.10")
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.version
        params = read_query(req)
        request = parse_query(params, version)
        with memory.gc_paused():
            answer, verdict = self._answer(request, version)
        if verdict is not None:
            self._note(req, verdict)
        if isinstance(answer, bytes):
            resp.data = answer
        else:  # joined a chunk at a time as it is sent
            resp.content_length = len(answer)
            resp.stream = answer.chunks()
        resp.content_type = falcon.MEDIA_JSON
        cache_headers(req, resp)

    def _answer(
        self, request: ledger.CandidateRequest, version: tuple[int, int]
    ) -> tuple[ledger.Answer | bytes, dict[str, Any] | None]:
        """The JSON body (everything built on the way is freed on return) and, when
        it is empty and failed searches are recorded, its verdict."""
        engine, options, index = self.service.engine, self.options, self.index
        recording = self.service.failures is not None
        if version >= MAPPINGS:  # the newest shape, written straight to JSON
            if recording:
                return ledger.answer_and_verdict(engine, request, options, index)
            return ledger.candidates_answer(engine, request, options, index), None
        result = ledger.find_candidates(engine, request, options, index)
        body = {
            "allocation_requests": _requests(result.allocation_requests, version),
            "provider_summaries": result.provider_summaries,
        }
        verdict = None
        if recording and not result.allocation_requests:  # (read again: rare, and old)
            verdict = ledger.verdict_or_none(engine, request, options, index)
        return orjson.dumps(_FIT(tuple(version))(body)), verdict

    def _note(self, req: falcon.Request, verdict: dict[str, Any]) -> None:
        """Keep the failed search (written off this request's path)."""
        assert self.service.failures is not None
        identity = getattr(req.context, "identity", None)
        self.service.failures.note(
            FailureNote(
                created_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
                request_id=req.context.request_id,
                global_request_id=req.context.global_request_id,
                user_id=identity.user_id if identity else None,
                project_id=identity.project_id if identity else None,
                microversion=".".join(map(str, req.context.version)),
                query=req.query_string,
                reason=verdict["dominant"],
                verdict=verdict,
            )
        )


def _requests(found: list[dict[str, Any]], version: tuple[int, int]) -> list[dict[str, Any]]:
    """Before 1.12 each request's allocations are a list (the rest of the shape is
    the answer row's: `_FIT`)."""
    if version >= DICT_ALLOCATIONS:
        return found
    return [
        {
            "allocations": [
                {"resource_provider": {"uuid": uuid}, "resources": alloc["resources"]}
                for uuid, alloc in r["allocations"].items()
            ]
        }
        for r in found
    ]


class Why:
    """GET /tally/v1/allocation_candidates/why?<the query of /allocation_candidates>:
    each constraint of the query, how many provider trees it rules out on its own,
    and the closest misses (`ledger.candidates.why`). Tally's own API, not
    microversioned: the query is read as the newest microversion reads it."""

    POLICIES = {"GET": "tally:allocation_candidates:why"}
    PATH = WHY_PATH

    def __init__(self, service: Service) -> None:
        self.service = service
        self.options = search_options(service)
        self.index = service.index()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = parse_query(read_query(req), MAX_VERSION)
        with memory.gc_paused():
            resp.media = ledger.explain(self.service.engine, request, self.options, self.index)
