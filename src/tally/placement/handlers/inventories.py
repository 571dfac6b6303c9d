"""Handlers of /resource_providers/{uuid}/inventories (the whole inventory of a
provider) and /resource_providers/{uuid}/inventories/{resource_class} (one class).

Version switches: DELETE of the collection from 1.5 (405 before);
`last-modified`/`cache-control` from 1.15; reserved may equal total from 1.26.
"""

from __future__ import annotations

from typing import Any

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import CACHE_HEADERS, cache_headers, read_body, since
from tally.placement.ledger import inventory as ledger
from tally.placement.schemas.inventories import RESERVED_MAY_EQUAL_TOTAL


def _rules(req: falcon.Request, service: Service) -> ledger.Rules:
    return ledger.Rules(
        reserved_may_equal_total=req.context.version >= RESERVED_MAY_EQUAL_TOTAL,
        over_capacity=service.settings.over_capacity,
    )


def _record(resource_class: str, body: dict[str, Any]) -> ledger.Record:
    """A record from a validated body; absent fields take Placement's defaults."""
    return ledger.Record(resource_class, **{k: body[k] for k in ledger.FIELDS if k in body})


def _collection(found: ledger.ProviderInventory) -> dict[str, Any]:
    return {
        "resource_provider_generation": found.generation,
        "inventories": {rc: record.amounts() for rc, record in found.records.items()},
    }


def _one(generation: int, record: ledger.Record) -> dict[str, Any]:
    return {**record.amounts(), "resource_provider_generation": generation}


def _cache(req: falcon.Request, resp: falcon.Response, stamp: Any) -> None:
    """As upstream, an empty inventory has no `last-modified` (only `cache-control`)."""
    if stamp is not None:
        cache_headers(req, resp, stamp)
    elif req.context.version >= CACHE_HEADERS:
        resp.set_header("cache-control", "no-cache")


class Inventories:
    """/resource_providers/{uuid}/inventories"""

    POLICIES = {
        "GET": "placement:resource_providers:inventories:list",
        "PUT": "placement:resource_providers:inventories:update",
        "POST": "placement:resource_providers:inventories:create",
        "DELETE": "placement:resource_providers:inventories:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        found = ledger.get_inventories(self.service.engine, uuid)
        resp.media = _collection(found)
        _cache(req, resp, found.last_modified)

    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        """Replace the whole inventory; the body names the generation it read."""
        data = read_body(req)
        records = [_record(rc, body) for rc, body in data["inventories"].items()]
        found = ledger.replace_inventories(
            self.service.engine,
            uuid,
            data["resource_provider_generation"],
            records,
            _rules(req, self.service),
        )
        resp.media = _collection(found)
        _cache(req, resp, found.last_modified)

    def on_post(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        """Add one class; 201 with its location."""
        data = read_body(req)
        rc = data["resource_class"]
        generation, record = ledger.add_inventory(
            self.service.engine, uuid, _record(rc, data), _rules(req, self.service)
        )
        resp.status = falcon.HTTP_201
        resp.location = f"{req.prefix}/resource_providers/{uuid}/inventories/{rc}"
        resp.media = _one(generation, record)
        _cache(req, resp, record.last_modified)

    @since("1.5", status=405)
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        ledger.delete_inventories(self.service.engine, uuid, _rules(req, self.service))
        resp.status = falcon.HTTP_204


class Inventory:
    """/resource_providers/{uuid}/inventories/{resource_class}"""

    POLICIES = {
        "GET": "placement:resource_providers:inventories:show",
        "PUT": "placement:resource_providers:inventories:update",
        "DELETE": "placement:resource_providers:inventories:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
    ) -> None:
        generation, record = ledger.get_inventory(self.service.engine, uuid, resource_class)
        resp.media = _one(generation, record)
        _cache(req, resp, record.last_modified)

    def on_put(
        self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
    ) -> None:
        """Change one class the provider has; the body names the generation it read."""
        data = read_body(req)
        generation, record = ledger.update_inventory(
            self.service.engine,
            uuid,
            data["resource_provider_generation"],
            _record(resource_class, data),
            _rules(req, self.service),
        )
        resp.media = _one(generation, record)
        _cache(req, resp, record.last_modified)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
    ) -> None:
        ledger.delete_inventory(
            self.service.engine, uuid, resource_class, _rules(req, self.service)
        )
        resp.status = falcon.HTTP_204
