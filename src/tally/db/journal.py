"""The ledger journal: a version number of the whole ledger, and which providers
each write transaction changed.

Every worker keeps an in-memory index of the providers for the candidate search.
Before answering it reads the version here; when another worker (or host) wrote
since, it replays the changes after its own version, provider by provider.

A write names what it changed with `touch` (providers) or `touch_names` (resource
classes, traits); the transaction helper runs `_flush` just before it commits. The
version row is updated last, so its row lock is held only through the commit:
writers still run side by side, and versions commit in the order they are
numbered (the next writer waits on the row and reads the committed number). A
reader that sees version V therefore sees every change up to V.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import at_commit, notes, read_outside_transaction

NAMES = 0  # a change row naming no provider: classes or traits were added or removed
EVERYTHING = -1  # reload all (a bulk import)
KEEP = 20_000  # change rows kept; a reader further behind reloads everything

PRUNE_EVERY = 1000  # versions
LAST = 100  # the journal flushes after every other note: its row lock is held briefly
_VERSION = sa.select(t.ledger_version.c.version).where(t.ledger_version.c.id == 1)
# built once: a small write pays the execution, not the building of its statements
_BUMP = (
    t.ledger_version.update()
    .where(t.ledger_version.c.id == 1)
    .values(version=t.ledger_version.c.version + 1)
)
_BUMP_RETURNING = _BUMP.returning(t.ledger_version.c.version)
_RECORD = t.ledger_changes.insert()
# PostgreSQL bumps, records and now and then prunes in one statement, sent with the
# COMMIT (engine.at_commit): the version row stays locked for that one round trip.
# A version row deleted by hand is made again past every change kept.
_BUMP_RECORD_PRUNE = sa.text(
    f"WITH v AS (INSERT INTO {t.ledger_version.name} (id, version)"
    f" SELECT 1, coalesce(max(version), 0) + 1 FROM {t.ledger_changes.name}"
    f" ON CONFLICT (id) DO UPDATE SET version = {t.ledger_version.name}.version + 1"
    " RETURNING version),"
    f" recorded AS (INSERT INTO {t.ledger_changes.name} (version, provider_id)"
    " SELECT v.version, changed FROM v, unnest(CAST(:ids AS integer[])) AS changed)"
    f" DELETE FROM {t.ledger_changes.name} AS old USING v"
    f" WHERE mod(v.version, {PRUNE_EVERY}) = 0 AND old.version <= v.version - {KEEP}"
)


def touch(conn: sa.Connection, provider_ids: Iterable[int]) -> None:
    """Note that this transaction changed these providers (their inventories,
    usage, traits, aggregates, place in a tree, or existence)."""
    notes(conn, "journal", set, _flush, order=LAST).update(provider_ids)


def touch_names(conn: sa.Connection) -> None:
    touch(conn, (NAMES,))


def touch_everything(conn: sa.Connection) -> None:
    touch(conn, (EVERYTHING,))


def _flush(conn: sa.Connection, pending: set[int]) -> int | None:
    """Write what this transaction noted under the next version; the version (None
    when it noted nothing, or on PostgreSQL, where it is written with the COMMIT).
    Run inside the transaction, just before commit."""
    if not pending:
        return None
    if conn.dialect.name == "postgresql":
        at_commit(conn, _BUMP_RECORD_PRUNE, {"ids": sorted(pending)})
        return None
    if conn.dialect.update_returning:
        version = conn.execute(_BUMP_RETURNING).scalar()
    else:  # MySQL: read back under the row lock the update took
        bumped = conn.execute(_BUMP).rowcount
        version = conn.execute(_VERSION).scalar() if bumped else None
    if version is None:  # the row was deleted by hand: start again past every change
        newest = conn.execute(sa.select(sa.func.max(t.ledger_changes.c.version))).scalar()
        version = (newest or 0) + 1
        conn.execute(t.ledger_version.insert().values(id=1, version=version))
    rows = [{"version": version, "provider_id": rp} for rp in sorted(pending)]
    conn.execute(_RECORD, rows)
    _prune(conn, version)
    return version


def _prune(conn: sa.Connection, version: int) -> None:
    if version % PRUNE_EVERY == 0:  # now and then, drop what no reader needs any more
        c = t.ledger_changes
        conn.execute(c.delete().where(c.c.version <= version - KEEP))


def current(conn: sa.Connection) -> int:
    return conn.execute(_VERSION).scalar() or 0


_VERSION_TEXT = str(_VERSION.compile(compile_kwargs={"literal_binds": True}))  # for any driver


def peek(engine: sa.Engine) -> int:
    """`current`, read outside any transaction: what a reader asks before it
    answers from its index (`read_outside_transaction`)."""
    return read_outside_transaction(engine, _VERSION_TEXT) or 0


def since(conn: sa.Connection, version: int, upto: int) -> tuple[int, set[int]] | None:
    """(newest version, providers changed after `version`), `upto` being the
    current version read before; None when the changes since then are no longer
    all kept (pruned, or removed by hand): the reader must reload."""
    c = t.ledger_changes
    rows = conn.execute(sa.select(c.c.version, c.c.provider_id).where(c.c.version > version)).all()
    versions = {row.version for row in rows}
    if upto > version and (not versions or min(versions) != version + 1):
        return None
    return max(versions, default=version), {row.provider_id for row in rows}
