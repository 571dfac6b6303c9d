"""JSON schemas of POST /reshaper, per microversion.

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


def _allocations(version: tuple[int, int]) -> dict:
    schema = copy.deepcopy(allocations.pick(allocations.POST_SCHEMAS, version))
    schema["minProperties"] = 0
    return schema


def _reshaper(version: tuple[int, int]) -> dict:
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


# (lowest microversion, schema), highest first, as `allocations.pick` reads them.
POST_SCHEMAS: tuple[tuple[tuple[int, int], dict], ...] = (
    ((1, 38), _reshaper((1, 38))),
    ((1, 34), _reshaper((1, 34))),
    ((1, 30), _reshaper((1, 30))),
)


def pick(version: tuple[int, int]) -> dict:
    """The schema of a request at `version` (1.30 or later)."""
    return allocations.pick(POST_SCHEMAS, version)
