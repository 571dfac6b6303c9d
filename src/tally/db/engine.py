"""Engines, the one transaction helper (and its retrying form), and what counts as
the database being unavailable.

SQLite runs in WAL mode with a busy timeout; write transactions start with
`BEGIN IMMEDIATE`, so writers queue for the lock up front instead of failing
half-way with "database is locked" (datasette's discipline). On PostgreSQL and
MySQL the ledger locks the provider rows it changes (`SELECT ... FOR UPDATE`);
a deadlock or serialization failure there aborts one transaction, which
`run_retrying` runs again from the start.

Round trips are what a request pays for on a server database (each costs both
processes a wake-up), so reads on PostgreSQL run in autocommit: at READ
COMMITTED each statement sees its own snapshot anyway, and BEGIN and COMMIT
would be two more round trips. A pooled connection is pinged only when it sat
idle for `IDLE_PING_SECONDS`: one busy a moment ago is trusted, and should the
server have gone since, its first error invalidates the whole pool (one 503,
then fresh connections). The last writes of a transaction that nothing reads
back (its history rows, the journal's version) go to PostgreSQL together with
the COMMIT, in one round trip (`at_commit`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy import event

from tally.db import cluster, probe

LOG = logging.getLogger(__name__)
WRITE = "tally_write"
READ = "tally_read"
IDLE_PING_SECONDS = 1.0
T = TypeVar("T")
N = TypeVar("N")
# A server database that does not answer in time is down for this request (503): a
# frozen or cut-off cluster node must not hold requests for long. Connecting (2 s:
# PostgreSQL's libpq allows no less), and on MySQL each read and write of the
# connection: 5 s, above what a causal read on a busy Galera node waits (2 s cut
# healthy reads off on a loaded 2-core test cluster). A URL's own connect_timeout,
# read_timeout or write_timeout wins.
MYSQL_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5, "write_timeout": 5}
PG_CONNECT_TIMEOUT = 2
# Below the read timeout, so a statement waiting for a row lock that long is told so
# (1205, a race: the write runs again) before its connection counts as lost.
MYSQL_LOCK_WAIT_SECONDS = 1
_NOTES = "tally.notes"
_LAST = "tally.at_commit"
_Statements = list[tuple[sa.Executable, dict | None]]


def make_engine(url: str) -> sa.Engine:
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
        return _sqlite_engine(parsed)
    options: dict = {"pool_size": 10, "max_overflow": 20}
    given = set(parsed.query)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        # As on PostgreSQL, each statement sees what committed before it: under InnoDB's
        # default REPEATABLE READ a writer that waited for a row lock would still read
        # usage from the snapshot taken before the wait, and lose every generation CAS.
        options["isolation_level"] = "READ COMMITTED"
        timeouts = {k: v for k, v in MYSQL_TIMEOUTS.items() if k not in given}
        options["connect_args"] = timeouts
    elif parsed.get_backend_name() == "postgresql" and "connect_timeout" not in given:
        options["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT}
    engine = probe.create(parsed, **options)
    _ping_when_idle(engine)
    _refuse_writes_in_reads(engine)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        _mysql_session(engine, sync_wait)
    return engine


def _mysql_session(engine: sa.Engine, sync_wait: int) -> None:
    """Each MySQL connection's session: short lock waits, and on a Galera node
    causal reads (`cluster.causal_reads`)."""

    @event.listens_for(engine, "connect")
    def _connected(dbapi_conn, _record) -> None:  # noqa: ANN001
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {MYSQL_LOCK_WAIT_SECONDS}")
            cluster.causal_reads(cursor, sync_wait)
        finally:
            cursor.close()


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


def _refuse_writes_in_reads(engine: sa.Engine) -> None:
    """A write in a read transaction (autocommit on PostgreSQL: each statement
    would commit alone) is a bug: refuse it on every database, so tests on any
    catch it."""

    @event.listens_for(engine, "before_cursor_execute")
    def _check(conn, _cursor, statement, _params, context, _many) -> None:  # noqa: ANN001
        if conn.get_execution_options().get(READ) and (
            context.isinsert or context.isupdate or context.isdelete
        ):
            raise RuntimeError(f"a write in a read transaction: {statement[:80]}")


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    if url.database and url.database != ":memory:":
        try:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise probe.UnusableDatabase(
                f"cannot reach database {probe.safe_url(url)}: {exc.strerror or exc}"
            ) from None
    engine = probe.create(
        url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=8
    )
    _refuse_writes_in_reads(engine)

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

    _WRITERS[engine] = WriterQueue(url.database if url.database != ":memory:" else None)
    return engine


class WriterQueue:
    """SQLite writers wait their turn here, not in SQLite's busy handler.

    SQLite lets one writer in at a time and makes the others poll, sleeping 1,
    2, 5, 10 ms and longer between tries: under a steady stream of small writes a
    waiting writer often sleeps well past the moment the lock came free. Here a
    writer takes a lock of its process, then an exclusive `flock` on a file next
    to the database (the other `tally serve` workers on this host), and only then
    begins: the next writer wakes the moment the previous one commits (a
    blocking `flock`: retrying it within a millisecond instead cost 20-35% of the
    write rate). A writer whose turn came only after `WAIT_SECONDS` (SQLite's
    busy timeout) gives up at once as on a locked database (503), so a queue held
    up by a writer that is not Tally's drains without running each in turn into
    the busy timeout. SQLite's own lock still guards the data."""

    WAIT_SECONDS = 30.0

    def __init__(self, database: str | None) -> None:
        self.path = f"{database}-writers.lock" if database else None
        self._thread_lock = threading.RLock()
        self._file: tuple[int, int] | None = None  # (pid, descriptor): one per process
        self._depth = 0  # turns the thread holding the lock is in

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        asked = time.monotonic()
        with self._thread_lock:
            fd = self._descriptor() if self._depth == 0 else None  # (a nested turn holds it)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if self._depth == 0 and time.monotonic() - asked > self.WAIT_SECONDS:
                    raise sa.exc.TimeoutError("no turn to write within the busy timeout")
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _descriptor(self) -> int | None:
        if self.path is None:
            return None
        pid = os.getpid()
        if self._file is None or self._file[0] != pid:  # new, or inherited over a fork
            try:
                self._file = (pid, os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            except OSError as exc:  # a read-only directory: SQLite alone decides
                LOG.debug("no writer queue file %s: %s", self.path, exc)
                self.path = None
                return None
        return self._file[1]


_WRITERS: weakref.WeakKeyDictionary[sa.Engine, WriterQueue] = weakref.WeakKeyDictionary()


def read_outside_transaction(engine: sa.Engine, sql: str) -> object:
    """The first value `sql` reads, for a read that needs no snapshot of its own
    (the journal's version, asked before every index read). On PostgreSQL it goes
    over a small pool of connections that stay in autocommit: no isolation switch
    on the way out and no reset on the way back, so it costs the round trip and
    little Python (a third of what an ordinary read transaction costs). Elsewhere,
    or when that connection fails, it runs in an ordinary read transaction, whose
    errors mean what they always do (a database that is down: 503)."""
    readers = _autocommit_pool(engine)
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


def _autocommit_pool(engine: sa.Engine) -> sa.Engine | None:
    """`engine`'s pool of autocommit connections (PostgreSQL), made on first use
    and disposed with it (before `tally serve` forks, among others)."""
    if engine.dialect.name != "postgresql":
        return None
    found = _AUTOCOMMIT.get(engine)
    if found is None:
        with _AUTOCOMMIT_LOCK:
            found = _AUTOCOMMIT.get(engine)
            if found is None:
                found = _AUTOCOMMIT[engine] = probe.create(
                    engine.url,
                    isolation_level="AUTOCOMMIT",
                    pool_reset_on_return=None,  # no transaction is ever open
                    pool_size=4,
                    max_overflow=12,
                )
                event.listen(engine, "engine_disposed", lambda _engine: found.dispose())
    return found


_AUTOCOMMIT: weakref.WeakKeyDictionary[sa.Engine, sa.Engine] = weakref.WeakKeyDictionary()
_AUTOCOMMIT_LOCK = threading.Lock()


def ping(engine: sa.Engine) -> float:
    """Milliseconds the database took to answer `SELECT 1`; its error if it did not."""
    started = time.monotonic()
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1")).scalar()
    return (time.monotonic() - started) * 1000


def is_sqlite(conn_or_engine: sa.Connection | sa.Engine) -> bool:
    return conn_or_engine.dialect.name == "sqlite"


@contextlib.contextmanager
def transaction(engine: sa.Engine, write: bool = False) -> Iterator[sa.Connection]:
    """One short transaction: committed on success, rolled back on any error.
    A read (`write=False`) may not change anything."""
    queue = _WRITERS.get(engine) if write else None
    with engine.connect() as conn, queue.turn() if queue else contextlib.nullcontext():
        options: dict = {WRITE: True} if write else {READ: True}
        if not write and engine.dialect.name == "postgresql":
            options["isolation_level"] = "AUTOCOMMIT"
        conn = conn.execution_options(**options)
        conn.info.pop(_NOTES, None)  # (the info of a pooled connection outlives us)
        conn.info.pop(_LAST, None)
        if write and engine.dialect.name == "postgresql":
            conn.info[_LAST] = []  # at_commit's writes wait for the COMMIT
        try:
            with conn.begin() as trans:
                yield conn
                notes = conn.info.pop(_NOTES, {})
                for _, noted, flush in sorted(notes.values(), key=lambda entry: entry[0]):
                    flush(conn, noted)
                _commit_with_last_writes(conn, trans, conn.info.pop(_LAST, []))
        finally:
            if not conn.invalidated:  # (reading `info` of a lost connection would connect
                conn.info.pop(_NOTES, None)  # anew: a second timeout on a frozen server)
                conn.info.pop(_LAST, None)


def at_commit(
    conn: sa.Connection, statement: sa.Executable, params: dict | None = None, *, defer: bool = True
) -> None:
    """Run `statement`, a write whose result nobody reads, as the transaction
    commits: on PostgreSQL sent in one message with the others and the COMMIT
    (one round trip), elsewhere now. They run after every statement run directly.
    A Core statement names each of its parameters (an `insert()` without
    `.values()` would expect every column). `defer=False` runs it now anywhere,
    for a caller that reads on after it. (A write transaction's history rows and
    journal version go this way.)"""
    waiting = conn.info.get(_LAST)
    if defer and waiting is not None:
        waiting.append((statement, params))
    else:
        conn.execute(statement, params)


def defers(conn: sa.Connection) -> bool:
    """Whether `at_commit` writes wait for the COMMIT (PostgreSQL write transactions)."""
    return conn.info.get(_LAST) is not None


def insert_at_commit(
    conn: sa.Connection, table: sa.Table, rows: list[dict], *, defer: bool = True
) -> None:
    """Insert `rows` (dicts with the same keys) into `table` as the transaction
    commits (`at_commit`): on PostgreSQL one statement whatever their number, the
    rows as JSON; elsewhere (or with `defer=False`) now."""
    if not rows:
        return
    if defer and defers(conn):
        statement = _json_insert(table, tuple(rows[0]))
        at_commit(conn, statement, {"rows": orjson.dumps(rows).decode()})
    else:
        conn.execute(_insert(table), rows)


@functools.cache
def _insert(table: sa.Table) -> sa.Insert:
    return table.insert()  # (built once: building costs about what a small write does)


@functools.cache
def _json_insert(table: sa.Table, columns: tuple[str, ...]) -> sa.TextClause:
    names = ", ".join(columns)
    return sa.text(
        f"INSERT INTO {table.name} ({names}) SELECT {names}"
        f" FROM json_populate_recordset(NULL::{table.name}, CAST(:rows AS json))"
    )


def _commit_with_last_writes(
    conn: sa.Connection, trans: sa.RootTransaction, last: _Statements
) -> None:
    """Send the `at_commit` writes and the COMMIT as one script (their values
    written in as literals by the driver, which quotes them). A statement refused
    there (a constraint, a deadlock) stops the script before the COMMIT and is
    raised as any error of the database is."""
    if not last:
        return
    from psycopg import ClientCursor  # (PostgreSQL only: its driver may be absent elsewhere)

    literal = ClientCursor(conn.connection.driver_connection)
    script = [
        literal.mogrify(_compiled(statement, conn.dialect), params) for statement, params in last
    ]
    conn.execution_options(no_parameters=True).exec_driver_sql("; ".join([*script, "COMMIT"]))
    trans.commit()  # (the driver sees the transaction ended: nothing more is sent)


@functools.cache
def _compiled(statement: sa.Executable, dialect: sa.Dialect) -> str:
    return str(statement.compile(dialect=dialect))


def notes(
    conn: sa.Connection,
    key: str,
    make: Callable[[], N],
    flush: Callable[[sa.Connection, N], object],
    order: int = 0,
) -> N:
    """What the module `key` noted so far in this transaction (`make()` the first
    time); `flush(conn, notes)` runs inside the transaction just before it commits,
    after the flushes of lower `order`. Nothing noted outlives a rollback. (The
    ledger journal and the claim history keep their notes here.)"""
    kept = conn.info.setdefault(_NOTES, {})
    if key not in kept:
        kept[key] = (order, make(), flush)
    return kept[key][1]
