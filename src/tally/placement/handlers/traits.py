"""/traits, /traits/{name} and /resource_providers/{uuid}/traits (from 1.6)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import falcon

from tally import names
from tally.placement.context import Service
from tally.placement.error_types import BadRequest
from tally.placement.handlers.common import (
    cache_headers,
    location,
    read_body,
    read_query,
    since,
    utcnow,
)
from tally.placement.ledger import traits as ledger


def _list_filters(params: dict[str, list[str]]) -> dict[str, Any]:
    """`name=in:A,B` / `name=startswith:P` and `associated=true|false`."""
    filters: dict[str, Any] = {}
    if "name" in params:
        value = params["name"][-1]
        op, colon, operand = value.partition(":")
        if not colon or op not in ("in", "startswith"):
            raise BadRequest(
                "Badly formatted name parameter. Expected name query string parameter in "
                f'form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "{value}"'
            )
        if op == "in":
            filters["names"] = operand.split(",")
        else:
            filters["prefix"] = operand
    if "associated" in params:
        flag = params["associated"][-1].lower()
        if flag not in ("true", "false"):
            raise BadRequest('The query parameter "associated" only accepts "true" or "false"')
        filters["associated"] = flag == "true"
    return filters


def _stamps(traits: list[ledger.Trait]) -> list[dt.datetime]:
    """Last-modified candidates: a trait never written by a client counts as new."""
    return [trait.modified or utcnow() for trait in traits]


def _provider_body(found: ledger.ProviderTraits) -> dict:
    return {
        "traits": [trait.name for trait in found.traits],
        "resource_provider_generation": found.generation,
    }


class Traits:
    POLICIES = {"GET": "placement:traits:list"}

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.6")
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        params = read_query(req)
        traits = ledger.list_traits(self.service.engine, **_list_filters(params))
        resp.media = {"traits": [trait.name for trait in traits]}
        cache_headers(req, resp, *_stamps(traits))


class Trait:
    POLICIES = {
        "GET": "placement:traits:show",
        "PUT": "placement:traits:update",
        "DELETE": "placement:traits:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.6")
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        trait = ledger.get_trait(self.service.engine, name)
        resp.status = falcon.HTTP_204
        cache_headers(req, resp, trait.modified)

    @since("1.6")
    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if not names.is_custom_trait_name(name):
            raise BadRequest(
                "The trait is invalid. A valid trait must be no longer than 255 characters, "
                'start with the prefix "CUSTOM_" and use following characters: '
                '"A"-"Z", "0"-"9" and "_"'
            )
        trait, created = ledger.ensure_trait(self.service.engine, name)
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204
        resp.location = location(req, f"/traits/{trait.name}")
        cache_headers(req, resp, trait.created_at)

    @since("1.6")
    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        ledger.delete_trait(self.service.engine, name)
        resp.status = falcon.HTTP_204


class ProviderTraits:
    POLICIES = {
        "GET": "placement:resource_providers:traits:list",
        "PUT": "placement:resource_providers:traits:update",
        "DELETE": "placement:resource_providers:traits:delete",
    }

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.6")
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        found = ledger.provider_traits(self.service.engine, uuid)
        resp.media = _provider_body(found)
        cache_headers(req, resp, *_stamps(found.traits))

    @since("1.6")
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        body = read_body(req)
        found = ledger.set_provider_traits(
            self.service.engine, uuid, body["traits"], body["resource_provider_generation"]
        )
        resp.media = _provider_body(found)
        cache_headers(req, resp, *_stamps(found.traits))

    @since("1.6")
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        ledger.set_provider_traits(self.service.engine, uuid, [], None)
        resp.status = falcon.HTTP_204
