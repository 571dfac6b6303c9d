"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import falcon

from tally.placement import queryparams
from tally.placement.context import Service
from tally.placement.handlers.common import (
    cache_headers,
    location,
    query,
    read_json,
    url,
    validate_query,
)
from tally.placement.ledger import providers as ledger
from tally.placement.schemas import providers as schemas

# Links of a provider beyond `self`, with the microversion that added each.
_LINKS = (
    ("inventories", (1, 0)),
    ("usages", (1, 0)),
    ("aggregates", (1, 1)),
    ("traits", (1, 6)),
    ("allocations", (1, 11)),
)
TREES = (1, 14)  # parent/root uuids in bodies, parent_provider_uuid in requests
POST_RETURNS_BODY = (1, 20)
REPARENTING = (1, 37)


def serialize(req: falcon.Request, provider: ledger.Provider) -> dict[str, Any]:
    version = req.context.version
    href = url(req, f"/resource_providers/{provider.uuid}")
    links = [{"rel": "self", "href": href}]
    links += [{"rel": rel, "href": f"{href}/{rel}"} for rel, since in _LINKS if version >= since]
    body: dict[str, Any] = {
        "uuid": provider.uuid,
        "name": provider.name,
        "generation": provider.generation,
        "links": links,
    }
    if version >= TREES:
        body["parent_provider_uuid"] = provider.parent_provider_uuid
        body["root_provider_uuid"] = provider.root_provider_uuid
    return body


def list_filter(req: falcon.Request) -> ledger.ProviderFilter:
    """The filters of `GET /resource_providers` (a repeated single-valued key
    counts with its last value, as upstream)."""
    version = req.context.version
    params = query(req)
    validate_query(params, schemas.for_version(schemas.LIST_QUERY, version))
    last = {key: values[-1] for key, values in params.items()}
    aggregates = queryparams.parse_member_of(params.get("member_of", []), version)
    traits = queryparams.parse_required(params.get("required", []), version)
    resources = last.get("resources")
    return ledger.ProviderFilter(
        name=last.get("name"),
        uuid=last.get("uuid"),
        in_tree=last.get("in_tree"),
        resources=queryparams.parse_resources(resources) if resources is not None else {},
        required_traits=traits.required,
        forbidden_traits=traits.forbidden,
        member_of=aggregates.required,
        forbidden_aggregates=aggregates.forbidden,
    )


class Providers:
    """GET (list, filtered) and POST (create) /resource_providers."""

    POLICIES = {
        "GET": "placement:resource_providers:list",
        "POST": "placement:resource_providers:create",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = ledger.list_providers(self.service.engine, list_filter(req))
        resp.media = {"resource_providers": [serialize(req, p) for p in found]}
        cache_headers(req, resp, *(p.last_modified for p in found))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.version
        data = read_json(req, schemas.for_version(schemas.POST, version))
        # (read_json gives uuids in canonical form: dashless or upper-case ones too)
        rp_uuid = data.get("uuid") or str(uuidlib.uuid4())
        parent = data.get("parent_provider_uuid")
        created = ledger.create_provider(
            self.service.engine, name=data["name"], uuid=rp_uuid, parent_uuid=parent
        )
        resp.location = location(req, f"/resource_providers/{created.uuid}")
        if version >= POST_RETURNS_BODY:
            resp.media = serialize(req, created)
            cache_headers(req, resp, created.last_modified)
        else:
            resp.status = falcon.HTTP_201
            resp.content_type = None


class Provider:
    """GET, PUT (rename / re-parent) and DELETE /resource_providers/{uuid}."""

    POLICIES = {
        "GET": "placement:resource_providers:show",
        "PUT": "placement:resource_providers:update",
        "DELETE": "placement:resource_providers:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        provider = ledger.get_provider(self.service.engine, uuid)
        resp.media = serialize(req, provider)
        cache_headers(req, resp, provider.last_modified)

    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        version = req.context.version
        data = read_json(req, schemas.for_version(schemas.PUT, version))
        updated = ledger.update_provider(
            self.service.engine,
            uuid,
            name=data["name"],
            parent_uuid=data.get("parent_provider_uuid", ledger.UNSET),
            allow_reparenting=version >= REPARENTING,
        )
        resp.media = serialize(req, updated)
        cache_headers(req, resp, updated.last_modified)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        ledger.delete_provider(self.service.engine, uuid)
        resp.status = falcon.HTTP_204
