"""Usages: GET /resource_providers/{uuid}/usages and GET /usages (from 1.9);
the query string and answer schemas per microversion, in `OPERATIONS`."""

from __future__ import annotations

from tally import names
from tally.placement.schemas import answer_schemas
from tally.placement.schemas.allocations import CONSUMER_TYPES, ID
from tally.placement.schemas.answer_schemas import AMOUNTS, mapping, obj
from tally.placement.schemas.operation import Key, Operation, Rows, Schema, Version, always


def _query(**extra: Schema) -> Schema:
    return {
        "type": "object",
        "properties": {"project_id": dict(ID), "user_id": dict(ID), **extra},
        "required": ["project_id"],
        "additionalProperties": False,
    }


# GET /usages?project_id=&user_id=[&consumer_type=]
QUERY: Rows[Schema] = (
    ((1, 9), _query()),
    (
        CONSUMER_TYPES,
        _query(
            consumer_type={
                "type": "string",
                "pattern": names.CONSUMER_TYPE_QUERY_PATTERN,
                "minLength": 1,
                "maxLength": 255,
            }
        ),
    ),
)

PROVIDER_USAGES = obj(resource_provider_generation=answer_schemas.GENERATION, usages=AMOUNTS)


def usages(v: Version) -> Schema:
    """From 1.38 grouped by consumer type, each group with its `consumer_count`."""
    return obj(usages=mapping(AMOUNTS) if v >= CONSUMER_TYPES else AMOUNTS)


OPERATIONS: dict[Key, Operation] = {
    ("GET", "/resource_providers/{uuid}/usages"): Operation(always({200: PROVIDER_USAGES})),
    ("GET", "/usages"): Operation(always({200: usages}), query=QUERY),
}
