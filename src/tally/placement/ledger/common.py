"""Primitives every ledger topic shares: lookups by public name, row locks,
and the generation compare-and-swap that guards every provider write."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import is_sqlite
from tally.placement.ledger.errors import BadRequest, ConcurrentUpdate, NotFound


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def locking(conn: sa.Connection, query: sa.Select) -> sa.Select:
    """`query ... FOR UPDATE`, except on SQLite, where `BEGIN IMMEDIATE` already
    made this transaction the only writer."""
    return query if is_sqlite(conn) else query.with_for_update()


def row_by_name(
    conn: sa.Connection, table: sa.Table, name: str, *, for_update: bool = False
) -> sa.Row | None:
    """The row of `table` whose `name` column is `name` (locked if asked), or None."""
    query = sa.select(table).where(table.c.name == name)
    return conn.execute(locking(conn, query) if for_update else query).first()


def ids_by_name(
    conn: sa.Connection, table: sa.Table, names: Iterable[str], *, column: str = "name"
) -> dict[str, int]:
    """`{name: id}` for the rows of `table` whose `column` is one of `names`
    (absent names are simply missing from the result)."""
    names = set(names)
    if not names:
        return {}
    key = table.c[column]
    rows = conn.execute(sa.select(key.label("key"), table.c.id).where(key.in_(names)))
    return {row.key: row.id for row in rows}


def has_rows(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool]) -> bool:
    """Whether any row of `table` matches `where` (reads at most one)."""
    return conn.execute(sa.select(table.c.id).where(where).limit(1)).first() is not None


def provider_row(
    conn: sa.Connection, uuid: str, *, for_update: bool = False, missing: str | None = None
) -> sa.Row:
    """The provider row of `uuid`, or 404 with `missing` (default: naming the uuid)."""
    query = sa.select(t.resource_providers).where(t.resource_providers.c.uuid == uuid)
    row = conn.execute(locking(conn, query) if for_update else query).first()
    if row is None:
        raise NotFound(missing or f"No resource provider with uuid {uuid} found")
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
