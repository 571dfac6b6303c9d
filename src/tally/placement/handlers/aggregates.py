"""/resource_providers/{uuid}/aggregates (from microversion 1.1).

Before 1.19 the PUT body is a bare list of uuids and the provider generation is
neither checked nor moved; from 1.19 the body and the answer carry
`resource_provider_generation`, which the PUT checks and bumps.
"""

from __future__ import annotations

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import answer, cache_headers, checked_body, read_json, since
from tally.placement.ledger import aggregates as ledger
from tally.placement.schemas.aggregates import GENERATION_VERSION


def _send(req: falcon.Request, resp: falcon.Response, found: ledger.ProviderAggregates) -> None:
    resp.media = answer(
        req, {"aggregates": found.aggregates, "resource_provider_generation": found.generation}
    )
    # Associations carry no meaningful time of their own: last-modified is now.
    cache_headers(req, resp)


class ProviderAggregates:
    POLICIES = {
        "GET": "placement:resource_providers:aggregates:list",
        "PUT": "placement:resource_providers:aggregates:update",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.1")
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        _send(req, resp, ledger.provider_aggregates(self.service.engine, uuid))

    @since("1.1")
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        body = read_json(req)  # validated once the provider is known (404 first)
        with_generation = req.context.version >= GENERATION_VERSION

        def wanted() -> ledger.Wanted:
            data = checked_body(req, body)
            if with_generation:
                return data["aggregates"], data["resource_provider_generation"]
            return data, None

        found = ledger.set_provider_aggregates(
            self.service.engine, uuid, wanted, bump=with_generation
        )
        _send(req, resp, found)
