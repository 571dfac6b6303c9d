"""Handler of Tally's failed searches: GET /tally/v1/failures.

Every GET /allocation_candidates that found nothing, with who asked and why nothing
fitted (the verdict), as `ledger.failure_records` keeps them. Tally's own API,
outside Placement's namespace, admin only (policy `tally:failures:list`), not
microversioned (as the claim history).
"""

from __future__ import annotations

from typing import Any

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import read_query, single
from tally.placement.ledger import failure_records as ledger
from tally.placement.schemas import failures as schemas

PATH = schemas.PATH


class Failures:
    """/tally/v1/failures?request_id=&since=&until=&resource_class=&trait=&limit=&marker="""

    POLICIES = {"GET": "tally:failures:list"}

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Failed searches, newest first: `request_id` (the request's or the caller's
        global one), `since` (inclusive) and `until` (exclusive, ISO 8601; UTC without
        an offset), `resource_class` and `trait` (named by the query) filter; `limit`
        records (default 100, at most 1000) older than `marker` (the `next_marker` of
        the page before, null on the last)."""
        params = read_query(req)  # validated: only known names, each value its last
        given = {name: single(params, name) for name in params}
        limit = min(int(given.get("limit", schemas.DEFAULT_LIMIT)), schemas.MAX_LIMIT)
        wanted = ledger.FailureFilter(
            request_id=given.get("request_id"),
            since=schemas.instant(given, "since"),
            until=schemas.instant(given, "until"),
            resource_class=given.get("resource_class"),
            trait=given.get("trait"),
            limit=limit,
            marker=int(given["marker"]) if "marker" in given else None,
        )
        found = ledger.entries(self.service.engine, wanted)
        resp.media = {
            "failures": [view(record) for record in found],
            "next_marker": str(found[-1].id) if len(found) == limit else None,
        }


def view(record: ledger.Record) -> dict[str, Any]:
    return {
        "id": record.id,
        "created_at": record.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "request_id": record.request_id,
        "global_request_id": record.global_request_id,
        "user_id": record.user_id,
        "project_id": record.project_id,
        "microversion": record.microversion,
        "query": record.query,
        "reason": record.reason,
        "verdict": record.verdict,
    }
