"""Handlers of what if: /tally/v1/sandboxes (issue 41; admin only, policies
`tally:sandboxes:*`; schemas in tally.placement.schemas.sandboxes). Reads inside a
sandbox answer with the code of the same reads outside (`ledger.sandbox`)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import falcon
import orjson

from tally import memory
from tally.placement.candidate_query import parse_query
from tally.placement.context import Service
from tally.placement.handlers.candidates import search_options
from tally.placement.handlers.common import checked_path, read_body, read_query
from tally.placement.ledger import inventory
from tally.placement.ledger import sandbox as ledger
from tally.placement.microversion import MAX_VERSION
from tally.placement.schemas import sandboxes as schemas


def sandboxes_of(service: Service) -> ledger.Sandboxes:
    """The app's sandboxes, searched and guarded as its other routes are."""
    settings = service.settings
    return ledger.Sandboxes(
        engine=service.engine,
        index=service.index(),
        kept=service.sandboxes,
        options=search_options(service),
        rules=inventory.Rules(reserved_may_equal_total=True, over_capacity=settings.over_capacity),
        ttl_seconds=settings.sandbox_ttl_seconds,
        max_mb=settings.sandbox_max_mb,
        retries=settings.allocation_conflict_retry_count,
    )


class _Resource:
    def __init__(self, service: Service) -> None:
        self.sandboxes = sandboxes_of(service)


class Sandboxes(_Resource):
    """/tally/v1/sandboxes: those not expired, newest first; POST a new, empty one (201)."""

    POLICIES = {"GET": "tally:sandboxes:list", "POST": "tally:sandboxes:create"}
    PATH = schemas.PATH

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        read_query(req)
        resp.media = self.sandboxes.listing()

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req) if req.content_length else {}
        resp.media = self.sandboxes.create(body.get("ttl_seconds"))
        resp.status = falcon.HTTP_201


class Sandbox(_Resource):
    """/tally/v1/sandboxes/{sandbox}: read or delete it."""

    POLICIES = {"GET": "tally:sandboxes:show", "DELETE": "tally:sandboxes:delete"}
    PATH = schemas.ITEM

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        read_query(req)
        resp.media = self.sandboxes.show(sandbox)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        self.sandboxes.delete(sandbox)
        resp.status = falcon.HTTP_204


class Changes(_Resource):
    """POST .../changes: apply changes in order; each step's verdict."""

    POLICIES = {"POST": "tally:sandboxes:change"}
    PATH = schemas.CHANGES

    def on_post(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        changes = [_change(c) for c in read_body(req)["changes"]]
        with memory.gc_paused():
            resp.media = self.sandboxes.change(sandbox, changes)


class Diff(_Resource):
    """GET .../diff: per provider before -> after, and the steps refused."""

    POLICIES = {"GET": "tally:sandboxes:show"}
    PATH = schemas.DIFF

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        read_query(req)
        resp.media = self.sandboxes.diff(sandbox)


class Commit(_Resource):
    """POST .../commit: every applied step in one transaction, or 409 naming what moved."""

    POLICIES = {"POST": "tally:sandboxes:commit"}
    PATH = schemas.COMMIT

    def on_post(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        resp.media = self.sandboxes.commit(sandbox)


class Candidates(_Resource):
    """GET .../allocation_candidates: as GET /allocation_candidates at the newest
    microversion, over the sandbox."""

    POLICIES = {"GET": "tally:sandboxes:read"}
    PATH = schemas.CANDIDATES

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        request = parse_query(read_query(req), MAX_VERSION)
        with memory.gc_paused():
            resp.data = self.sandboxes.candidates(sandbox, request)
        resp.content_type = falcon.MEDIA_JSON


class Why(_Resource):
    """GET .../allocation_candidates/why: the verdict over the sandbox."""

    POLICIES = {"GET": "tally:sandboxes:read"}
    PATH = schemas.WHY

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        request = parse_query(read_query(req), MAX_VERSION)
        with memory.gc_paused():
            resp.media = self.sandboxes.why(sandbox, request)


class Usages(_Resource):
    """GET .../resource_providers/{uuid}/usages over the sandbox."""

    POLICIES = {"GET": "tally:sandboxes:read"}
    PATH = schemas.USAGES

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str, uuid: str) -> None:
        checked_path(req, sandbox=sandbox, uuid=uuid)
        read_query(req)
        resp.media = self.sandboxes.usages(sandbox, uuid)


class Amounts(_Resource):
    """GET .../amounts: as GET /tally/v1/amounts, over the sandbox."""

    POLICIES = {"GET": "tally:sandboxes:read"}
    PATH = schemas.AMOUNTS

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        checked_path(req, sandbox=sandbox)
        read_query(req)
        resp.data = orjson.dumps(self.sandboxes.amounts(sandbox))
        resp.content_type = falcon.MEDIA_JSON


_INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def _change(body: dict[str, Any]) -> ledger.Change:
    """One change of the body (its shape checked by the schema) as the ledger takes it."""
    kind = body["kind"]
    change = ledger.Change(
        kind,
        consumer=body.get("consumer"),
        to=body.get("to"),
        resources=body.get("resources"),
        count=body.get("count", 1),
        consumers=body.get("consumers", []),
        provider=body.get("provider"),
        resource_class=body.get("resource_class"),
        amounts={k: body[k] for k in _INVENTORY_FIELDS if k in body},
        tree=body.get("tree", False),
        name=body.get("name"),
        parent=body.get("parent"),
        inventories=body.get("inventories", {}),
        traits=body.get("traits", []),
        template=body.get("template"),
    )
    for name in ("project_id", "user_id", "consumer_type"):
        if name in body:
            setattr(change, name, body[name])
    if kind == "boot":
        query = urllib.parse.parse_qs(body["query"], keep_blank_values=True)
        change.request = parse_query(query, MAX_VERSION)
    return change
