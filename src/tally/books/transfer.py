"""Copy Placement's books between upstream Placement's schema (`tally.db.upstream_schema`)
and Tally's (`tally.db.schema`), both ways, keeping every id Nova or an operator can
see or rely on: provider, aggregate, consumer, inventory and allocation ids, resource
class ids, and provider and consumer generations, unchanged.

The books are read whole, in one read-only transaction, into `Books` (Tally's shape:
a consumer's project and user as their external ids, a provider's traits by name),
then written in one transaction of the target, where `verify` compares the two sides
before it commits. What differs between the schemas is only: projects and users
(upstream's own tables, Tally's consumer columns), trait ids (each side's own; traits
are matched by name), and the providers' self references, written in a second pass
because upstream declares them as foreign keys.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as tally
from tally.db import upstream_schema as upstream
from tally.progress import Progress, quiet

BATCH = 1000
# The books, in the order they are written.
TABLES = (
    "resource_classes",
    "traits",
    "resource_providers",
    "inventories",
    "placement_aggregates",
    "resource_provider_aggregates",
    "resource_provider_traits",
    "consumer_types",
    "consumers",
    "allocations",
)
_TIMES = ("created_at", "updated_at")


class TransferError(Exception):
    """The copy cannot be made as asked (the message says why); nothing was written."""


@dataclasses.dataclass
class Books:
    """Placement's data in neutral form: table name -> rows (dicts)."""

    rows: dict[str, list[dict[str, Any]]]
    notes: list[str] = dataclasses.field(default_factory=list)

    def count(self, table: str) -> int:
        return len(self.rows[table])


class TooManyRows(TransferError):
    """A table of the source holds more rows than the importer reads (`max_rows`)."""

    def __init__(self, table: str, max_rows: int) -> None:
        super().__init__(
            f"the source's {table} holds more than {max_rows:,} rows, the most `tally db "
            f"import` reads of one table (setting import_max_rows); nothing was written"
        )


class Counted:
    """One phase counting rows over several tables: `progress(phase, done, total)`
    after each batch (`total` 0 when not known beforehand)."""

    def __init__(self, progress: Progress, phase: str, total: int = 0) -> None:
        self.progress, self.phase, self.total, self.done = progress, phase, total, 0
        progress(phase, 0, total)

    def add(self, rows: int) -> None:
        self.done += rows
        self.progress(self.phase, self.done, self.total)

    def finish(self) -> None:
        self.progress(self.phase, self.total or self.done, self.total)


def read_rows(
    conn: sa.Connection,
    table: sa.Table,
    order: str | None = None,
    max_rows: int | None = None,
    counted: Counted | None = None,
) -> list[dict]:
    """The rows of `table`, fetched BATCH at a time (each batch `counted`). With
    `max_rows`, the database is asked for one more than that, before any ordering
    (an ORDER BY over an endless view never returns), and TooManyRows is raised if
    it has them."""
    source: sa.FromClause = table
    if max_rows:
        source = sa.select(table).limit(max_rows + 1).subquery(table.name)
    query = sa.select(source)
    if order:
        query = query.order_by(source.c[order])
    rows: list[dict] = []
    result = conn.execution_options(stream_results=True, max_row_buffer=BATCH).execute(query)
    try:
        for batch in result.partitions(BATCH):
            rows.extend(dict(row._mapping) for row in batch)
            if counted is not None:
                counted.add(len(batch))
            if max_rows and len(rows) > max_rows:
                raise TooManyRows(table.name, max_rows)
    finally:
        result.close()
    return rows


def _pick(row: dict, *names: str) -> dict:
    return {name: row[name] for name in (*names, *_TIMES)}


# ---------------------------------------------------------------- reading


def read_upstream(
    conn: sa.Connection, max_rows: int | None = None, progress: Progress = quiet
) -> Books:
    """Upstream's books (revision 422ece571366 or a082b8bb98d0); TooManyRows for a
    table past `max_rows` (None: no bound)."""
    u = upstream
    counted = Counted(progress, "read rows")

    def rows_of(table: sa.Table, order: str | None = None) -> list[dict]:
        return read_rows(conn, table, order, max_rows, counted)

    rows: dict[str, list[dict]] = {}
    notes: list[str] = []
    rows["resource_classes"] = rows_of(u.resource_classes, "id")
    trait_rows = rows_of(u.traits, "id")
    rows["traits"] = [_pick(r, "name") for r in trait_rows]
    trait_names = {r["id"]: r["name"] for r in trait_rows}
    providers = rows_of(u.resource_providers, "id")
    for row in providers:
        if row["name"] is None:
            row["name"] = row["uuid"]
            notes.append(f"provider {row['uuid']} had no name: named by its uuid")
        if row["generation"] is None:
            row["generation"] = 0
            notes.append(f"provider {row['uuid']} had no generation: given 0")
    rows["resource_providers"] = providers
    rows["inventories"] = rows_of(u.inventories, "id")
    aggregates = rows_of(u.placement_aggregates, "id")
    missing = [str(r["id"]) for r in aggregates if r["uuid"] is None]
    if missing:
        raise TransferError(f"aggregate row(s) {', '.join(missing)} have no uuid")
    rows["placement_aggregates"] = aggregates
    rows["resource_provider_aggregates"] = rows_of(u.resource_provider_aggregates)
    rows["resource_provider_traits"] = [
        {**_pick(r, "resource_provider_id"), "trait": trait_names.get(r["trait_id"])}
        for r in rows_of(u.resource_provider_traits)
    ]
    rows["consumer_types"] = rows_of(u.consumer_types, "id")
    projects = {r["id"]: r["external_id"] for r in rows_of(u.projects)}
    users = {r["id"]: r["external_id"] for r in rows_of(u.users)}
    consumers = []
    for row in rows_of(u.consumers, "id"):
        if row["project_id"] not in projects or row["user_id"] not in users:
            raise TransferError(
                f"consumer {row['uuid']} names project id {row['project_id']} / user id "
                f"{row['user_id']}, missing from the projects / users tables"
            )
        consumers.append(
            {
                **_pick(row, "id", "uuid", "generation", "consumer_type_id"),
                "project_id": projects[row["project_id"]],
                "user_id": users[row["user_id"]],
            }
        )
    rows["consumers"] = consumers
    rows["allocations"] = rows_of(u.allocations, "id")
    return Books(rows, notes)


def read_tally(
    conn: sa.Connection, max_rows: int | None = None, progress: Progress = quiet
) -> Books:
    """Tally's books (its Placement tables; the lab's tables stay behind)."""
    t = tally
    counted = Counted(progress, "read rows")

    def rows_of(table: sa.Table, order: str | None = None) -> list[dict]:
        return read_rows(conn, table, order, max_rows, counted)

    rows = {
        name: rows_of(getattr(t, name), None if name.startswith("resource_provider_") else "id")
        for name in TABLES
        if name not in ("traits", "resource_provider_traits")
    }
    trait_rows = rows_of(t.traits, "id")
    rows["traits"] = [_pick(r, "name") for r in trait_rows]
    trait_names = {r["id"]: r["name"] for r in trait_rows}
    rows["resource_provider_traits"] = [
        {**_pick(r, "resource_provider_id"), "trait": trait_names.get(r["trait_id"])}
        for r in rows_of(t.resource_provider_traits)
    ]
    return Books(rows)


# ---------------------------------------------------------------- writing


def _insert(conn: sa.Connection, table: sa.Table, rows: list[dict], written: Counted) -> None:
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        conn.execute(table.insert(), chunk)
        written.add(len(chunk))


def _writing(books: Books, progress: Progress) -> Counted:
    """The write of every table as one phase, `write rows DONE/TOTAL`."""
    return Counted(progress, "write rows", sum(len(rows) for rows in books.rows.values()))


def _classes(conn: sa.Connection, table: sa.Table, rows: list[dict], written: Counted) -> None:
    """Resource classes keep their ids; the target's own (standard) rows must agree."""
    have = {r.name: r.id for r in conn.execute(sa.select(table.c.name, table.c.id))}
    taken = {v: k for k, v in have.items()}
    new = []
    for row in rows:
        if row["name"] in have and have[row["name"]] != row["id"]:
            raise TransferError(
                f"resource class {row['name']} has id {row['id']} in the source but "
                f"{have[row['name']]} in the target"
            )
        if row["name"] not in have:
            if row["id"] in taken:
                raise TransferError(
                    f"resource class id {row['id']} is {row['name']} in the source but "
                    f"{taken[row['id']]} in the target"
                )
            new.append(_pick(row, "id", "name"))
    if conn.dialect.name in ("mysql", "mariadb"):
        # VCPU's id is 0, which an AUTO_INCREMENT column (upstream's) takes as "the
        # next id" unless told otherwise, as upstream's own sync tells it
        conn.exec_driver_sql(
            "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@sql_mode, ''), 'NO_AUTO_VALUE_ON_ZERO')"
        )
    _insert(conn, table, new, written)


def _traits(conn: sa.Connection, table: sa.Table, rows: list[dict], written: Counted) -> dict:
    """Traits by name: the target's ids, new ones for the traits it lacks."""
    have = {r.name for r in conn.execute(sa.select(table.c.name))}
    _insert(conn, table, [r for r in rows if r["name"] not in have], written)
    return {r.name: r.id for r in conn.execute(sa.select(table.c.name, table.c.id))}


def _providers(conn: sa.Connection, table: sa.Table, rows: list[dict], written: Counted) -> None:
    """Providers without their parent and root first, then those: any order of ids
    satisfies upstream's foreign keys."""
    flat = [
        {**_pick(r, "id", "uuid", "name", "generation"), "root_provider_id": None,
         "parent_provider_id": None}
        for r in rows
    ]  # fmt: skip
    _insert(conn, table, flat, written)
    links = [
        {"rp_id": r["id"], "root": r["root_provider_id"], "parent": r["parent_provider_id"]}
        for r in rows
        if r["root_provider_id"] is not None or r["parent_provider_id"] is not None
    ]
    update = (
        table.update()
        .where(table.c.id == sa.bindparam("rp_id"))
        .values(root_provider_id=sa.bindparam("root"), parent_provider_id=sa.bindparam("parent"))
    )
    for start in range(0, len(links), BATCH):
        conn.execute(update, links[start : start + BATCH])


def _rp_traits(rows: dict[str, list[dict]], trait_ids: dict[str, int]) -> list[dict]:
    return [
        {**_pick(r, "resource_provider_id"), "trait_id": trait_ids[r["trait"]]}
        for r in rows["resource_provider_traits"]
    ]


def write_tally(conn: sa.Connection, books: Books, progress: Progress) -> None:
    """The books into Tally's (empty) Placement tables."""
    t, rows, written = tally, books.rows, _writing(books, progress)
    _classes(conn, t.resource_classes, rows["resource_classes"], written)
    trait_ids = _traits(conn, t.traits, rows["traits"], written)
    _providers(conn, t.resource_providers, rows["resource_providers"], written)
    for name in ("inventories", "placement_aggregates", "resource_provider_aggregates"):
        _insert(conn, getattr(t, name), rows[name], written)
    _insert(conn, t.resource_provider_traits, _rp_traits(rows, trait_ids), written)
    for name in ("consumer_types", "consumers", "allocations"):
        _insert(conn, getattr(t, name), rows[name], written)
    written.finish()
    fix_sequences(conn, [getattr(t, name) for name in TABLES])
    journal.touch_everything(conn)  # running workers reload their candidates index


def write_upstream(conn: sa.Connection, books: Books, progress: Progress) -> None:
    """The books into upstream's (empty) tables at revision `upstream.HEAD`. Every row
    upstream writes has a `created_at` (its `last-modified` headers compare them, and
    fail on a missing one): rows without one (Tally's standard classes and traits) are
    given the time of the export."""
    u = upstream
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    rows = {
        name: [{**r, "created_at": r["created_at"] or now} for r in table_rows]
        for name, table_rows in books.rows.items()
    }
    written = _writing(books, progress)
    _classes(conn, u.resource_classes, rows["resource_classes"], written)
    trait_ids = _traits(conn, u.traits, rows["traits"], written)
    _providers(conn, u.resource_providers, rows["resource_providers"], written)
    for name in ("inventories", "placement_aggregates", "resource_provider_aggregates"):
        _insert(conn, getattr(u, name), rows[name], written)
    _insert(conn, u.resource_provider_traits, _rp_traits(rows, trait_ids), written)
    _insert(conn, u.consumer_types, rows["consumer_types"], written)
    projects = _external_ids(conn, u.projects, (r["project_id"] for r in rows["consumers"]), now)
    users = _external_ids(conn, u.users, (r["user_id"] for r in rows["consumers"]), now)
    consumers = [
        {**r, "project_id": projects[r["project_id"]], "user_id": users[r["user_id"]]}
        for r in rows["consumers"]
    ]
    _insert(conn, u.consumers, consumers, written)
    _insert(conn, u.allocations, rows["allocations"], written)
    written.finish()
    fix_sequences(conn, [t for t in u.metadata.sorted_tables if t.name != "alembic_version"])


def _external_ids(
    conn: sa.Connection, table: sa.Table, ids: Iterable[str], now: datetime.datetime
) -> dict[str, int]:
    """Upstream's projects or users rows for these external ids: id by external id."""
    have = {r.external_id for r in conn.execute(sa.select(table.c.external_id))}
    new = sorted(set(ids) - have)
    if new:
        conn.execute(table.insert(), [{"external_id": ext, "created_at": now} for ext in new])
    return {r.external_id: r.id for r in conn.execute(sa.select(table.c.external_id, table.c.id))}


def fix_sequences(conn: sa.Connection, tables: list[sa.Table]) -> None:
    """On PostgreSQL, rows written with their ids leave each `serial` sequence
    behind: move it past the largest id (MySQL and SQLite follow by themselves)."""
    if conn.dialect.name != "postgresql":
        return
    for table in tables:
        if "id" not in table.c:
            continue
        seq = conn.execute(
            sa.text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table.name}
        ).scalar()
        if seq:
            conn.execute(
                sa.text(
                    f"SELECT setval(:seq, COALESCE((SELECT MAX(id) FROM {table.name}), 1), "
                    f"(SELECT MAX(id) FROM {table.name}) IS NOT NULL)"
                ),
                {"seq": seq},
            )
