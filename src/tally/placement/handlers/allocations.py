"""Handlers of allocations: POST /allocations (many consumers at once, 1.13),
/allocations/{consumer_uuid} (GET, PUT, DELETE) and
GET /resource_providers/{uuid}/allocations.

Version switches: list-form PUT body before 1.12, dict form from 1.12;
project_id/user_id required from 1.8 and shown from 1.12; consumer
generations from 1.28 (and `{}` removes a consumer's allocations);
mappings accepted from 1.34; consumer_type from 1.38;
`last-modified`/`cache-control` from 1.15.
"""

from __future__ import annotations

from typing import Any

import falcon

from tally import memory
from tally.amounts import held
from tally.placement.context import Service
from tally.placement.error_types import BadRequest
from tally.placement.handlers.common import (
    answer,
    cache_headers,
    is_uuid_like,
    read_body,
    since,
)
from tally.placement.ledger import allocations as ledger
from tally.placement.ledger.consumers import INCOMPLETE_ID
from tally.placement.schemas.allocations import CONSUMER_GENERATIONS


def _write(consumer_uuid: str, body: dict[str, Any], version: Any) -> ledger.ConsumerWrite:
    """A ledger write from one consumer's validated body."""
    allocations = body["allocations"]
    if isinstance(allocations, list):  # before 1.12; a repeated provider: the last wins
        allocations = {a["resource_provider"]["uuid"]: a for a in allocations}
    return ledger.ConsumerWrite(
        uuid=consumer_uuid,
        project_id=body.get("project_id", INCOMPLETE_ID),
        user_id=body.get("user_id", INCOMPLETE_ID),
        allocations=held(allocations),
        check_generation=version >= CONSUMER_GENERATIONS,
        generation=body.get("consumer_generation"),
        consumer_type=body.get("consumer_type"),
    )


class Allocations:
    """/allocations: POST only, from 1.13."""

    POLICIES = {"POST": "placement:allocations:manage"}

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.13")
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Replace the allocations of several consumers in one transaction."""
        version = req.context.version
        with memory.gc_paused():  # a batch of thousands of consumers: no cycles
            data = read_body(req)
            writes = [_write(consumer, body, version) for consumer, body in data.items()]
            ledger.replace(
                self.service.engine, writes, self.service.settings.allocation_conflict_retry_count
            )
        resp.status = falcon.HTTP_204


class ConsumerAllocations:
    """/allocations/{consumer_uuid}"""

    POLICIES = {
        "GET": "placement:allocations:list",
        "PUT": "placement:allocations:update",
        "DELETE": "placement:allocations:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
        """Any string names a consumer; an unknown one simply holds nothing."""
        found = ledger.for_consumer(self.service.engine, consumer_uuid)
        body: dict[str, Any] = {"allocations": found.allocations}
        if found.allocations:  # the owner is shown only for a consumer holding something
            body["project_id"] = found.project_id
            body["user_id"] = found.user_id
            body["consumer_generation"] = found.generation
            body["consumer_type"] = found.consumer_type
        resp.media = answer(req, body)
        cache_headers(req, resp, found.last_modified)

    def on_put(self, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
        if not is_uuid_like(consumer_uuid):  # (the path's uuid is canonical: InputDomain)
            raise BadRequest(f"Malformed consumer_uuid: {consumer_uuid}")
        version = req.context.version
        data = read_body(req)
        ledger.replace(
            self.service.engine,
            [_write(consumer_uuid, data, version)],
            self.service.settings.allocation_conflict_retry_count,
        )
        resp.status = falcon.HTTP_204

    def on_delete(self, req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
        ledger.delete_consumer(self.service.engine, consumer_uuid)
        resp.status = falcon.HTTP_204


class ProviderAllocations:
    """/resource_providers/{uuid}/allocations: GET only."""

    POLICIES = {"GET": "placement:resource_providers:allocations:list"}

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        found = ledger.for_provider(self.service.engine, uuid)
        resp.media = answer(
            req,
            {"allocations": found.allocations, "resource_provider_generation": found.generation},
        )
        cache_headers(req, resp, found.last_modified)
