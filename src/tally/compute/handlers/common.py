"""What the compute handlers share: the JSON body, query values, the server's address."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Any

import falcon

from tally.compute.context import Lab
from tally.compute.errors import BadRequest


class Resource:
    """A resource of the compute API, given the lab's dependencies."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab


def body(req: falcon.Request, key: str | None = None) -> dict[str, Any]:
    """The JSON object of the request (its `key` member when named)."""
    try:
        found = req.get_media(default_when_empty=None)
    except falcon.MediaMalformedError:
        raise BadRequest("Malformed request body") from None
    if key is not None:
        found = found.get(key) if isinstance(found, dict) else None
        if not isinstance(found, dict):
            raise BadRequest(f"The request body needs a '{key}' object.")
    if not isinstance(found, dict):
        raise BadRequest("The request body must be a JSON object.")
    return found


def flag(req: falcon.Request, name: str) -> bool:
    value = req.get_param(name)
    if value is None:
        return False
    return value.strip().lower() in ("1", "true", "t", "yes", "y", "on", "")


def integer(req: falcon.Request, name: str) -> int | None:
    value = req.get_param(name)
    if value is None:
        return None
    if not value.isdigit():
        raise BadRequest(f"Invalid input for query parameter {name}: {value!r} is not an integer")
    return int(value)


def moment(req: falcon.Request, name: str) -> dt.datetime | None:
    """An ISO 8601 date-time query value, as naive UTC (how the lab stores times)."""
    value = req.get_param(name)
    if value is None:
        return None
    try:
        found = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadRequest(
            f"Invalid input for query parameters {name}. Value: {value}. "
            f"'{value}' is not a 'date-time'"
        ) from None
    if found.tzinfo is not None:
        found = found.astimezone(dt.UTC).replace(tzinfo=None)
    return found


def server_root(req: falcon.Request) -> str:
    """The address of the whole Tally server (the compute API is under /compute)."""
    return f"{req.forwarded_scheme}://{req.forwarded_host}"


MAX_LIMIT = 1000  # Nova's [api] max_limit


def page(
    req: falcon.Request, found: list[dict], key: str, href: str, *, linked_unasked: bool = True
) -> tuple[list[dict], list[dict] | None]:
    """limit/marker paging as Nova's: the rows after the one whose `key` is `marker`
    (400 for none), at most `limit`, and a `next` link to `href` when the page is
    full (`linked_unasked=False`: only when a limit was asked, as instance actions)."""
    marker, asked = req.get_param("marker"), integer(req, "limit")
    if marker:
        ids = [row[key] for row in found]
        if marker not in ids:
            raise BadRequest(f"Marker {marker} could not be found.")
        found = found[ids.index(marker) + 1 :]
    limit = min(MAX_LIMIT if asked is None else asked, MAX_LIMIT)
    rows = found[:limit]
    if not limit or len(rows) != limit or (asked is None and not linked_unasked):
        return rows, None
    query = urllib.parse.urlencode(dict(req.params, marker=rows[-1][key]))
    return rows, [{"rel": "next", "href": f"{href}?{query}"}]
