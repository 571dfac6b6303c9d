"""The Placement API as an OpenAPI 3.1 document, one per microversion:
`GET /openapi.json?microversion=1.x` (default: the latest), open without a token.

Generated, not written: the paths are those of the route table (`app.ROUTES`);
an operation is a resource's `on_<method>` responder that answers at that
microversion (its `since` gate); the request bodies and query strings are the
JSON schemas of `placement.schemas` the handlers validate with, picked for the
version as the handlers pick them. What the handlers do not hold as data is
said once, in `OPERATIONS`: which schema each operation reads, its success
answers (status codes and a loose shape of the body, from the same version
switches the handlers use: `placement.answers`) and any path parameter
narrower than a string.
Every operation may answer the 4xx errors `_errors` lists, each with
Placement's error body (`components/schemas/Error`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import http
import inspect
import re
from collections.abc import Callable
from typing import Any

import falcon

from tally.placement import errors as codes
from tally.placement import microversion, middleware
from tally.placement import response_shapes as answers
from tally.placement.handlers import providers, resource_classes
from tally.placement.handlers.common import query, single, validate_query
from tally.placement.ledger.errors import BadRequest
from tally.placement.schemas import aggregates as aggregate_schemas
from tally.placement.schemas import allocations as allocation_schemas
from tally.placement.schemas import candidates as candidate_schemas
from tally.placement.schemas import history as history_schemas
from tally.placement.schemas import inventories as inventory_schemas
from tally.placement.schemas import providers as provider_schemas
from tally.placement.schemas import reshaper as reshaper_schemas
from tally.placement.schemas import resource_classes as class_schemas
from tally.placement.schemas import traits as trait_schemas

PATH = "/openapi.json"
OPENAPI_VERSION = "3.1.0"
HEADER = "OpenStack-API-Version"
# Answered without a token: the version document, and this one.
OPEN_PATHS = middleware.UNAUTHENTICATED_PATHS | {PATH}

Version = tuple[int, int]
Schema = dict[str, Any]
Routes = tuple[tuple[str, Any], ...]

_STR: Schema = {"type": "string"}
_UUID: Schema = {"type": "string", "format": "uuid"}
# A path parameter is one segment: an encoded '/' (%2F) is decoded before routing.
_TEXT: Schema = {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}

# ---------------------------------------------------------------- the operations


@dataclasses.dataclass(frozen=True)
class Operation:
    """What an operation reads and answers at a microversion `v`.

    ok:    v -> {success status: body schema, or None for an empty answer}
    body:  v -> the JSON schema of the request body (None: it takes none)
    query: v -> the JSON schema of the query string (None: it reads none)
    path:  path parameters narrower than a string (default: a string; `uuid`
           and `consumer_uuid` a uuid)
    """

    ok: Callable[[Version], dict[int, Schema | None]]
    body: Callable[[Version], Schema | None] = lambda v: None
    query: Callable[[Version], Schema | None] = lambda v: None
    path: dict[str, Schema] = dataclasses.field(default_factory=dict)


def _answers(answers: dict[int, Schema | None]) -> Callable[[Version], dict[int, Schema | None]]:
    return lambda v: answers


def _constant(schema: Schema) -> Callable[[Version], Schema]:
    return lambda v: schema


_NO_CONTENT = _answers({204: None})
_CLASS_NAME = class_schemas.NAME_BODY["properties"]["name"]
_RESOURCE_CLASS = {"type": "string", "pattern": inventory_schemas.RESOURCE_CLASS_PATTERN}

# The query string of this document.
QUERY: Schema = {
    "type": "object",
    "properties": {
        "microversion": {
            "type": "string",
            "enum": [*microversion.VERSIONS, "latest"],
            "default": microversion.VERSIONS[-1],
        }
    },
    "additionalProperties": False,
}

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("Home", "GET"): Operation(_answers({200: answers.VERSIONS})),
    ("Providers", "GET"): Operation(
        lambda v: {200: answers.provider_list(v)},
        query=lambda v: provider_schemas.for_version(provider_schemas.LIST_QUERY, v),
    ),
    ("Providers", "POST"): Operation(
        lambda v: {200: answers.provider(v)} if v >= providers.POST_RETURNS_BODY else {201: None},
        body=lambda v: provider_schemas.for_version(provider_schemas.POST, v),
    ),
    ("Provider", "GET"): Operation(lambda v: {200: answers.provider(v)}),
    ("Provider", "PUT"): Operation(
        lambda v: {200: answers.provider(v)},
        body=lambda v: provider_schemas.for_version(provider_schemas.PUT, v),
    ),
    ("Provider", "DELETE"): Operation(_NO_CONTENT),
    ("ResourceClasses", "GET"): Operation(_answers({200: answers.RESOURCE_CLASSES})),
    ("ResourceClasses", "POST"): Operation(
        _answers({201: None}), body=_constant(class_schemas.NAME_BODY)
    ),
    ("ResourceClass", "GET"): Operation(_answers({200: answers.RESOURCE_CLASS})),
    ("ResourceClass", "PUT"): Operation(
        lambda v: (
            {200: answers.RESOURCE_CLASS}
            if v < resource_classes.BODILESS_PUT
            else {201: None, 204: None}
        ),
        body=lambda v: class_schemas.NAME_BODY if v < resource_classes.BODILESS_PUT else None,
        path={"name": _CLASS_NAME},
    ),
    ("ResourceClass", "DELETE"): Operation(_NO_CONTENT),
    ("Inventories", "GET"): Operation(_answers({200: answers.INVENTORIES})),
    ("Inventories", "PUT"): Operation(
        _answers({200: answers.INVENTORIES}), body=_constant(inventory_schemas.PUT_INVENTORIES)
    ),
    ("Inventories", "POST"): Operation(
        _answers({201: answers.INVENTORY}), body=_constant(inventory_schemas.POST_INVENTORY)
    ),
    ("Inventories", "DELETE"): Operation(_NO_CONTENT),
    ("Inventory", "GET"): Operation(
        _answers({200: answers.INVENTORY}), path={"resource_class": _RESOURCE_CLASS}
    ),
    ("Inventory", "PUT"): Operation(
        _answers({200: answers.INVENTORY}),
        body=_constant(inventory_schemas.PUT_INVENTORY),
        path={"resource_class": _RESOURCE_CLASS},
    ),
    ("Inventory", "DELETE"): Operation(_NO_CONTENT, path={"resource_class": _RESOURCE_CLASS}),
    ("ProviderAggregates", "GET"): Operation(lambda v: {200: answers.aggregates(v)}),
    ("ProviderAggregates", "PUT"): Operation(
        lambda v: {200: answers.aggregates(v)}, body=aggregate_schemas.put_body
    ),
    ("Traits", "GET"): Operation(
        _answers({200: answers.TRAITS}), query=_constant(trait_schemas.LIST_QUERY)
    ),
    ("Trait", "GET"): Operation(_NO_CONTENT),
    ("Trait", "PUT"): Operation(
        _answers({201: None, 204: None}), path={"name": trait_schemas.CUSTOM_TRAIT_NAME}
    ),
    ("Trait", "DELETE"): Operation(_NO_CONTENT),
    ("ProviderTraits", "GET"): Operation(_answers({200: answers.PROVIDER_TRAITS})),
    ("ProviderTraits", "PUT"): Operation(
        _answers({200: answers.PROVIDER_TRAITS}), body=_constant(trait_schemas.PROVIDER_TRAITS_BODY)
    ),
    ("ProviderTraits", "DELETE"): Operation(_NO_CONTENT),
    ("Allocations", "POST"): Operation(
        _NO_CONTENT,
        body=lambda v: allocation_schemas.pick(allocation_schemas.POST_SCHEMAS, v),
    ),
    # Any string names a consumer (an unknown one holds nothing); a write needs a uuid.
    ("ConsumerAllocations", "GET"): Operation(
        lambda v: {200: answers.consumer_allocations(v)}, path={"consumer_uuid": _TEXT}
    ),
    ("ConsumerAllocations", "PUT"): Operation(
        _NO_CONTENT,
        body=lambda v: allocation_schemas.pick(allocation_schemas.PUT_SCHEMAS, v),
    ),
    ("ConsumerAllocations", "DELETE"): Operation(_NO_CONTENT, path={"consumer_uuid": _TEXT}),
    ("ProviderAllocations", "GET"): Operation(lambda v: {200: answers.provider_allocations(v)}),
    ("ProviderUsages", "GET"): Operation(_answers({200: answers.PROVIDER_USAGES})),
    ("Usages", "GET"): Operation(
        lambda v: {200: answers.usages(v)},
        query=lambda v: allocation_schemas.pick(allocation_schemas.USAGES_QUERY_SCHEMAS, v),
    ),
    ("AllocationCandidates", "GET"): Operation(
        lambda v: {200: answers.allocation_candidates(v)},
        query=lambda v: candidate_schemas.for_version(candidate_schemas.GET_QUERY, v),
    ),
    ("Reshaper", "POST"): Operation(_NO_CONTENT, body=reshaper_schemas.pick),
    ("Document", "GET"): Operation(_answers({200: answers.OPENAPI}), query=_constant(QUERY)),
    # Tally's own API, outside Placement's namespace (the same at every microversion).
    ("History", "GET"): Operation(
        _answers({200: answers.HISTORY}), query=_constant(history_schemas.QUERY)
    ),
}
# (Keyed by the resource's class name, so the table reads like the route table;
# `document` fails with a KeyError on a responder it does not describe.)

# ---------------------------------------------------------------- errors

_ERROR: Schema = {
    "type": "object",
    "required": ["errors"],
    "properties": {
        "errors": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["status", "title", "detail", "request_id"],
                "properties": {
                    "status": {"type": "integer", "minimum": 400, "maximum": 599},
                    "title": _STR,
                    "detail": _STR,
                    "code": {
                        **_STR,
                        "description": "From microversion 1.23 (absent when the request's "
                        "microversion could not be read): one of the documented codes.",
                        "enum": list(codes.ALL),
                    },
                    "request_id": {"type": "string", "pattern": "^req-"},
                },
            },
        }
    },
}
_ERROR_CONTENT = {
    "application/json": {"schema": {"$ref": "#/components/schemas/Error"}},
    # As upstream (webob), an Accept preferring html or plain text gets the error so.
    "text/html": {"schema": _STR},
    "text/plain": {"schema": _STR},
}
_WRITES = ("PUT", "POST", "DELETE")


def _errors(path: str, method: str, takes_body: bool, open_: bool) -> list[int]:
    """The 4xx (and 503) answers an operation may give, as the middleware and the
    ledger make them: 400 for a bad microversion header or input, 406 for one out
    of range (or an Accept without JSON), 414 for a long query string."""
    found = [400, 406, 414]
    if not open_:
        found += [401, 403, 503]  # 503: the database is unavailable (retry-after)
    if "{" in path:
        found.append(404)
    if method in _WRITES:
        found.append(409)
    if method in ("PUT", "POST"):
        found.append(413)
    if takes_body:
        found.append(415)
    return sorted(found)


# ---------------------------------------------------------------- the document


def _methods(resource: Any) -> list[str]:
    return sorted(
        name[3:].upper()
        for name in dir(resource)
        if name.startswith("on_") and name.count("_") == 1 and name != "on_options"
    )


def _served(resource: Any, method: str, v: Version) -> bool:
    gate = getattr(getattr(resource, f"on_{method.lower()}"), "version_gate", None)
    return gate is None or gate(v)


def _path_parameters(path: str, op: Operation) -> list[Schema]:
    names = re.findall(r"{(\w+)}", path)
    default = {"uuid": _UUID, "consumer_uuid": _UUID}
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": copy.deepcopy(op.path.get(name, default.get(name, _TEXT))),
        }
        for name in names
    ]


def _query_parameters(schema: Schema | None) -> list[Schema]:
    """One parameter per property of the query schema; keys matched by a pattern
    (request groups of GET /allocation_candidates from 1.25) as one exploded
    `form` object, whose keys are the parameter names."""
    if schema is None:
        return []
    required = set(schema.get("required", ()))
    params = [
        {"name": name, "in": "query", "required": name in required, "schema": sub}
        for name, sub in schema.get("properties", {}).items()
    ]
    if schema.get("patternProperties"):
        params.append(
            {
                "name": "request_groups",
                "in": "query",
                "style": "form",
                "explode": True,
                "description": "Request groups: each key a parameter name, with an "
                "optional group suffix.",
                "schema": {
                    "type": "object",
                    "patternProperties": schema["patternProperties"],
                    "additionalProperties": False,
                },
            }
        )
    return params


def _operation(path: str, method: str, resource: Any, version: str, v: Version) -> Schema:
    op = OPERATIONS[(resource.__name__, method)]
    open_ = path in OPEN_PATHS
    params = _path_parameters(path, op)
    if not open_:
        params.append(
            {
                "name": HEADER,
                "in": "header",
                "required": True,
                "description": "The microversion this document describes.",
                "schema": {"type": "string", "enum": [f"{microversion.SERVICE_TYPE} {version}"]},
            }
        )
    # (Copies: whatever a reader of the document does to it, the validators' schemas stay.)
    params += _query_parameters(copy.deepcopy(op.query(v)))
    body = copy.deepcopy(op.body(v))
    slug = re.sub(r"[{}]", "", path).strip("/").replace("/", "_").replace(".", "_")
    found: Schema = {"operationId": f"{method.lower()}_{slug or 'versions'}"}
    doc = inspect.getdoc(getattr(resource, f"on_{method.lower()}"))
    if doc:
        found["description"] = doc
    if params:
        found["parameters"] = params
    if body is not None:
        found["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    responses: Schema = {}
    for status, shape in sorted(op.ok(v).items()):
        answer: Schema = {"description": http.HTTPStatus(status).phrase}
        if shape is not None:
            answer["content"] = {"application/json": {"schema": shape}}
        responses[str(status)] = answer
    for status in _errors(path, method, body is not None, open_):
        responses[str(status)] = {
            "description": http.HTTPStatus(status).phrase,
            "content": _ERROR_CONTENT,
        }
    found["responses"] = responses
    if open_:
        found["security"] = []
    return found


@functools.lru_cache(maxsize=64)
def document(routes: Routes, version: str) -> Schema:
    """The API at `version` (one of `microversion.VERSIONS`): every route of
    `routes` with the methods that answer at that version."""
    v = microversion.as_tuple(version)
    paths: Schema = {}
    for path, resource in routes:
        item = {
            method.lower(): _operation(path, method, resource, version, v)
            for method in _methods(resource)
            if _served(resource, method, v)
        }
        if item:
            paths[path] = item
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Tally Placement API",
            "version": version,
            "description": f"The Placement API at microversion {version} (send "
            f"`{HEADER}: placement {version}`), as Tally serves it; and Tally's own "
            f"API under `/tally/` (the claim history), outside Placement's namespace.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": _ERROR},
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}
            },
        },
        "security": [{"token": []}],
    }


class Document:
    """GET /openapi.json: the API at one microversion, as OpenAPI 3.1."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """`?microversion=1.x` (default: the latest); no authentication needed."""
        params = query(req)
        wanted = single(params, "microversion")
        wanted = microversion.VERSIONS[-1] if wanted is None else wanted
        if wanted not in QUERY["properties"]["microversion"]["enum"]:
            raise BadRequest(
                f"Invalid microversion {wanted!r}: expected one of "
                f"{microversion.VERSIONS[0]} .. {microversion.VERSIONS[-1]}, or 'latest'.",
                code=codes.QUERYPARAM_BAD_VALUE,
            )
        validate_query(params, QUERY)
        version = microversion.VERSIONS[-1] if wanted == "latest" else wanted
        resp.media = {**document(self.routes, version), "servers": [{"url": req.root_path or "/"}]}
