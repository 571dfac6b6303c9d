"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import functools
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

import falcon
import orjson

from tally import memory
from tally.placement import queryparams
from tally.placement.context import Service
from tally.placement.handlers.common import (
    cache_headers,
    location,
    operation,
    read_body,
    read_query,
    url,
)
from tally.placement.ledger import providers as ledger
from tally.placement.schemas.answer_schemas import fitter_of
from tally.placement.schemas.providers import link_rels, provider

REPARENTING = (1, 37)
_Q = '"'
_ESCAPED = bytes(range(0x20)) + b'"\\'  # the characters JSON strings escape


_FIT = fitter_of(provider)  # a provider's answer at a microversion (`schemas.providers`)


@functools.lru_cache(maxsize=64)
def _has_trees(version: tuple[int, int]) -> bool:
    """Whether a provider's answer at `version` shows its tree (parent and root)."""
    return "root_provider_uuid" in provider(version)["properties"]


def serializer(req: falcon.Request) -> Callable[[ledger.Provider], dict[str, Any]]:
    """A function shaping one provider for this request's microversion (what
    depends on the request is worked out once: a listing shapes thousands)."""
    base = url(req, "/resource_providers/")
    version = tuple(req.context.version)
    rels = link_rels(version)
    fit = _FIT(version)

    def shape(found: ledger.Provider) -> dict[str, Any]:
        href = base + found.uuid
        return fit(
            {
                "uuid": found.uuid,
                "name": found.name,
                "generation": found.generation,
                "links": [{"rel": "self", "href": href}]
                + [{"rel": rel, "href": f"{href}/{rel}"} for rel in rels],
                "parent_provider_uuid": found.parent_provider_uuid,
                "root_provider_uuid": found.root_provider_uuid,
            }
        )

    return shape


def serialize(req: falcon.Request, provider: ledger.Provider) -> dict[str, Any]:
    return serializer(req)(provider)


class ListingWriter:
    """Writes one provider of `GET /resource_providers` as JSON for this
    request (`ledger.PartWriter`): the bytes `orjson.dumps(serialize(req, p))`
    gives (tests/api/test_provider_listing.py compares them for every
    microversion), written straight from the row. Its `key` is the link shape:
    the parts a worker keeps are kept per key."""

    def __init__(self, req: falcon.Request) -> None:
        version = req.context.version
        base = _json_text(url(req, "/resource_providers/"))
        self.links = ",".join(
            [f'{{"rel":"self","href":"{base}{_MARK}"}}']
            + [f'{{"rel":"{rel}","href":"{base}{_MARK}/{rel}"}}' for rel in link_rels(version)]
        )
        self.trees = _has_trees(version)
        self.key = (self.links, self.trees)

    def __call__(self, row: tuple) -> bytes:
        _, u, n, g, p, r, _ = row
        if _needs_escaping(u + n + (p or "") + r):
            u, n, p, r = _json_text(u), _json_text(n), p and _json_text(p), _json_text(r)
        links = self.links.replace(_MARK, u)
        found = f'{{"uuid":"{u}","name":"{n}","generation":{g},"links":[{links}]'
        if self.trees:
            parent = "null" if p is None else _Q + p + _Q
            found += f',"parent_provider_uuid":{parent},"root_provider_uuid":"{r}"'
        return (found + "}").encode()


def listing_body(parts: list[bytes]) -> bytes:
    """The body of `GET /resource_providers` from its providers' parts (the list
    is the caller's to lose: the opening and closing are glued to its first and
    last part, so the only allocation of the body's size is the join's)."""
    if not parts:
        return b'{"resource_providers":[]}'
    parts[0] = b'{"resource_providers":[' + parts[0]
    parts[-1] += b"]}"
    return b",".join(parts)


_MARK = "\0"  # where a link template takes the uuid: a JSON text holds no raw NUL


def _json_text(text: str) -> str:
    """`text` as it stands between the quotes of a JSON string (orjson's escapes)."""
    return orjson.dumps(text).decode()[1:-1]


def _needs_escaping(text: str) -> bool:
    """Whether `text` holds a character JSON escapes (orjson writes any other as
    it is). In UTF-8 those are single bytes, and no byte of a multi-byte
    character is one of them."""
    raw = text.encode()
    return len(raw.translate(None, _ESCAPED)) != len(raw)


def list_filter(req: falcon.Request) -> ledger.ProviderFilter:
    """The filters of `GET /resource_providers` (a repeated single-valued key
    counts with its last value, as upstream)."""
    version = req.context.version
    params = read_query(req)
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
        self.index = service.index()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        wanted = list_filter(req)
        with memory.gc_paused():  # thousands of short-lived tuples and strings, no cycles
            found = ledger.list_provider_parts(
                self.service.engine, wanted, ListingWriter(req), self.index
            )
            resp.data = listing_body(found.parts)
        resp.content_type = falcon.MEDIA_JSON
        cache_headers(req, resp, found.last_modified)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.version
        data = read_body(req)
        # (read_body gives uuids in canonical form: dashless or upper-case ones too)
        rp_uuid = data.get("uuid") or str(uuidlib.uuid4())
        parent = data.get("parent_provider_uuid")
        created = ledger.create_provider(
            self.service.engine, name=data["name"], uuid=rp_uuid, parent_uuid=parent
        )
        resp.location = location(req, f"/resource_providers/{created.uuid}")
        if 200 in operation(req).answers_at(version):  # the provider, from 1.20
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
        data = read_body(req)
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
