"""The page's two seams: where claim history and capacity counts come in.

Both are plain functions the app factory takes (`tally.ui.app.create_app(...,
history=..., capacity=...)`), defaulting to the two below; tests pass fakes, and
a seam answering None makes the page say "not available".

- `provider_history(engine, provider_uuid, limit)`: the newest `limit` rows of the
  claim history about one provider, newest first, as `HistoryEvent`s. The
  provider's page lists them, and derives each current consumer's "since" and "by
  request" from them (`holding_since`).
- `capacity_counts(client, shape)`: how many more of `shape` ({resource class:
  amount}) fit, per provider, with the limiting classes, as `Fit`s (`tally
  capacity`'s read). `client` is a PlacementClient on this server's own Placement,
  in-process, as an admin at microversion 1.39 (`in_process_client`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from tally.clients.inprocess import as_caller, once
from tally.config import Settings


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


HistorySeam = Callable[[sa.Engine, str, int], "list[HistoryEvent] | None"]
CapacitySeam = Callable[[Any, Mapping[str, int]], "list[Fit] | None"]


def provider_history(
    engine: sa.Engine, provider_uuid: str, limit: int
) -> list[HistoryEvent] | None:
    """The newest `limit` rows of the claim history about one provider."""
    from tally.placement.ledger import history_records as history

    found = history.entries(engine, history.Filter(provider=provider_uuid, limit=limit))
    return [
        HistoryEvent(
            e.time,
            e.action,
            e.request_id,
            e.consumer,
            e.provider,
            e.resource_class,
            e.before,
            e.after,
            e.detail,
        )
        for e in found
    ]


def capacity_counts(client: Any, shape: Mapping[str, int]) -> list[Fit] | None:
    """How many more of `shape` fit per provider: `tally capacity`'s read over
    `client` (a PlacementClient), each provider row as a `Fit`."""
    from tally.doctor.fill import Shape, read_capacity

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


def in_process_client(
    settings: Settings, engine: sa.Engine, placement: Any = None
) -> Callable[[], Any]:
    """A getter of one PlacementClient on this server's Placement, in-process, as an
    admin at 1.39: over `placement` (the server's own app), or an app of its own
    built on first use."""

    def make() -> Any:
        import httpx

        from tally.clients.placement import PlacementClient
        from tally.placement.app import create_app

        app = placement if placement is not None else create_app(settings, engine)
        transport = httpx.WSGITransport(app=as_caller(app, "tally-ui", "tally-ui", "admin"))
        return PlacementClient(
            "http://placement.ui", token=None, version="1.39", transport=transport
        )

    return once(make)
