"""Handlers of usages: GET /resource_providers/{uuid}/usages and GET /usages (1.9).

Version switches: GET /usages from 1.9; grouping by consumer type, with
`consumer_count`, and the `consumer_type` filter from 1.38;
`last-modified` (always now: usage is a question about the present) and
`cache-control` from 1.15.
"""

from __future__ import annotations

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import cache_headers, read_query, since
from tally.placement.ledger import usages as ledger
from tally.placement.schemas.usages import CONSUMER_TYPES


class ProviderUsages:
    """/resource_providers/{uuid}/usages"""

    POLICIES = {"GET": "placement:resource_providers:usages"}

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        found = ledger.for_provider(self.service.engine, uuid)
        resp.media = {"resource_provider_generation": found.generation, "usages": found.usages}
        cache_headers(req, resp)


class Usages:
    """/usages?project_id=&user_id=[&consumer_type=]"""

    POLICIES = {"GET": "placement:usages"}
    POLICY_TARGET_QUERY = ("project_id",)  # a project reader sees only its own

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.9")
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.version
        params = read_query(req)
        # As upstream, a repeated parameter counts with its last value.
        project_id, user_id, consumer_type = (
            params.get(name, [None])[-1] for name in ("project_id", "user_id", "consumer_type")
        )
        if version >= CONSUMER_TYPES:
            usages = ledger.totals_by_type(self.service.engine, project_id, user_id, consumer_type)
        else:
            usages = ledger.totals(self.service.engine, project_id, user_id)
        resp.media = {"usages": usages}
        cache_headers(req, resp)
