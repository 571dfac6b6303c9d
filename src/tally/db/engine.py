"""The engine of Tally's database, made from its URL: the backend's driver, pool and
timeouts, and the hooks of each backend (`sqlite`, `mysql`; reads and writes go
through `transaction`).

On PostgreSQL and MySQL the ledger locks the provider rows it changes (`SELECT ...
FOR UPDATE`); a deadlock or serialization failure there aborts one transaction, which
`retry.run_retrying` runs again from the start.

Round trips are what a request pays for on a server database (each costs both
processes a wake-up). A pooled connection is pinged only when it sat idle for
`IDLE_PING_SECONDS`: one busy a moment ago is trusted, and should the server have
gone since, its first error invalidates the whole pool (one 503, then fresh
connections). On MySQL the waits of one request on a server that does not answer
(the pool, connecting, the ping, each statement) share one read timeout
(`deadline`, applied in `mysql.session`).
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from tally.db import cluster, mysql, probe
from tally.db.sqlite import sqlite_engine
from tally.db.transaction import refuse_writes_in_reads

IDLE_PING_SECONDS = 1.0
# A server database that does not answer in time is down for this request (503): a
# frozen or cut-off cluster node must not hold requests for long. Connecting to
# PostgreSQL: 2 s (libpq allows no less; MySQL's are `mysql.MYSQL_TIMEOUTS`).
PG_CONNECT_TIMEOUT = 2


@dataclasses.dataclass(frozen=True)
class Pool:
    """How many connections one process keeps (`size`) and may open beyond them when
    busy (`overflow`) to a server database, and how long a request waits for one
    (`timeout`, seconds): the settings `database_max_pool_size`,
    `database_max_overflow` and `database_pool_timeout`."""

    size: int = 10
    overflow: int = 20
    timeout: float = 30

    @classmethod
    def of(cls, settings: Any) -> Pool:
        return cls(
            settings.database_max_pool_size,
            settings.database_max_overflow,
            settings.database_pool_timeout,
        )


_POOLS: weakref.WeakKeyDictionary[sa.Engine, Pool] = weakref.WeakKeyDictionary()


def engine_for(settings: Any) -> sa.Engine:
    """The engine of the settings' database, its pool as they size it."""
    return make_engine(settings.database, Pool.of(settings))


def pool_of(engine: sa.Engine) -> Pool:
    """The pool limits `engine` was made with (the defaults for one made elsewhere)."""
    return _POOLS.get(engine, Pool())


def make_engine(url: str, pool: Pool = Pool()) -> sa.Engine:
    """The engine of Tally's database. An upstream Placement database (or a schema
    revision Tally does not know) is refused first, through a read-only probe: our
    own first connection would switch a SQLite file to WAL (probe.UnusableDatabase;
    as for a missing driver). A placement.conf's `postgresql+psycopg2://` or
    `mysql://` runs on Tally's driver when theirs is not installed."""
    parsed = probe.with_our_driver(url)
    try:  # ours, not the driver's
        sync_wait = cluster.sync_wait_level(parsed.query.get(cluster.SYNC_WAIT_PARAMETER))
    except ValueError as exc:
        raise probe.UnusableDatabase(f"database URL {probe.safe_url(parsed)}: {exc}") from None
    parsed = parsed.difference_update_query([cluster.SYNC_WAIT_PARAMETER])
    # A SQLite file that exists but cannot be read now is refused too: it cannot be
    # "down", and our first connection would change its journal mode.
    probe.refuse_foreign(parsed, strict=parsed.get_backend_name() == "sqlite")
    if parsed.get_backend_name() == "sqlite":
        return sqlite_engine(parsed)
    options: dict = {
        "pool_size": pool.size,
        "max_overflow": pool.overflow,
        "pool_timeout": pool.timeout,
    }
    given = set(parsed.query)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        # As on PostgreSQL, each statement sees what committed before it: under InnoDB's
        # default REPEATABLE READ a writer that waited for a row lock would still read
        # usage from the snapshot taken before the wait, and lose every generation CAS.
        options["isolation_level"] = "READ COMMITTED"
        options["connect_args"] = {k: v for k, v in mysql.MYSQL_TIMEOUTS.items() if k not in given}
        options["poolclass"] = mysql.BoundedPool
    elif parsed.get_backend_name() == "postgresql" and "connect_timeout" not in given:
        options["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT}
    engine = probe.create(parsed, **options)
    if parsed.get_backend_name() in ("mysql", "mariadb"):  # (its timeouts before the ping)
        mysql.session(engine, sync_wait, mysql.timeouts_of(parsed))
    _ping_when_idle(engine)
    refuse_writes_in_reads(engine)
    _POOLS[engine] = pool
    return engine


def _ping_when_idle(engine: sa.Engine) -> None:
    """pool_pre_ping, for connections idle longer than `IDLE_PING_SECONDS`."""

    @event.listens_for(engine, "connect")
    def _made(_dbapi_conn, record) -> None:  # noqa: ANN001
        record.info["returned"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_conn, record) -> None:  # noqa: ANN001
        if record is not None:
            record.info["returned"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _lent(dbapi_conn, record, _proxy) -> None:  # noqa: ANN001
        if time.monotonic() - record.info.get("returned", 0.0) <= IDLE_PING_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            if "timed out" in str(exc):  # a server that does not answer (a frozen node):
                # no new connection would do better now; a 503 at once (unavailable)
                raise sa.exc.TimeoutError(f"the database did not answer a ping: {exc}") from exc
            raise sa.exc.DisconnectionError(f"stale pooled connection: {exc}") from exc  # anew


def ping(engine: sa.Engine) -> float:
    """Milliseconds the database took to answer `SELECT 1`; its error if it did not."""
    started = time.monotonic()
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1")).scalar()
    return (time.monotonic() - started) * 1000


def is_sqlite(conn_or_engine: sa.Connection | sa.Engine) -> bool:
    return conn_or_engine.dialect.name == "sqlite"
