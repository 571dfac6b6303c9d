"""The building blocks of the answers' shapes: JSON schemas of the API's success
bodies, declared in each resource's schema module beside its request schemas
(its `OPERATIONS` table) and read by the OpenAPI document; and of path parameters.

Loose where the API is open-ended (classes, providers and consumers are map keys;
amounts are integers), exact in which fields each object has at a microversion,
switched by the same version constants the handlers use.
"""

from __future__ import annotations

from tally.names import END
from tally.placement.schemas.operation import Schema

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
UUID: Schema = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Schema = {"type": ["string", "null"], "format": "uuid"}
TEXT_OR_NULL: Schema = {"type": ["string", "null"]}
INT_OR_NULL: Schema = {"type": ["integer", "null"]}
# A path parameter is one segment: an encoded '/' (%2F) is decoded before routing.
PATH_SEGMENT: Schema = {"type": "string", "minLength": 1, "pattern": "^[^/]+" + END}


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
