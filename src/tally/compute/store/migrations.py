"""Migrations (live, cold, evacuation), with the lab's stepping state."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from tally.compute.store import matching
from tally.db.compute_schema import compute_migrations as t
from tally.db.transaction import transaction

FINAL = ("completed", "confirmed", "reverted", "cancelled", "error", "failed", "done")


def _row(row: sa.Row) -> dict[str, Any]:
    return dict(row._mapping)


def create(engine: sa.Engine, migration: Mapping[str, Any]) -> dict[str, Any]:
    with transaction(engine, write=True) as conn:
        conn.execute(t.insert().values(**migration))
        return _row(conn.execute(sa.select(t).where(t.c.uuid == migration["uuid"])).one())


def get(engine: sa.Engine, ref: str | int) -> dict[str, Any] | None:
    """By uuid or integer id."""
    column = t.c.id if str(ref).isdigit() else t.c.uuid
    value = int(ref) if str(ref).isdigit() else str(ref)
    with transaction(engine) as conn:
        row = conn.execute(sa.select(t).where(column == value)).first()
    return _row(row) if row else None


def listing(
    engine: sa.Engine,
    *,
    server: str | None = None,
    status: Iterable[str] | None = None,
    host: str | None = None,
    migration_type: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    source: str | None = None,
    changed_since: dt.datetime | None = None,
    changed_before: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Newest first. `host`: either end; `source`: the source only; `changed_*`:
    `updated_at` at or after / at or before."""
    query = matching(
        sa.select(t).order_by(t.c.id.desc()),
        t,
        server_uuid=server,
        migration_type=migration_type,
        project_id=project_id,
        user_id=user_id,
        source_compute=source,
    )
    if status is not None:
        query = query.where(t.c.status.in_(list(status)))
    if host is not None:
        query = query.where(sa.or_(t.c.source_compute == host, t.c.dest_compute == host))
    if changed_since is not None:
        query = query.where(t.c.updated_at >= changed_since)
    if changed_before is not None:
        query = query.where(t.c.updated_at <= changed_before)
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def in_progress(engine: sa.Engine, **filters: Any) -> list[dict[str, Any]]:
    return [m for m in listing(engine, **filters) if m["status"] not in FINAL]


def due(engine: sa.Engine, now: dt.datetime) -> list[dict[str, Any]]:
    """Unfinished, not stuck, and due to advance (oldest first)."""
    query = (
        sa.select(t)
        .where(
            t.c.status.not_in(FINAL),
            t.c.stuck.is_(False),
            t.c.next_step_at.is_not(None),
            t.c.next_step_at <= now,
        )
        .order_by(t.c.id)
    )
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def advance(
    engine: sa.Engine, uuid: str, seen: str, now: dt.datetime, **values: Any
) -> dict[str, Any] | None:
    """Change a migration that is still in status `seen` (compare-and-swap: two
    workers stepping the same migration move it once); None if it had moved on."""
    with transaction(engine, write=True) as conn:
        done = conn.execute(
            t.update().where(t.c.uuid == uuid, t.c.status == seen).values(updated_at=now, **values)
        )
        if done.rowcount != 1:
            return None
        return _row(conn.execute(sa.select(t).where(t.c.uuid == uuid)).one())


def settle(
    engine: sa.Engine, migration: Mapping[str, Any], now: dt.datetime, status: str, **values: Any
) -> dict[str, Any] | None:
    """`advance` a migration from the status it was seen in to `status`, with no
    further step due; None if it had moved on."""
    return advance(
        engine,
        migration["uuid"],
        migration["status"],
        now,
        status=status,
        next_step_at=None,
        **values,
    )
