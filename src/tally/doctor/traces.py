"""When, and by which request, a hold was written: read from Tally's claim history
(`GET /tally/v1/history`) through the public API, for the holds the doctor names.

A `Trace` says when the consumer's current hold (on the providers asked about) was
written, by which Placement request and so which caller's request (the global
request id nova-api or nova-compute sends, which their logs hold too), by which user
and project; and when the consumer was last touched at all (a later write that
left the hold, say a failed cleanup). A Placement without the history (upstream, an
older Tally) or credentials that may not read it (it is admin only): the doctor
goes on without traces and says so once (`PlacementClient.notes`), as it does for
what an older compute API cannot tell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from tally.clients.errors import PlacementError
from tally.clients.placement import HISTORY_PATH, PlacementClient

PAGE = 100
PAGES = 5  # rows read per consumer at most: PAGE * PAGES, newest first
NO_HISTORY = (
    "claim history: this Placement has no {path} (upstream Placement, or an older "
    "Tally): holds are shown without when and by which request they were written"
)
NOT_ALLOWED = (
    "claim history: these credentials may not read it (HTTP {status}; it is admin "
    "only): holds are shown without when and by which request they were written"
)


@dataclasses.dataclass(frozen=True)
class Trace:
    """What the claim history says of one consumer's hold."""

    written_at: str | None  # when its current hold was written (UTC)
    request_id: str | None  # the Placement request that wrote it
    global_request_id: str | None  # the caller's own request (nova-api, nova-compute)
    user_id: str | None  # who asked Placement
    project_id: str | None
    last_touched_at: str | None  # the consumer's newest change of any kind
    last_touched_by: str | None  # ... and its Placement request

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """One line: `written 2026-12-01 10:00:00 by req-... (caller req-..., user
        nova); last touched ...`."""
        if self.written_at is None:
            found = "written before the history kept it (or pruned)"
        else:
            found = f"written {_when(self.written_at)} by {self.request_id or 'no request'}"
            about = [f"caller {self.global_request_id}"] if self.global_request_id else []
            about += [f"user {self.user_id}"] if self.user_id else []
            found += f" ({', '.join(about)})" if about else ""
        if self.last_touched_at and self.last_touched_at != self.written_at:
            found += f"; last touched {_when(self.last_touched_at)} by {self.last_touched_by}"
        return found


class Histories:
    """Traces of consumers, each read once; nothing (and one note) where the
    Placement has no history to read."""

    def __init__(self, placement: PlacementClient) -> None:
        self.placement = placement
        self.usable = True
        self.found: dict[tuple[str, frozenset[str]], Trace | None] = {}

    def trace(self, consumer: str, providers: Iterable[str] = ()) -> Trace | None:
        """How `consumer`'s hold on `providers` (default: any) came to be; None when
        the history has nothing of it, or cannot be read."""
        key = (consumer, frozenset(providers))
        if key not in self.found:
            self.found[key] = self._read(consumer, key[1]) if self.usable else None
        return self.found[key]

    def _read(self, consumer: str, providers: frozenset[str]) -> Trace | None:
        rows: list[dict[str, Any]] = []
        marker = None
        for _ in range(PAGES):
            try:
                page = self.placement.history(
                    {"consumer": consumer, "limit": PAGE, "marker": marker}
                )
            except PlacementError as exc:
                if exc.status not in (401, 403, 404, 405):
                    raise
                self.usable = False
                what = NO_HISTORY if exc.status in (404, 405) else NOT_ALLOWED
                self.placement.note(what.format(path=HISTORY_PATH, status=exc.status))
                return None
            rows += page.get("history") or []
            marker = page.get("next_marker")
            if _written(rows, providers) is not None or not marker:
                break
        if not rows:
            return None
        written = _written(rows, providers) or {}
        return Trace(
            written.get("time"),
            written.get("request_id"),
            written.get("global_request_id"),
            written.get("user_id"),
            written.get("project_id"),
            rows[0].get("time"),
            rows[0].get("request_id"),
        )


def _written(rows: list[dict[str, Any]], providers: frozenset[str]) -> dict[str, Any] | None:
    """The newest allocation change that left the consumer holding something (on one
    of `providers`, when given): the write of its current hold."""
    for row in rows:
        if row.get("action") != "allocation" or not row.get("after"):
            continue
        if not providers or row.get("provider") in providers:
            return row
    return None


def _when(stamp: str) -> str:
    """`2026-12-01T10:00:00.123456Z` as `2026-12-01 10:00:00`."""
    return stamp.replace("T", " ").split(".")[0].rstrip("Z")
