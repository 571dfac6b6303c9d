"""Compute hosts: a nova-compute service and its compute node, one row each."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from tally.compute.store import matching
from tally.db.compute_schema import compute_hosts as t
from tally.db.transaction import transaction


def _row(row: sa.Row) -> dict[str, Any]:
    return dict(row._mapping)


def create(engine: sa.Engine, hosts: Iterable[Mapping[str, Any]]) -> None:
    rows = [dict(h) for h in hosts]
    if rows:
        with transaction(engine, write=True) as conn:
            conn.execute(t.insert(), rows)


def listing(
    engine: sa.Engine, *, name: str | None = None, uuids: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    query = matching(sa.select(t).order_by(t.c.id), t, name=name)
    if uuids is not None:
        query = query.where(t.c.uuid.in_(list(uuids)))
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def get(
    engine: sa.Engine,
    *,
    uuid: str | None = None,
    name: str | None = None,
    provider: str | None = None,
) -> dict[str, Any] | None:
    query = matching(sa.select(t), t, uuid=uuid, name=name, provider_uuid=provider)
    with transaction(engine) as conn:
        row = conn.execute(query).first()
    return _row(row) if row else None


def existing_names(engine: sa.Engine, names: Iterable[str]) -> set[str]:
    names = list(names)
    with transaction(engine) as conn:
        return set(conn.execute(sa.select(t.c.name).where(t.c.name.in_(names))).scalars())


def update(engine: sa.Engine, uuid: str, now: dt.datetime, **values: Any) -> dict[str, Any]:
    with transaction(engine, write=True) as conn:
        conn.execute(t.update().where(t.c.uuid == uuid).values(updated_at=now, **values))
        return _row(conn.execute(sa.select(t).where(t.c.uuid == uuid)).one())


def mark_reported(engine: sa.Engine, uuids: Iterable[str], now: dt.datetime) -> None:
    with transaction(engine, write=True) as conn:
        conn.execute(t.update().where(t.c.uuid.in_(list(uuids))).values(reported_at=now))


def due_for_report(engine: sa.Engine, before: dt.datetime) -> list[dict[str, Any]]:
    """Hosts that are up and last reported before `before` (or never)."""
    query = sa.select(t).where(
        t.c.forced_down.is_(False), sa.or_(t.c.reported_at.is_(None), t.c.reported_at < before)
    )
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def delete(engine: sa.Engine, uuid: str) -> None:
    with transaction(engine, write=True) as conn:
        conn.execute(t.delete().where(t.c.uuid == uuid))


def stop_all(engine: sa.Engine, now: dt.datetime) -> None:
    """Every host down at once: the resource tracker leaves them alone from now."""
    with transaction(engine, write=True) as conn:
        conn.execute(t.update().values(forced_down=True, updated_at=now))
