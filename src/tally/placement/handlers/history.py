"""Handler of Tally's claim history: GET /tally/v1/history.

Tally's own API, outside Placement's namespace (so no Placement client takes it for
part of that API, and no future Placement path can collide with it); admin only
(policy `tally:history:list`). Not microversioned: an `OpenStack-API-Version` header
only picks the shape of an error body (its `code` from 1.23), as everywhere.
"""

from __future__ import annotations

from typing import Any

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import read_query, single
from tally.placement.ledger import history_records as ledger
from tally.placement.schemas import history as schemas

PATH = schemas.PATH


class History:
    """/tally/v1/history?consumer=&provider=&since=&until=&limit=&marker="""

    POLICIES = {"GET": "tally:history:list"}

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The changes of allocations, inventories, providers, traits and aggregates,
        newest first, each with the request that made it: `consumer` and `provider`
        (uuids) filter, `since` (inclusive) and `until` (exclusive) bound the time
        (ISO 8601; UTC without an offset), `limit` rows (default 100, at most 1000)
        older than `marker` (the `next_marker` of the page before, null on the last)."""
        params = read_query(req)  # validated: only known names, each value its last
        given = {name: single(params, name) for name in params}
        limit = min(int(given.get("limit", schemas.DEFAULT_LIMIT)), schemas.MAX_LIMIT)
        wanted = ledger.Filter(
            consumer=given.get("consumer"),
            provider=given.get("provider"),
            since=schemas.instant(given, "since"),
            until=schemas.instant(given, "until"),
            limit=limit,
            marker=int(given["marker"]) if "marker" in given else None,
        )
        found = ledger.entries(self.service.engine, wanted)
        resp.media = {
            "history": [view(entry) for entry in found],
            "next_marker": str(found[-1].id) if len(found) == limit else None,
        }


def view(entry: ledger.Entry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "time": entry.time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "action": entry.action,
        "request_id": entry.request_id,
        "global_request_id": entry.global_request_id,
        "user_id": entry.user_id,
        "project_id": entry.project_id,
        "consumer": entry.consumer,
        "consumer_project_id": entry.consumer_project_id,
        "consumer_user_id": entry.consumer_user_id,
        "consumer_type": entry.consumer_type,
        "consumer_generation": entry.consumer_generation,
        "provider": entry.provider,
        "provider_generation": entry.provider_generation,
        "resource_class": entry.resource_class,
        "before": entry.before,
        "after": entry.after,
        "detail": entry.detail,
    }
