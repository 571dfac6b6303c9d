"""The ledger journal: which providers each write transaction changed, kept so that
no two writes on different connections ever update the same row.

Every worker keeps an in-memory index of the providers for the candidate search.
Before answering it reads the journal's total; when another worker (or host) wrote
since, it replays the changes it has not seen, provider by provider.

A write transaction names the providers it changed with `touch` (only the ledger's
generation bumps do: `tally.placement.ledger.provider_bumps`), and only inside
`tally.db.transaction(write=True)`, which runs `_flush` just before it commits (on a
bare `engine.begin()` nothing would flush the note: `touch` refuses). What no write
can forget is derived from the tables it wrote, as it commits (`_derive`): a change of
resource classes or traits is noted as such, and provider tables written with no
provider named reload every index (logged: a write path that forgot its providers).

Why no row is shared: each database connection that writes is a *writer* with its
own row in `tally_ledger_writers` (a random 62-bit id, made when the connection
is), whose version its transactions bump: a connection runs one transaction at a
time, so a writer's versions commit in the order they are numbered, on every node
of a cluster, and writes on different connections (workers, hosts, Galera nodes)
never meet on a row (on a single row every pair of writes conflicted at Galera's
certification). A reader's state is the vector writer -> version; its fingerprint,
the sum of all versions, grows with every change committed: two reads with the same
sum saw the same changes. Writers idle for `IDLE_RETIRED` are retired: their
versions added to writer 0 and their rows deleted in one transaction, which keeps
the sum (a reader that had not seen all of a retired writer's changes finds writer
0 grown by more than it knew of them, and reloads). Each writer prunes its own
old changes; a reader that finds a writer's versions no longer contiguous reloads.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from tally.db import schema as t
from tally.db.autocommit_reads import read_outside_transaction
from tally.db.transaction import WRITE, at_commit, before_commit, notes

log = logging.getLogger(__name__)

NAMES = 0  # a change row naming no provider: classes or traits were added or removed
EVERYTHING = -1  # reload all (a bulk import)
RETIRED = 0  # the writer that holds retired writers' versions
KEEP = 5_000  # versions of its changes each writer keeps; a reader further behind reloads
MAINTAIN_EVERY = 1000  # flushes of a process between two prunes
IDLE_RETIRED = dt.timedelta(days=1)
LAST = 100  # the journal flushes after every other note
CHUNK = 200  # writers per catch-up query

_W, _C = t.ledger_writers, t.ledger_changes
_WRITER_KEY = "tally.writer"
_SUM_TEXT = f"SELECT sum(version) FROM {_W.name}"  # any driver; NULL on an empty table
_flushes = itertools.count(1)


def touch(conn: sa.Connection, provider_ids: Iterable[int], *, usage_only: bool = False) -> None:
    """Note that this transaction changed these providers (their inventories,
    usage, traits, aggregates, place in a tree, or existence); `usage_only`: only
    their usage and generation (a claim), unless another note says more."""
    pending = _pending(conn, "journal.touch")
    for provider in provider_ids:
        pending[provider] = usage_only and pending.get(provider, True)


def touch_everything(conn: sa.Connection) -> None:
    """Note that every provider may have changed (rows written behind the API's
    back: an import, a repair): every index reloads whole, its kept answers with
    it. (Derived anyway when provider tables are written with no provider named;
    this says it is meant, and keeps the log quiet.)"""
    _pending(conn, "journal.touch_everything")[EVERYTHING] = False


def _pending(conn: sa.Connection, caller: str) -> dict[int, bool]:
    """This write transaction's notes. Only inside `tally.db.transaction`'s write,
    which flushes them: on a bare `engine.begin()` a note would vanish and every
    index answer as before."""
    if not conn.get_execution_options().get(WRITE):
        raise RuntimeError(f"{caller} outside tally.db.transaction(write=True)")
    return notes(conn, "journal", dict, _flush, order=LAST)


NAME_TABLES = frozenset({t.resource_classes.name, t.traits.name})
PROVIDER_TABLES = frozenset(
    table.name
    for table in (
        t.resource_providers,
        t.inventories,
        t.allocations,
        t.resource_provider_traits,
        t.resource_provider_aggregates,
        t.placement_aggregates,
    )
)


def _derive(conn: sa.Connection, wrote: set[str]) -> None:
    """As a write transaction commits, from the tables it wrote: classes or traits
    changed (NAMES); provider tables written with no provider named: EVERYTHING."""
    if wrote & NAME_TABLES:
        _pending(conn, "journal")[NAMES] = False
    providers = wrote & PROVIDER_TABLES
    if providers:
        pending = _pending(conn, "journal")
        if not any(provider > 0 or provider == EVERYTHING for provider in pending):
            log.warning(
                "a write to %s named no provider: every candidates index reloads",
                ", ".join(sorted(providers)),
            )
            pending[EVERYTHING] = False


before_commit(_derive)


def writer_of(conn: sa.Connection) -> int:
    """The writer id of this connection's database connection (made on first use;
    it lives as long as the connection does)."""
    info = conn.connection.info
    writer = info.get(_WRITER_KEY)
    if writer is None:
        writer = info[_WRITER_KEY] = secrets.randbits(62) + 1
    return writer


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _flush(conn: sa.Connection, pending: dict[int, bool]) -> None:
    """Bump this connection's writer and record what this transaction noted under
    its new version. Run inside the transaction, just before commit."""
    if not pending:
        return
    writer, now = writer_of(conn), _now()
    if next(_flushes) % MAINTAIN_EVERY == 0:
        _maintain(conn, writer, now)
    ids = sorted(pending)
    if conn.dialect.name == "postgresql":  # sent with the COMMIT: one round trip
        usage = [pending[p] for p in ids]
        at_commit(conn, _PG_BUMP_RECORD, {"writer": writer, "now": now, "ids": ids, "usage": usage})
        return
    version = _bump(conn, writer, now)
    conn.execute(
        _INSERT_CHANGES,
        [
            {"writer": writer, "version": version, "provider_id": p, "usage_only": pending[p]}
            for p in ids
        ],
    )


_INSERT_CHANGES = _C.insert()
_PG_BUMP_RECORD = sa.text(
    f"WITH v AS (INSERT INTO {_W.name} (writer, version, touched) VALUES (:writer, 1, :now)"
    f" ON CONFLICT (writer) DO UPDATE SET version = {_W.name}.version + 1, touched = :now"
    " RETURNING version)"
    f" INSERT INTO {_C.name} (writer, version, provider_id, usage_only)"
    " SELECT :writer, v.version, changed, usage FROM v,"
    " unnest(CAST(:ids AS integer[]), CAST(:usage AS boolean[])) AS c(changed, usage)"
)


_NOW = sa.bindparam("now", type_=_W.c.touched.type)  # stored as the table's other writes store it
# (built once: building an upsert each write cost a fifth of a claim)
_SQLITE_BUMP = sa.text(
    f"INSERT INTO {_W.name} (writer, version, touched) VALUES (:writer, 1, :now)"
    " ON CONFLICT (writer) DO UPDATE"
    f" SET version = {_W.name}.version + 1, touched = :now RETURNING version"
).bindparams(_NOW)
# MySQL: the new version comes back as the statement's insert id (no second read)
_MYSQL_BUMP = sa.text(
    f"INSERT INTO {_W.name} (writer, version, touched) VALUES (:writer, LAST_INSERT_ID(1), :now)"
    " ON DUPLICATE KEY UPDATE version = LAST_INSERT_ID(version + 1), touched = :now"
).bindparams(_NOW)


def _bump(conn: sa.Connection, writer: int, now: dt.datetime) -> int:
    """This writer's next version (its row made at 1 the first time)."""
    if conn.dialect.name == "sqlite":
        return conn.execute(_SQLITE_BUMP, {"writer": writer, "now": now}).scalar_one()
    return conn.execute(_MYSQL_BUMP, {"writer": writer, "now": now}).lastrowid


def _upsert(conn: sa.Connection, row: dict, by: int, now: dt.datetime) -> sa.Insert:
    """Insert the writer `row`, or add `by` to the version of the one there."""
    grown = {"version": _W.c.version + by, "touched": now}
    if conn.dialect.name in ("mysql", "mariadb"):
        return mysql.insert(_W).values(row).on_duplicate_key_update(grown)
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return (
        dialect.insert(_W).values(row).on_conflict_do_update(index_elements=["writer"], set_=grown)
    )


def _maintain(conn: sa.Connection, writer: int, now: dt.datetime) -> None:
    """Now and then: this writer's changes older than `KEEP` versions go, and
    writers idle past `IDLE_RETIRED` are retired into writer 0 (the only writes
    that touch other writers' rows, once in `MAINTAIN_EVERY` flushes)."""
    mine = conn.execute(sa.select(_W.c.version).where(_W.c.writer == writer)).scalar()
    if mine is not None and mine > KEEP:
        conn.execute(_C.delete().where(_C.c.writer == writer, _C.c.version <= mine - KEEP))
    idle = sa.and_(_W.c.touched < now - IDLE_RETIRED, _W.c.writer.not_in([RETIRED, writer]))
    retired = conn.execute(sa.select(_W.c.writer, _W.c.version).where(idle).with_for_update())
    gone = dict(retired.all())  # writer -> its last version
    if not gone:
        return
    conn.execute(_C.delete().where(_C.c.writer.in_(gone)))
    conn.execute(_W.delete().where(_W.c.writer.in_(gone)))
    total = sum(gone.values())
    conn.execute(_upsert(conn, {"writer": RETIRED, "version": total, "touched": now}, total, now))


# ---------------------------------------------------------------- reading


def current(conn: sa.Connection) -> int:
    """The journal's total: it grows with every change committed."""
    return int(conn.exec_driver_sql(_SUM_TEXT).scalar() or 0)


def peek(engine: sa.Engine) -> int:
    """`current`, read outside any transaction: what a reader asks before it
    answers from its index (`read_outside_transaction`)."""
    return int(read_outside_transaction(engine, _SUM_TEXT) or 0)


def vector(conn: sa.Connection) -> dict[int, int]:
    """Every writer's version, read in one statement."""
    return {
        writer: version for writer, version in conn.execute(sa.select(_W.c.writer, _W.c.version))
    }


@dataclass
class CaughtUp:
    """What a reader at `known` finds in the journal."""

    seen: dict[int, int]  # writer -> the newest version read (at least the vector's)
    providers: set[int]  # changed since `known`
    usage_only: set[int]  # of them, those whose every change was only usage

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def since(conn: sa.Connection, known: dict[int, int]) -> CaughtUp | None:
    """The providers changed after the vector `known`; None when what changed is no
    longer all kept (a writer's changes pruned, a retired writer whose last changes
    were not known, rows removed by hand): the reader must reload everything."""
    now = vector(conn)
    if any(now[w] < v for w, v in known.items() if w in now):
        return None  # a writer went back: its row was made again
    vanished = sum(v for w, v in known.items() if w not in now)
    if now.get(RETIRED, 0) - known.get(RETIRED, 0) != vanished:
        return None
    behind = {w: known.get(w, 0) for w, v in now.items() if w != RETIRED and v > known.get(w, 0)}
    seen, providers, more = dict(now), set(), set()
    versions: dict[int, set[int]] = {w: set() for w in behind}
    ordered = sorted(behind.items())
    for start in range(0, len(ordered), CHUNK):
        after = [
            sa.and_(_C.c.writer == w, _C.c.version > v) for w, v in ordered[start : start + CHUNK]
        ]
        rows = conn.execute(
            sa.select(_C.c.writer, _C.c.version, _C.c.provider_id, _C.c.usage_only).where(
                sa.or_(*after)
            )
        )
        for writer, version, provider, usage_only in rows:
            versions[writer].add(version)
            providers.add(provider)
            if not usage_only:
                more.add(provider)
    for writer, was in behind.items():
        newest = max(versions[writer], default=was)
        if newest < now[writer] or len(versions[writer]) != newest - was:
            return None  # a gap: pruned, or deleted by hand
        seen[writer] = newest
    return CaughtUp(seen, providers, providers - more)
