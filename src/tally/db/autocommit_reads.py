"""A read that needs no snapshot of its own (the journal's version, asked before every
index read), over a small pool of PostgreSQL connections that stay in autocommit."""

from __future__ import annotations

import threading
import weakref

import sqlalchemy as sa
from sqlalchemy import event

from tally.db import probe
from tally.db.engine import pool_of
from tally.db.transaction import transaction

# the autocommit pool's own bounds, below the engine's (`engine.Pool`) when it is smaller
READERS_KEPT = 4
READERS_OVERFLOW = 12


def read_outside_transaction(engine: sa.Engine, sql: str) -> object:
    """The first value `sql` reads. On PostgreSQL it goes over `readers_of(engine)`:
    no isolation switch on the way out and no reset on the way back, so it costs the
    round trip and little Python (a third of what an ordinary read transaction
    costs). Elsewhere, or when that connection fails, it runs in an ordinary read
    transaction, whose errors mean what they always do (a database that is down:
    503)."""
    readers = readers_of(engine)
    if readers is not None:
        try:
            return _first_value(readers, sql)
        except Exception:  # noqa: BLE001 - the server went? a fresh pool; read the usual way
            readers.dispose()
    with transaction(engine) as conn:
        return conn.exec_driver_sql(sql).scalar()


def _first_value(readers: sa.Engine, sql: str) -> object:
    conn = readers.raw_connection()
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        row = cursor.fetchone()
        cursor.close()
        return row[0] if row else None
    except Exception:
        conn.invalidate()  # not back into the pool
        raise
    finally:
        conn.close()


def readers_of(engine: sa.Engine) -> sa.Engine | None:
    """`engine`'s pool of autocommit connections (PostgreSQL; None elsewhere), made on
    first use and disposed with it (before `tally serve` forks, among others): at
    most 4 kept and 12 more, each no more than the engine's own pool allows."""
    if engine.dialect.name != "postgresql":
        return None
    found = _READERS.get(engine)
    if found is None:
        with _READERS_LOCK:
            found = _READERS.get(engine)
            if found is None:
                limits = pool_of(engine)
                found = _READERS[engine] = probe.create(
                    engine.url,
                    isolation_level="AUTOCOMMIT",
                    pool_reset_on_return=None,  # no transaction is ever open
                    pool_size=min(READERS_KEPT, limits.size),
                    max_overflow=min(READERS_OVERFLOW, limits.overflow),
                    pool_timeout=limits.timeout,
                )
                event.listen(engine, "engine_disposed", lambda _engine: found.dispose())
    return found


_READERS: weakref.WeakKeyDictionary[sa.Engine, sa.Engine] = weakref.WeakKeyDictionary()
_READERS_LOCK = threading.Lock()
