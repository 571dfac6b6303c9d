"""/resource_providers/{uuid}/inventories[/{resource_class}]: request schemas and
answer schemas, in `OPERATIONS`.

The bodies are the same at every microversion; what changes with the version
(reserved == total allowed from 1.26) is a rule of the ledger, not a shape.
Limits are those of the database columns: 32-bit integers and a single
precision float for allocation_ratio, as upstream stores them (the capacity
they make together is bounded by the ledger: see `schemas.domain`).
"""

from __future__ import annotations

import copy
from typing import Any

from tally import names
from tally.placement.schemas import answer_schemas
from tally.placement.schemas.answer_schemas import mapping, obj
from tally.placement.schemas.domain import GENERATION, MAX_INT
from tally.placement.schemas.operation import NO_CONTENT, Key, Operation, always

RESERVED_MAY_EQUAL_TOTAL = (1, 26)  # a rule of the ledger, not a shape
MAX_FLOAT = 3.40282e38
RESOURCE_CLASS_PATTERN = names.RESOURCE_CLASS_PATTERN


def _count(minimum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": MAX_INT}


RECORD_PROPERTIES: dict[str, Any] = {
    "resource_provider_generation": GENERATION,
    "total": _count(1),
    "reserved": _count(0),
    "min_unit": _count(1),
    "max_unit": _count(1),
    "step_size": _count(1),
    "allocation_ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_FLOAT},
}


def _record(*required: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**copy.deepcopy(RECORD_PROPERTIES), **extra},
        "required": list(required),
        "additionalProperties": False,
    }


# PUT /resource_providers/{uuid}/inventories/{resource_class}
PUT_INVENTORY = _record("total", "resource_provider_generation")

# POST /resource_providers/{uuid}/inventories (a generation may be sent; it is not checked)
POST_INVENTORY = _record(
    "total",
    "resource_class",
    resource_class={"type": "string", "pattern": RESOURCE_CLASS_PATTERN},
)

# PUT /resource_providers/{uuid}/inventories. Keys that do not look like a class
# name still get their record checked, then fail as an unknown class.
_ENTRY = _record("total")
PUT_INVENTORIES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": GENERATION,
        "inventories": {
            "type": "object",
            "patternProperties": {RESOURCE_CLASS_PATTERN: _ENTRY},
            "additionalProperties": _ENTRY,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

# An inventory record as answers show it: the fields of a request record, typed.
_RECORD_FIELDS = {
    name: {"type": spec["type"]}
    for name, spec in RECORD_PROPERTIES.items()
    if name != "resource_provider_generation"
}
INVENTORIES = obj(
    resource_provider_generation=answer_schemas.GENERATION,
    inventories=mapping(obj(**_RECORD_FIELDS)),
)
INVENTORY = obj(**_RECORD_FIELDS, resource_provider_generation=answer_schemas.GENERATION)

_COLLECTION = "/resource_providers/{uuid}/inventories"
_ONE = "/resource_providers/{uuid}/inventories/{resource_class}"
_RESOURCE_CLASS = {"resource_class": {"type": "string", "pattern": RESOURCE_CLASS_PATTERN}}

OPERATIONS: dict[Key, Operation] = {
    ("GET", _COLLECTION): Operation(always({200: INVENTORIES})),
    ("PUT", _COLLECTION): Operation(always({200: INVENTORIES}), body=always(PUT_INVENTORIES)),
    ("POST", _COLLECTION): Operation(always({201: INVENTORY}), body=always(POST_INVENTORY)),
    ("DELETE", _COLLECTION): Operation(NO_CONTENT),
    ("GET", _ONE): Operation(always({200: INVENTORY}), path=_RESOURCE_CLASS),
    ("PUT", _ONE): Operation(
        always({200: INVENTORY}), body=always(PUT_INVENTORY), path=_RESOURCE_CLASS
    ),
    ("DELETE", _ONE): Operation(NO_CONTENT, path=_RESOURCE_CLASS),
}
