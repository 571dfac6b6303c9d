"""The page's two seams: where claim history and capacity counts come in.

Both are plain functions the app factory takes (`tally.ui.app.create_app(...,
history=..., capacity=...)`), defaulting to the two below; tests pass fakes, and
a seam answering None makes the page say "not available".

- `provider_history(client, provider_uuid, limit)`: the newest `limit` rows of the
  claim history about one provider, newest first, as `HistoryEvent`s (`GET
  /tally/v1/history?provider=`; None from a Placement without it). The provider's
  page lists them, and derives each current consumer's "since" and "by request"
  from them (`holding_since`).
- `capacity_counts(client, shape)`: how many more of `shape` ({resource class:
  amount}) fit, per provider, with the limiting classes, as `Fit`s (`tally
  capacity`'s read).

`client` is the page's PlacementClient: on the server's own Placement, in-process,
as an admin at the newest microversion (`tally.serve.page.in_process_client`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.fill import Shape, read_capacity

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # the history's times (UTC)


@dataclasses.dataclass(frozen=True)
class HistoryEvent:
    """One row of the claim history, as the page reads it: for an allocation, one
    class of one consumer on one provider, the amount `before` and `after` (None:
    none held)."""

    time: dt.datetime
    action: str  # "allocation", "inventory", "traits", "provider.update", ...
    request_id: str | None  # the request that wrote it (`req-...`)
    consumer: str | None
    provider: str | None
    resource_class: str | None = None
    before: int | None = None
    after: int | None = None
    detail: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Fit:
    """How many more of a shape fit on one provider, and what runs out first."""

    provider: str  # uuid
    name: str | None
    count: int
    limiting: tuple[str, ...] = ()  # the resource classes that stop it


HistorySeam = Callable[[PlacementClient, str, int], "list[HistoryEvent] | None"]
CapacitySeam = Callable[[PlacementClient, Mapping[str, int]], "list[Fit] | None"]


def provider_history(
    client: PlacementClient, provider_uuid: str, limit: int
) -> list[HistoryEvent] | None:
    """The newest `limit` rows of the claim history about one provider; None when
    this Placement has none to read (or the page's caller may not read it)."""
    try:
        found = client.history({"provider": provider_uuid, "limit": limit})["history"]
    except PlacementError as exc:
        if exc.status in (401, 403, 404, 405):
            return None
        raise
    return [
        HistoryEvent(
            dt.datetime.strptime(row["time"], TIME_FORMAT),
            row["action"],
            row.get("request_id"),
            row.get("consumer"),
            row.get("provider"),
            row.get("resource_class"),
            row.get("before"),
            row.get("after"),
            row.get("detail"),
        )
        for row in found
    ]


def recent_failures(client: PlacementClient, limit: int) -> list[dict[str, Any]] | None:
    """The newest `limit` searches that found nothing, each with its verdict (`GET
    /tally/v1/failures`); None when this Placement keeps none (or the page's
    caller may not read them)."""
    try:
        return client.failures({"limit": limit})["failures"]
    except PlacementError as exc:
        if exc.status in (401, 403, 404, 405):
            return None
        raise


def capacity_counts(client: PlacementClient, shape: Mapping[str, int]) -> list[Fit] | None:
    """How many more of `shape` fit per provider: `tally capacity`'s read over
    `client`, each provider row as a `Fit`."""
    report = read_capacity(client, Shape(dict(shape)))
    return [Fit(r.uuid, r.provider, r.fits, tuple(r.limiting)) for r in report.rows]


def holding_since(
    events: Iterable[HistoryEvent], consumer: str, holds: Mapping[str, int]
) -> tuple[HistoryEvent, bool] | None:
    """The write from which `consumer` has held something here without a break
    (walking back from what it `holds` now, undoing its allocation rows, newest
    first, until it held nothing), and whether the rows read reach that far
    (False: the holding began before the oldest row read; the write given is the
    oldest seen). None when no row is about the consumer."""
    held = {rc: n for rc, n in holds.items() if n}
    start: HistoryEvent | None = None
    for event in events:
        if event.consumer != consumer or event.resource_class is None:
            continue
        if event.before:
            held[event.resource_class] = event.before
        else:
            held.pop(event.resource_class, None)
        start = event
        if not held:
            return start, True
    return (start, False) if start else None
