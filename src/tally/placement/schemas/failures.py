"""Tally's failed searches, GET /tally/v1/failures: its query string and answer
shape, in `OPERATIONS` (no microversions: Tally's own API, outside Placement's
namespace). Times are read as the claim history's (`history.instant`)."""

from __future__ import annotations

from typing import Any

from tally.placement.schemas.answer_schemas import INT, STR, TEXT_OR_NULL, array, obj
from tally.placement.schemas.history import DEFAULT_LIMIT, MAX_LIMIT, QUERY, instant
from tally.placement.schemas.operation import Key, Operation, always

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "OPERATIONS", "PATH", "instant"]

PATH = "/tally/v1/failures"

# A class or trait name as Placement allows them (standard or CUSTOM_).
_NAME: dict[str, Any] = {"type": "string", "pattern": "^[A-Z0-9_]{1,255}$"}

FAILURES_QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {
        # a request id (req-<uuid>) or any caller's global request id, as stored
        "request_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "since": QUERY["properties"]["since"],
        "until": QUERY["properties"]["until"],
        "resource_class": _NAME,
        "trait": _NAME,
        "limit": QUERY["properties"]["limit"],
        "marker": QUERY["properties"]["marker"],
    },
    "additionalProperties": False,
}

# One failed search each, newest first.
FAILURE = obj(
    id=INT,
    created_at=STR,
    request_id=TEXT_OR_NULL,
    global_request_id=TEXT_OR_NULL,
    user_id=TEXT_OR_NULL,
    project_id=TEXT_OR_NULL,
    microversion=STR,
    query=STR,
    reason=TEXT_OR_NULL,
    verdict={"type": "object"},
)
FAILURES = obj(failures=array(FAILURE), next_marker=TEXT_OR_NULL)

OPERATIONS: dict[Key, Operation] = {
    ("GET", PATH): Operation(always({200: FAILURES}), query=always(FAILURES_QUERY)),
}
