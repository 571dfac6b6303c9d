"""Tally's claim history, GET /tally/v1/history: its query string and answer
shape, in `OPERATIONS` (no microversions: it is Tally's own API, outside
Placement's namespace)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tally.db.history_writer import ACTIONS
from tally.placement import errors as codes
from tally.placement.error_types import BadRequest
from tally.placement.schemas.answer_schemas import INT, INT_OR_NULL, STR, TEXT_OR_NULL, array, obj
from tally.placement.schemas.operation import Key, Operation, always

PATH = "/tally/v1/history"

# ISO 8601, to the microsecond; without an offset it is UTC. (A date that matches
# but does not exist, like 2026-02-30, is refused by the handler.)
TIMESTAMP_PATTERN = (
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    "(T[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$"
)
_TIMESTAMP: dict[str, Any] = {"type": "string", "pattern": TIMESTAMP_PATTERN}
_UUID: dict[str, Any] = {"type": "string", "format": "uuid"}
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000  # a larger limit gives this many

QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "consumer": _UUID,
        "provider": _UUID,
        "since": _TIMESTAMP,
        "until": _TIMESTAMP,
        "limit": {"type": "string", "pattern": "^[1-9][0-9]{0,8}$"},
        "marker": {"type": "string", "pattern": "^[1-9][0-9]{0,17}$"},
    },
    "additionalProperties": False,
}


def instant(given: dict[str, str], name: str) -> dt.datetime | None:
    """The timestamp `name` of the query (one the pattern let through) as naive UTC,
    as the history stores time; 400 for a date that does not exist."""
    text = given.get(name)
    if text is None:
        return None
    try:
        found = dt.datetime.fromisoformat(text)
        if found.tzinfo is not None:
            found = found.astimezone(dt.UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise BadRequest(
            f"Invalid query string parameters: {name}={text!r} is not a time that exists.",
            code=codes.QUERYPARAM_BAD_VALUE,
        ) from None
    # Within what every backend's column holds (no row is outside it anyway).
    return min(max(found, _EARLIEST), _LATEST)


_EARLIEST = dt.datetime(1970, 1, 1)
_LATEST = dt.datetime(9999, 12, 31, 23, 59, 59)


# One change each, newest first.
ENTRY = obj(
    id=INT,
    time=STR,
    action={"type": "string", "enum": list(ACTIONS)},
    request_id=TEXT_OR_NULL,
    global_request_id=TEXT_OR_NULL,
    user_id=TEXT_OR_NULL,
    project_id=TEXT_OR_NULL,
    consumer=TEXT_OR_NULL,
    consumer_project_id=TEXT_OR_NULL,
    consumer_user_id=TEXT_OR_NULL,
    consumer_type=TEXT_OR_NULL,
    consumer_generation=INT_OR_NULL,
    provider=TEXT_OR_NULL,
    provider_generation=INT_OR_NULL,
    resource_class=TEXT_OR_NULL,
    before=INT_OR_NULL,
    after=INT_OR_NULL,
    detail={"type": ["object", "null"]},
)
HISTORY = obj(history=array(ENTRY), next_marker=TEXT_OR_NULL)

OPERATIONS: dict[Key, Operation] = {
    ("GET", PATH): Operation(always({200: HISTORY}), query=always(QUERY)),
}
