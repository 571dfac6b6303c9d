"""/resource_providers/{uuid}/aggregates (from 1.1): request bodies and answer
schemas per microversion, in `OPERATIONS`."""

from __future__ import annotations

from tally.placement.schemas import answer_schemas
from tally.placement.schemas.answer_schemas import UUID, array, obj
from tally.placement.schemas.domain import GENERATION
from tally.placement.schemas.operation import Key, Operation, Rows, Schema, Version, always

GENERATION_VERSION = (1, 19)  # the provider generation in bodies and answers

_UUID_LIST: Schema = {
    "type": "array",
    "items": {"type": "string", "format": "uuid"},
    "uniqueItems": True,
}

PUT_BODY: Rows[Schema] = (
    # 1.1 - 1.18: a bare list of aggregate uuids.
    ((1, 1), _UUID_LIST),
    # 1.19+: the list plus the provider generation the client last saw.
    (
        GENERATION_VERSION,
        {
            "type": "object",
            "properties": {
                "aggregates": _UUID_LIST,
                "resource_provider_generation": GENERATION,
            },
            "required": ["aggregates", "resource_provider_generation"],
            "additionalProperties": False,
        },
    ),
)


def aggregates(v: Version) -> Schema:
    if v >= GENERATION_VERSION:
        return obj(aggregates=array(UUID), resource_provider_generation=answer_schemas.GENERATION)
    return obj(aggregates=array(UUID))


_ROUTE = "/resource_providers/{uuid}/aggregates"
OPERATIONS: dict[Key, Operation] = {
    ("GET", _ROUTE): Operation(always({200: aggregates})),
    ("PUT", _ROUTE): Operation(always({200: aggregates}), body=PUT_BODY),
}
