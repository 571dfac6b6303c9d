"""Engines and the one transaction helper.

SQLite runs in WAL mode with a busy timeout; write transactions start with
`BEGIN IMMEDIATE`, so writers queue for the lock up front instead of failing
half-way with "database is locked" (datasette's discipline). On PostgreSQL and
MySQL the ledger locks the provider rows it changes (`SELECT ... FOR UPDATE`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event

WRITE = "tally_write"


def make_engine(url: str) -> sa.Engine:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    options: dict = {"pool_pre_ping": True, "pool_size": 10, "max_overflow": 20}
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        # As on PostgreSQL, each statement sees what committed before it: under InnoDB's
        # default REPEATABLE READ a writer that waited for a row lock would still read
        # usage from the snapshot taken before the wait, and lose every generation CAS.
        options["isolation_level"] = "READ COMMITTED"
    return sa.create_engine(parsed, **options)


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=8
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=OFF")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def is_sqlite(conn_or_engine: sa.Connection | sa.Engine) -> bool:
    return conn_or_engine.dialect.name == "sqlite"


@contextlib.contextmanager
def transaction(engine: sa.Engine, write: bool = False) -> Iterator[sa.Connection]:
    """One short transaction: committed on success, rolled back on any error."""
    with engine.connect() as conn:
        if write:
            conn = conn.execution_options(**{WRITE: True})
        with conn.begin():
            yield conn
