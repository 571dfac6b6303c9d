"""The Placement API as an OpenAPI 3.1 document, one per microversion:
`GET /openapi.json?microversion=1.x` (default: the latest), open without a token.

Generated, not written: the paths are those of the route table (`app.ROUTES`);
an operation is a resource's `on_<method>` responder that answers at that
microversion (its `since` gate); what it reads and answers (request body, query
string, success answers, path parameters narrower than a string) is its row of
the one schema table, `schemas.table`, which the handlers validate with.
Every operation may answer the 4xx errors `_errors` lists, each with
Placement's error body (`components/schemas/Error`).
"""

from __future__ import annotations

import copy
import functools
import http
import inspect
import re
from typing import Any

import falcon

from tally.placement import errors as codes
from tally.placement import microversion, middleware
from tally.placement.error_types import BadRequest
from tally.placement.handlers.common import checked_query, query, single
from tally.placement.schemas.answer_schemas import PATH_SEGMENT, STR, UUID
from tally.placement.schemas.documents import PATH
from tally.placement.schemas.operation import Operation, Schema, Version
from tally.placement.schemas.table import OPERATIONS

OPENAPI_VERSION = "3.1.0"
HEADER = "OpenStack-API-Version"
# Answered without a token: the version document, and this one.
OPEN_PATHS = middleware.UNAUTHENTICATED_PATHS | {PATH}

Routes = tuple[tuple[str, Any], ...]

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
                    "title": STR,
                    "detail": STR,
                    "code": {
                        **STR,
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
    "text/html": {"schema": STR},
    "text/plain": {"schema": STR},
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
    default = {"uuid": UUID, "consumer_uuid": UUID}
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": copy.deepcopy(op.path.get(name, default.get(name, PATH_SEGMENT))),
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
    op = OPERATIONS[(method, path)]
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
    params += _query_parameters(copy.deepcopy(op.query_at(v)))
    body = copy.deepcopy(op.body_at(v))
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
    for status, shape in sorted(op.answers_at(v).items()):
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
    """GET /openapi.json: the API at one microversion, as OpenAPI 3.1; with the
    paths served beside Placement (`beside`: path -> path item, such as
    `/healthcheck` and `/metrics`, which `tally.serve` mounts and describes)."""

    def __init__(self, routes: Routes, beside: Schema | None = None) -> None:
        self.routes = routes
        self.beside = copy.deepcopy(beside or {})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """`?microversion=1.x` (default: the latest); no authentication needed."""
        params = query(req)
        wanted = single(params, "microversion")
        wanted = microversion.NEWEST if wanted is None else wanted
        if wanted not in (*microversion.VERSIONS, "latest"):
            raise BadRequest(
                f"Invalid microversion {wanted!r}: expected one of "
                f"{microversion.VERSIONS[0]} .. {microversion.NEWEST}, or 'latest'.",
                code=codes.QUERYPARAM_BAD_VALUE,
            )
        checked_query(req, params)
        version = microversion.NEWEST if wanted == "latest" else wanted
        found = document(self.routes, version)
        paths = {**found["paths"], **self.beside}
        resp.media = {**found, "paths": paths, "servers": [{"url": req.root_path or "/"}]}
