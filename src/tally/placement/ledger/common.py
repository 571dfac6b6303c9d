"""Primitives every ledger topic shares: lookups by public name, row locks. (The
generation compare-and-swap that guards every provider write is
`provider_bumps.bump_generation`.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.engine import is_sqlite
from tally.db.transaction import at_commit
from tally.placement.error_types import ConcurrentUpdate, NotFound


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def locking(conn: sa.Connection, query: sa.Select) -> sa.Select:
    """`query ... FOR UPDATE`, except on SQLite, where `BEGIN IMMEDIATE` already
    made this transaction the only writer."""
    return query if is_sqlite(conn) else query.with_for_update()


# Statements are built once and reused with bound parameters: SQLAlchemy
# caches their compiled SQL either way, but building a statement costs about
# as much as running a small one. `_prebuilt` keys them by what shapes them.
_PREBUILT: dict[tuple, sa.Executable] = {}


def _prebuilt(key: tuple, build: Callable[[], sa.Executable]) -> sa.Executable:
    statement = _PREBUILT.get(key)
    if statement is None:
        statement = _PREBUILT[key] = build()
    return statement


def row_by_name(
    conn: sa.Connection, table: sa.Table, name: str, *, for_update: bool = False
) -> sa.Row | None:
    """The row of `table` whose `name` column is `name` (locked if asked), or None."""
    lock = for_update and not is_sqlite(conn)
    query = _prebuilt(
        ("row_by_name", table.name, lock),
        lambda: _maybe_locked(sa.select(table).where(table.c.name == sa.bindparam("name")), lock),
    )
    return conn.execute(query, {"name": name}).first()


Lookup = tuple[sa.Table, str, Iterable[str]]  # table, its key column, the keys wanted


def ids_by_name(
    conn: sa.Connection, table: sa.Table, names: Iterable[str], *, column: str = "name"
) -> dict[str, int]:
    """`{name: id}` for the rows of `table` whose `column` is one of `names`
    (absent names are simply missing from the result)."""
    return ids_by_names(conn, (table, column, names))[0]


def ids_by_names(conn: sa.Connection, *lookups: Lookup) -> list[dict[str, int]]:
    """`ids_by_name` of each lookup, `{key: id}` in the order asked, read by one
    statement (a claim names providers, classes and a consumer type: one round
    trip instead of three)."""
    wanted = [sorted(set(keys)) for _, _, keys in lookups]
    parts = [(i, table, column) for i, (table, column, _) in enumerate(lookups) if wanted[i]]
    found: list[dict[str, int]] = [{} for _ in lookups]
    if not parts:
        return found

    def build() -> sa.Executable:
        selects = [
            sa.select(
                sa.literal_column(str(i)).label("part"),
                table.c[column].label("key"),
                table.c.id,
            ).where(in_bound_list(table.c[column], f"keys{i}"))
            for i, table, column in parts
        ]
        return selects[0] if len(selects) == 1 else sa.union_all(*selects)

    key = ("ids_by_names", *((i, table.name, column) for i, table, column in parts))
    params = {f"keys{i}": wanted[i] for i, _, _ in parts}
    for part, name, row_id in conn.execute(_prebuilt(key, build), params):
        found[int(part)][name] = row_id
    return found


def named_or_linked(
    table: sa.Table, key: sa.Column, link: sa.Column, label: str, *columns: sa.ColumnElement
) -> sa.Select:
    """`columns` of the rows of `table` whose `key` is one of `:names` or that the
    link table of `link` (a column naming `table`'s id, beside `resource_provider_id`)
    joins to provider `:provider_id`, with `label` telling the linked ones: what a
    write of a provider's traits or aggregates reads once the provider is locked.
    (One IN of a UNION, so that each part reads its own index.)"""
    here = link.table.c.resource_provider_id == sa.bindparam("provider_id")
    named = sa.select(table.c.id).where(in_bound_list(key, "names"))
    return (
        sa.select(*columns, link.is_not(None).label(label))
        .select_from(table.outerjoin(link.table, sa.and_(link == table.c.id, here)))
        .where(table.c.id.in_(sa.union_all(named, sa.select(link).where(here))))
    )


def _maybe_locked(query: sa.Select, lock: bool) -> sa.Select:
    return query.with_for_update() if lock else query


def has_rows(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool]) -> bool:
    """Whether any row of `table` matches `where` (reads at most one)."""
    return conn.execute(sa.select(table.c.id).where(where).limit(1)).first() is not None


_PROVIDER_ROW = sa.select(t.resource_providers).where(
    t.resource_providers.c.uuid == sa.bindparam("uuid")
)
_PROVIDER_ROW_LOCKED = _PROVIDER_ROW.with_for_update()
_LOCK_PROVIDERS = (
    sa.select(t.resource_providers.c.id)
    .where(in_bound_list(t.resource_providers.c.id, "ids"))
    .order_by(t.resource_providers.c.id)
    .with_for_update()
)
# When a provider last changed, as listings show it (Last-Modified).
PROVIDER_STAMP = sa.func.coalesce(
    t.resource_providers.c.updated_at, t.resource_providers.c.created_at, type_=sa.DateTime
)


def newest_stamp(bind: sa.Connection | sa.Engine, raw: Iterable) -> dt.datetime | None:
    """The newest of raw `PROVIDER_STAMP` values as `bind`'s driver returned them
    (datetimes, or on SQLite strings of one fixed-width format: either way the
    newest is their max), as a datetime."""
    newest = max(filter(None, raw), default=None)
    if newest is None:
        return None
    dialect = bind.dialect
    convert = PROVIDER_STAMP.type.dialect_impl(dialect).result_processor(dialect, None)
    return convert(newest) if convert is not None else newest


def provider_row(
    conn: sa.Connection, uuid: str, *, for_update: bool = False, missing: str | None = None
) -> sa.Row:
    """The provider row of `uuid`, or 404 with `missing` (default: naming the uuid)."""
    query = _PROVIDER_ROW_LOCKED if for_update and not is_sqlite(conn) else _PROVIDER_ROW
    row = conn.execute(query, {"uuid": uuid}).first()
    if row is None:
        raise NotFound(missing or f"No resource provider with uuid {uuid} found")
    return row


def lock_providers(conn: sa.Connection, provider_ids: list[int]) -> None:
    """Row-lock providers (in id order, so writers never deadlock) until commit.

    SQLite needs nothing: `BEGIN IMMEDIATE` already made this the only writer.
    """
    if is_sqlite(conn) or not provider_ids:
        return
    conn.execute(_LOCK_PROVIDERS, {"ids": sorted(set(provider_ids))}).all()


def swap_generation(
    conn: sa.Connection, statement: sa.Executable, params: dict, last: bool, conflict: str
) -> None:
    """The one compare-and-swap of a generation (a provider's or a consumer's):
    `statement` updates where the generation is still the one seen, else 409
    `placement.concurrent_update` saying `conflict`. `last`: the caller locked the
    row and nothing later reads it, so the swap goes with the COMMIT."""
    if last:
        at_commit(conn, statement, params)
    elif conn.execute(statement, params).rowcount != 1:
        raise ConcurrentUpdate(conflict)
