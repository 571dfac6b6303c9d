"""POST /reshaper (from 1.30): the request body per microversion, in `OPERATIONS`.

    {"inventories": {rp_uuid: <PUT /resource_providers/{uuid}/inventories body>},
     "allocations": {consumer_uuid: <one consumer of POST /allocations>}}

At least one provider's inventories; the allocations may be `{}` (nothing to
move). The consumer part follows POST /allocations of the same microversion:
    1.30  consumer_generation (required, may be null); allocations may be {}
    1.34  + mappings (accepted, not stored)
    1.38  + consumer_type (required)
"""

from __future__ import annotations

import copy

from tally.placement.schemas import allocations, inventories
from tally.placement.schemas.operation import NO_CONTENT, Key, Operation, Rows, Schema, Version, at


def _allocations(version: Version) -> Schema:
    schema = copy.deepcopy(at(allocations.POST_BODY, version))
    schema["minProperties"] = 0
    return schema


def _reshaper(version: Version) -> Schema:
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "minProperties": 1,
                "patternProperties": {
                    allocations.UUID_KEY: copy.deepcopy(inventories.PUT_INVENTORIES)
                },
                "additionalProperties": False,
            },
            "allocations": _allocations(version),
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


_FIRST = (1, 30)
BODY: Rows[Schema] = tuple(
    (first, _reshaper(first))
    for first in (_FIRST, allocations.WITH_MAPPINGS, allocations.CONSUMER_TYPES)
)

OPERATIONS: dict[Key, Operation] = {("POST", "/reshaper"): Operation(NO_CONTENT, body=BODY)}
