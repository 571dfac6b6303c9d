"""The building blocks of the answers' schemas: JSON schemas of the API's success
bodies, declared in each resource's schema module beside its request schemas
(its `OPERATIONS` table) and read by the OpenAPI document; and of path parameters.

An answer's schema also builds it: a handler writes every field the newest
microversion shows, in the order it sends them, and `fitter(schema)` keeps those
the schema of the request's microversion lists (`handlers.common.answer`). So a field a
microversion adds or drops is named once, in its schema's row.

Loose where the API is open-ended (classes, providers and consumers are map keys;
amounts are integers), exact in which fields each object has at a microversion,
switched by the version constants of their rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tally.placement.schemas.operation import Schema

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
UUID: Schema = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Schema = {"type": ["string", "null"], "format": "uuid"}
TEXT_OR_NULL: Schema = {"type": ["string", "null"]}
INT_OR_NULL: Schema = {"type": ["integer", "null"]}
# A path parameter is one segment: an encoded '/' (%2F) is decoded before routing.
PATH_SEGMENT: Schema = {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}


def obj(*optional: str, **properties: Schema) -> Schema:
    """An object with exactly these properties, all required but `optional`."""
    required = [name for name in properties if name not in optional]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def mapping(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


LINKS = array(obj(rel=STR, href=STR))
AMOUNTS = mapping(INT)  # {resource class: amount}
GENERATION = INT  # as answers show it (a request's is bounded: `domain.GENERATION`)


Fit = Callable[[Any], Any]


def _as_is(body: Any) -> Any:
    return body


def fitter(schema: Schema | None) -> Fit:
    """A function giving of a body what `schema` shows: of an object, the fields
    the schema lists (in the body's order); the same of each value of a mapping
    and each item of an array; anything else as it is."""
    if not schema:
        return _as_is
    properties = schema.get("properties")
    if properties is not None:
        inner = {name: fitter(spec) for name, spec in properties.items()}
        nested = {name: fit for name, fit in inner.items() if fit is not _as_is}
        if not nested:
            names = frozenset(inner)
            return lambda body: {name: value for name, value in body.items() if name in names}
        return lambda body: {
            name: inner[name](value) for name, value in body.items() if name in inner
        }
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        fit = fitter(values)
        if fit is not _as_is:
            return lambda body: {key: fit(value) for key, value in body.items()}
        return _as_is
    items = schema.get("items")
    if isinstance(items, dict):
        fit = fitter(items)
        if fit is not _as_is:
            return lambda body: [fit(item) for item in body]
    return _as_is


def fitter_of(schema: Callable[[Any], Schema]) -> Callable[[Any], Fit]:
    """`schema`'s fitter at each microversion, built once per microversion."""
    return functools.lru_cache(maxsize=64)(lambda version: fitter(schema(version)))
