"""Tally's amounts of many providers at once, GET /tally/v1/amounts: every
inventory with what is used of it, in one answer (Placement answers one provider a
request: `.../inventories` and `.../usages`). Tally's own API, outside Placement's
namespace, not microversioned."""

from __future__ import annotations

from typing import Any

from tally.placement.schemas.answer_schemas import INT, mapping, obj
from tally.placement.schemas.operation import Key, Operation, always

PATH = "/tally/v1/amounts"

QUERY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

ONE_CLASS = obj(
    total=INT, reserved=INT, allocation_ratio={"type": "number"}, capacity=INT, used=INT
)
AMOUNTS = obj(providers=mapping(mapping(ONE_CLASS)))  # provider uuid -> class -> amounts

OPERATIONS: dict[Key, Operation] = {
    ("GET", PATH): Operation(always({200: AMOUNTS}), query=always(QUERY)),
}
