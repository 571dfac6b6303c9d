"""The two documents about the API, open without a token: GET / (the versions)
and GET /openapi.json (the API at one microversion, `placement.openapi`)."""

from __future__ import annotations

from tally.placement import microversion
from tally.placement.schemas.answer_schemas import LINKS, STR, array, obj
from tally.placement.schemas.operation import Key, Operation, Schema, always

PATH = "/openapi.json"

# The query string of the API document.
QUERY: Schema = {
    "type": "object",
    "properties": {
        "microversion": {
            "type": "string",
            "enum": [*microversion.VERSIONS, "latest"],
            "default": microversion.NEWEST,
        }
    },
    "additionalProperties": False,
}

VERSIONS = obj(
    versions=array(obj(id=STR, max_version=STR, min_version=STR, status=STR, links=LINKS))
)
OPENAPI: Schema = {"type": "object", "required": ["openapi", "info", "paths"]}

OPERATIONS: dict[Key, Operation] = {
    ("GET", "/"): Operation(always({200: VERSIONS})),
    ("GET", PATH): Operation(always({200: OPENAPI}), query=always(QUERY)),
}
