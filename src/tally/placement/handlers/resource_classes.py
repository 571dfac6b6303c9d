"""/resource_classes and /resource_classes/{name} (from microversion 1.2).

PUT changes meaning at 1.7: before, it renames a custom class (JSON body);
from 1.7 it has no body and creates the class in the path unless it exists.
"""

from __future__ import annotations

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import (
    cache_headers,
    checked_path,
    location,
    read_body,
    since,
    url,
    utcnow,
)
from tally.placement.ledger import resource_classes as ledger
from tally.placement.schemas.resource_classes import BODILESS_PUT


def _link(req: falcon.Request, name: str) -> str:
    return url(req, f"/resource_classes/{name}")


def _show(req: falcon.Request, found: ledger.ResourceClass) -> dict:
    return {"name": found.name, "links": [{"rel": "self", "href": _link(req, found.name)}]}


class ResourceClasses:
    POLICIES = {
        "GET": "placement:resource_classes:list",
        "POST": "placement:resource_classes:create",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.2")
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        classes = ledger.list_classes(self.service.engine)
        resp.media = {"resource_classes": [_show(req, found) for found in classes]}
        # A class never written by a client (the standard ones) counts as new.
        cache_headers(req, resp, *(found.modified or utcnow() for found in classes))

    @since("1.2")
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req)
        created, _ = ledger.ensure_class(self.service.engine, body["name"], must_be_new=True)
        resp.status = falcon.HTTP_201
        resp.location = location(req, f"/resource_classes/{created.name}")


class ResourceClass:
    POLICIES = {
        "GET": "placement:resource_classes:show",
        "PUT": "placement:resource_classes:update",
        "DELETE": "placement:resource_classes:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.2")
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        found = ledger.get_class(self.service.engine, name)
        resp.media = _show(req, found)
        cache_headers(req, resp, found.modified)

    @since("1.2")
    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if req.context.version < BODILESS_PUT:
            body = read_body(req)
            resp.media = _show(req, ledger.rename_class(self.service.engine, name, body["name"]))
            return
        checked_path(req, name=name)
        found, created = ledger.ensure_class(self.service.engine, name, must_be_new=False)
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204
        resp.location = location(req, f"/resource_classes/{found.name}")

    @since("1.2")
    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        ledger.delete_class(self.service.engine, name)
        resp.status = falcon.HTTP_204
