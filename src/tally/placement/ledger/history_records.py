"""The claim history as the ledger keeps it: what each write records (one call per
change, inside its transaction; `tally.db.history_writer` merges and writes the rows
when it commits), the history as `GET /tally/v1/history` reads it, and its pruning.

The call that names a change for the history names it for the ledger journal too
(the candidates index's catch-up), history on or off: a generation bump does so
itself (`provider_bumps`); a change that moves no generation (a provider created,
re-parented or deleted, aggregates before 1.19, usage released) is named here.

What a row of each action holds (`amount_*` and `detail`):

  allocation         consumer (project, user, type, generation after), provider,
                     class: the amount held before and after
  inventory          provider, class: `total` before and after (absent: null); the
                     detail has every field of the record before and after
  provider.create    provider: detail `after` {name, parent}
  provider.update    provider: detail `before`/`after` {name, parent} (a rename, a
                     re-parent; a subtree that moves with it gets no rows of its own)
  provider.delete    provider: detail `before` {name, parent, inventories {class:
                     total}, traits, aggregates}: what went with it
  traits, aggregates provider: detail {added, removed}

Every row carries the provider generation after the write. Resource classes and
traits themselves (their names) are not claims, and are not recorded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import sqlalchemy as sa

from tally.db import history_writer as recorder
from tally.db import retention
from tally.db import schema as t
from tally.db.history_writer import CALLER, Caller, recording
from tally.db.transaction import transaction
from tally.placement.ledger import provider_bumps

log = logging.getLogger("tally.placement.history")

__all__ = ["ACTIONS", "CALLER", "Caller", "Entry", "Filter", "Pruner", "entries", "prune"]

ACTIONS = recorder.ACTIONS

MAX_LIMIT = 1000
BATCH = retention.BATCH


# ---------------------------------------------------------------- what writes record


def allocations_replaced(
    conn: sa.Connection,
    writes: Iterable[Any],
    consumers: Mapping[str, Any],
    provider_ids: Mapping[str, int],
    class_ids: Mapping[str, int],
    old: Iterable[Any],
    generations: Mapping[int, int],
) -> None:
    """One row per (consumer, provider, class) whose amount the write changed.
    `writes` are the merged ConsumerWrites, `consumers` their rows after the write,
    `old` what they held before (`_Held` rows: consumer, rp_id, rc_id, used),
    `generations` the new generations of the providers it bumped (named by their
    bump); the providers `old` holds on are named here (usage moved off them too)."""
    old = list(old)
    provider_bumps.changed(conn, {held.rp_id for held in old}, usage_only=True)
    if not recording():
        return
    writes = list(writes)
    after: dict[tuple[str, int, int], int] = {}
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            for rc, amount in resources.items():
                key = (w.uuid, provider_ids[rp_uuid], class_ids[rc])
                after[key] = after.get(key, 0) + amount
    before: dict[tuple[str, int, int], int] = {}
    for held in old:
        key = (held.consumer, held.rp_id, held.rc_id)
        before[key] = before.get(key, 0) + held.used
    changed = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
    if not changed:
        return
    names = {rc_id: name for name, rc_id in class_ids.items()}
    uuids = {rp_id: rp_uuid for rp_uuid, rp_id in provider_ids.items()}
    names.update(_class_names(conn, {k[2] for k in changed} - names.keys()))
    by_uuid = {w.uuid: w for w in writes}
    types = _type_names(
        conn,
        {
            c.consumer_type_id
            for uuid, c in consumers.items()
            if by_uuid[uuid].consumer_type is None and c.consumer_type_id is not None
        },
    )
    changes = []
    for consumer_uuid, rp_id, rc_id in changed:
        w, row = by_uuid[consumer_uuid], consumers.get(consumer_uuid)
        kind = w.consumer_type
        if kind is None and row is not None:
            kind = types.get(row.consumer_type_id)
        changes.append(
            recorder.Change(
                recorder.ALLOCATION,
                provider_id=rp_id,
                provider_uuid=uuids.get(rp_id),  # else read at flush, with the generation
                provider_generation=generations.get(rp_id),
                consumer_uuid=consumer_uuid,
                consumer_project_id=row.project_id if row else w.project_id,
                consumer_user_id=row.user_id if row else w.user_id,
                consumer_type=kind,
                consumer_generation=row.generation if row and w.allocations else None,
                resource_class=names.get(rc_id, str(rc_id)),
                amount_before=before.get((consumer_uuid, rp_id, rc_id)),
                amount_after=after.get((consumer_uuid, rp_id, rc_id)),
            )
        )
    recorder.note(conn, *changes)


def consumer_deleting(conn: sa.Connection, consumer_uuid: str) -> None:
    """DELETE /allocations/{uuid}, before its rows go: one row per allocation; the
    providers it held on are named as changed in their usage."""
    a, c, rc, ct = t.allocations, t.consumers, t.resource_classes, t.consumer_types
    if not recording():
        held = sa.select(a.c.resource_provider_id).where(a.c.consumer_id == consumer_uuid)
        provider_bumps.changed(conn, conn.execute(held.distinct()).scalars(), usage_only=True)
        return
    rows = conn.execute(
        sa.select(
            a.c.resource_provider_id,
            rc.c.name,
            sa.func.sum(a.c.used).label("used"),
            c.c.project_id,
            c.c.user_id,
            ct.c.name.label("consumer_type"),
        )
        .select_from(
            a.join(rc, rc.c.id == a.c.resource_class_id)
            .outerjoin(c, c.c.uuid == a.c.consumer_id)
            .outerjoin(ct, ct.c.id == c.c.consumer_type_id)
        )
        .where(a.c.consumer_id == consumer_uuid)
        .group_by(a.c.resource_provider_id, rc.c.name, c.c.project_id, c.c.user_id, ct.c.name)
    ).all()
    provider_bumps.changed(conn, {row.resource_provider_id for row in rows}, usage_only=True)
    for row in rows:
        recorder.note(
            conn,
            recorder.Change(
                recorder.ALLOCATION,
                provider_id=row.resource_provider_id,
                consumer_uuid=consumer_uuid,
                consumer_project_id=row.project_id,
                consumer_user_id=row.user_id,
                consumer_type=row.consumer_type,
                resource_class=row.name,
                amount_before=int(row.used),
            ),
        )


def inventory_written(
    conn: sa.Connection,
    provider: sa.Row,
    generation: int,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
) -> None:
    """One row per class whose record the write added, changed or removed
    (`before`/`after`: class -> inventory Record) on `provider`, now at `generation`."""
    if not recording():
        return
    for rc in sorted(before.keys() | after.keys()):
        was, now = _record(before.get(rc)), _record(after.get(rc))
        if was == now:
            continue
        recorder.note(
            conn,
            recorder.Change(
                recorder.INVENTORY,
                provider_id=provider.id,
                provider_uuid=provider.uuid,
                provider_generation=generation,
                resource_class=rc,
                amount_before=was["total"] if was else None,
                amount_after=now["total"] if now else None,
                was=was,
                now=now,
            ),
        )


def provider_created(
    conn: sa.Connection, provider_id: int, uuid: str, name: str, parent: str | None
) -> None:
    provider_bumps.changed(conn, (provider_id,))
    recorder.note(
        conn,
        recorder.Change(
            recorder.PROVIDER_CREATE,
            provider_id=provider_id,
            provider_uuid=uuid,
            provider_generation=0,
            now={"name": name, "parent": parent},
        ),
    )


def provider_updated(
    conn: sa.Connection, row: sa.Row, found: Any, moved: Iterable[int] = ()
) -> None:
    """A rename or a (re-, un-)parent: `row` is the provider before, `found` after;
    `moved` the subtree that went with it (named, with no rows of its own)."""
    provider_bumps.changed(conn, (row.id, *moved))
    if not recording():
        return
    was = {"name": row.name, "parent": _uuid_of(conn, row.parent_provider_id)}
    now = {"name": found.name, "parent": found.parent_provider_uuid}
    recorder.note(
        conn,
        recorder.Change(
            recorder.PROVIDER_UPDATE,
            provider_id=row.id,
            provider_uuid=row.uuid,
            provider_generation=found.generation,
            was=was,
            now=now,
        ),
    )


def provider_deleting(conn: sa.Connection, row: sa.Row) -> None:
    """Before a provider's rows go: what it was, and what goes with it."""
    provider_bumps.changed(conn, (row.id,))
    if not recording():
        return
    inv, rc = t.inventories, t.resource_classes
    totals = conn.execute(
        sa.select(rc.c.name, inv.c.total)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == row.id)
        .order_by(rc.c.name)
    ).all()
    was = {
        "name": row.name,
        "parent": _uuid_of(conn, row.parent_provider_id),
        "inventories": {name: total for name, total in totals},
        "traits": sorted(_trait_names(conn, row.id)),
        "aggregates": sorted(_aggregate_uuids(conn, row.id)),
    }
    recorder.note(
        conn,
        recorder.Change(
            recorder.PROVIDER_DELETE,
            provider_id=row.id,
            provider_uuid=row.uuid,
            provider_generation=row.generation,
            was=was,
        ),
    )


def traits_set(
    conn: sa.Connection, provider: sa.Row, generation: int, before: set[str], after: set[str]
) -> None:
    """A provider's traits replaced (names before and after), leaving it at `generation`."""
    _set_changed(conn, recorder.TRAITS, provider, generation, before, after)


def aggregates_set(
    conn: sa.Connection, provider: sa.Row, generation: int, before: set[str], after: set[str]
) -> None:
    """A provider's aggregates replaced (uuids before and after); the provider is
    named as changed even when they are the same (as before 1.19 no bump does)."""
    provider_bumps.changed(conn, (provider.id,))
    _set_changed(conn, recorder.AGGREGATES, provider, generation, before, after)


def _set_changed(
    conn: sa.Connection, action: str, provider: sa.Row, generation: int, was: set, now: set
) -> None:
    if recording() and was != now:
        change = recorder.Change(
            action,
            provider_id=provider.id,
            provider_uuid=provider.uuid,
            provider_generation=generation,
            was=sorted(was),
            now=sorted(now),
        )
        recorder.note(conn, change)


def _record(record: Any) -> dict[str, Any] | None:
    if record is None:
        return None
    values = dict(record.amounts())
    for name in ("total", "reserved", "min_unit", "max_unit", "step_size"):
        values[name] = int(values[name])
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return values


def _class_names(conn: sa.Connection, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rc = t.resource_classes
    return dict(conn.execute(sa.select(rc.c.id, rc.c.name).where(rc.c.id.in_(sorted(ids)))).all())


def _type_names(conn: sa.Connection, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    ct = t.consumer_types
    return dict(conn.execute(sa.select(ct.c.id, ct.c.name).where(ct.c.id.in_(sorted(ids)))).all())


def _uuid_of(conn: sa.Connection, provider_id: int | None) -> str | None:
    if provider_id is None:
        return None
    rp = t.resource_providers
    return conn.execute(sa.select(rp.c.uuid).where(rp.c.id == provider_id)).scalar()


def _trait_names(conn: sa.Connection, provider_id: int) -> list[str]:
    tr, rpt = t.traits, t.resource_provider_traits
    query = (
        sa.select(tr.c.name)
        .join(rpt, rpt.c.trait_id == tr.c.id)
        .where(rpt.c.resource_provider_id == provider_id)
    )
    return list(conn.execute(query).scalars())


def _aggregate_uuids(conn: sa.Connection, provider_id: int) -> list[str]:
    agg, rpa = t.placement_aggregates, t.resource_provider_aggregates
    query = (
        sa.select(agg.c.uuid)
        .join(rpa, rpa.c.aggregate_id == agg.c.id)
        .where(rpa.c.resource_provider_id == provider_id)
    )
    return list(conn.execute(query).scalars())


# ---------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class Filter:
    """What `GET /tally/v1/history` asks for: newest first, `limit` rows older
    than the row `marker` (the last of the page before)."""

    consumer: str | None = None
    provider: str | None = None
    since: dt.datetime | None = None  # naive UTC, inclusive
    until: dt.datetime | None = None  # naive UTC, exclusive
    limit: int = 100
    marker: int | None = None


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of the history."""

    id: int
    time: dt.datetime
    action: str
    request_id: str | None
    global_request_id: str | None
    user_id: str | None
    project_id: str | None
    consumer: str | None
    consumer_project_id: str | None
    consumer_user_id: str | None
    consumer_type: str | None
    consumer_generation: int | None
    provider: str | None
    provider_generation: int | None
    resource_class: str | None
    before: int | None
    after: int | None
    detail: dict[str, Any] | None


def entries(engine: sa.Engine, wanted: Filter) -> list[Entry]:
    h = t.history
    query = sa.select(h).order_by(h.c.id.desc()).limit(min(wanted.limit, MAX_LIMIT))
    if wanted.consumer is not None:
        query = query.where(h.c.consumer_uuid == wanted.consumer)
    if wanted.provider is not None:
        query = query.where(h.c.provider_uuid == wanted.provider)
    if wanted.since is not None:
        query = query.where(h.c.created_at >= wanted.since)
    if wanted.until is not None:
        query = query.where(h.c.created_at < wanted.until)
    if wanted.marker is not None:
        query = query.where(h.c.id < wanted.marker)
    with transaction(engine) as conn:
        rows = conn.execute(query).all()
    return [_entry(row) for row in rows]


def _entry(row: sa.Row) -> Entry:
    return Entry(
        id=row.id,
        time=row.created_at,
        action=row.action,
        request_id=row.request_id,
        global_request_id=row.global_request_id,
        user_id=row.user_id,
        project_id=row.project_id,
        consumer=row.consumer_uuid,
        consumer_project_id=row.consumer_project_id,
        consumer_user_id=row.consumer_user_id,
        consumer_type=row.consumer_type,
        consumer_generation=row.consumer_generation,
        provider=row.provider_uuid,
        provider_generation=row.provider_generation,
        resource_class=row.resource_class,
        before=row.amount_before,
        after=row.amount_after,
        detail=orjson.loads(row.detail) if row.detail else None,
    )


# ---------------------------------------------------------------- retention


def prune(
    engine: sa.Engine,
    keep_days: int,
    keep_rows: int,
    batch: int = BATCH,
    now: dt.datetime | None = None,
) -> int:
    """One batch of pruning (`retention.prune_oldest`); the number deleted."""
    return retention.prune_oldest(engine, t.history, keep_days, keep_rows, batch, now)


class Pruner:
    """Keeps the history within its retention: `poke` (after each write request) at
    most once per `every` seconds starts a thread that prunes batch after batch,
    each in its own short transaction with a pause between, so writers take turns
    with it and no request waits for it."""

    def __init__(
        self, engine: sa.Engine, keep_days: int, keep_rows: int, every: float = 60.0
    ) -> None:
        self.engine, self.keep_days, self.keep_rows = engine, keep_days, keep_rows
        self.every = every
        self.due = time.monotonic() + every
        self.running = threading.Lock()

    def poke(self) -> threading.Thread | None:
        """Start a pruning pass if one is due and none is running (the thread)."""
        if (self.keep_days <= 0 and self.keep_rows <= 0) or time.monotonic() < self.due:
            return None
        if not self.running.acquire(blocking=False):
            return None
        self.due = time.monotonic() + self.every
        thread = threading.Thread(target=self.run, name="tally-history-prune", daemon=True)
        thread.start()
        return thread

    def run(self, seconds: float = 10.0, pause: float = 0.02) -> None:
        """Prune for at most `seconds` (then the next pass goes on); the lock
        `poke` took is released at the end."""
        try:
            deadline = time.monotonic() + seconds
            while prune(self.engine, self.keep_days, self.keep_rows) == BATCH:
                if time.monotonic() > deadline:
                    break
                time.sleep(pause)
        except Exception:  # the next pass retries; writes never depend on it
            log.warning("pruning the claim history failed", exc_info=True)
        finally:
            self.running.release()
