"""Primitives every ledger topic shares: lookups by public name, row locks,
and the generation compare-and-swap that guards every provider write."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import is_sqlite
from tally.placement.ledger.errors import BadRequest, ConcurrentUpdate, NotFound


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def provider_row(conn: sa.Connection, uuid: str, *, for_update: bool = False) -> sa.Row:
    """The provider row of `uuid`, or 404 naming it."""
    query = sa.select(t.resource_providers).where(t.resource_providers.c.uuid == uuid)
    if for_update and not is_sqlite(conn):
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise NotFound(f"No resource provider with uuid {uuid} found")
    return row


def lock_providers(conn: sa.Connection, provider_ids: list[int]) -> None:
    """Row-lock providers (in id order, so writers never deadlock) until commit.

    SQLite needs nothing: `BEGIN IMMEDIATE` already made this the only writer.
    """
    if is_sqlite(conn) or not provider_ids:
        return
    conn.execute(
        sa.select(t.resource_providers.c.id)
        .where(t.resource_providers.c.id.in_(sorted(set(provider_ids))))
        .order_by(t.resource_providers.c.id)
        .with_for_update()
    ).all()


def bump_generation(conn: sa.Connection, provider_id: int, seen: int, uuid: str) -> int:
    """Compare-and-swap the provider generation; the new generation, or 409
    `placement.concurrent_update` when someone else changed it since `seen`."""
    result = conn.execute(
        t.resource_providers.update()
        .where(t.resource_providers.c.id == provider_id)
        .where(t.resource_providers.c.generation == seen)
        .values(generation=seen + 1, updated_at=utcnow())
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            f"resource provider generation conflict for {uuid}: "
            "another thread updated it, please retry"
        )
    return seen + 1


def resource_class_ids(conn: sa.Connection, names: list[str] | set[str]) -> dict[str, int]:
    """Ids of resource classes by name; 400 naming the first unknown class."""
    names = set(names)
    if not names:
        return {}
    rows = conn.execute(
        sa.select(t.resource_classes.c.name, t.resource_classes.c.id).where(
            t.resource_classes.c.name.in_(names)
        )
    ).all()
    found = {row.name: row.id for row in rows}
    for name in sorted(names):
        if name not in found:
            raise BadRequest(f"Unknown resource class in inventory or request: {name}")
    return found


def resource_class_names(conn: sa.Connection) -> dict[int, str]:
    """Every resource class name by id."""
    return {
        row.id: row.name
        for row in conn.execute(sa.select(t.resource_classes.c.id, t.resource_classes.c.name))
    }


def require_found(row: sa.Row | None, what: str) -> sa.Row:
    if row is None:
        raise NotFound(what)
    return row
