"""One schema upgrade at a time per database, whichever host runs it: `tally db
upgrade` (and `tally serve`, which upgrades at start) may run on every API host at
once, as a systemd unit's `ExecStartPre` does. The first takes the lock, migrates
and syncs the standard classes and traits; the others wait, then find the schema
at head and change nothing.

- PostgreSQL: a session advisory lock (`pg_advisory_lock`) on a connection of its
  own, released when that connection closes, even if the process dies.
- MySQL/MariaDB: `GET_LOCK` on a connection of its own, named after the database
  (the name is the server's, not the database's). On a Galera cluster it is the
  node's own: upgrades through one node (the writer HAProxy sends every host to)
  wait for each other, upgrades through different nodes do not.
- SQLite: an exclusive `flock` on a file beside the database (the migration itself
  also runs in one `BEGIN IMMEDIATE` transaction: the file's write lock).

`held` is re-entrant in a thread: `prepare_database` holds it across the migration
and the sync, and `migrate.upgrade` inside takes it again for nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import logging
import os
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

PG_KEY = 0x74616C6C79  # "tally": the advisory lock's key, within each database
CONNECT_SECONDS = 10  # the lock's own connection
MYSQL_WAIT_SECONDS = 5  # each GET_LOCK's wait; it asks again until it has the lock
MYSQL_UNSUPPORTED = 1235  # a Galera node that refuses GET_LOCK (MariaDB's MDEV-30473)
_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "upgrade_locks_held", default=frozenset()
)


@contextlib.contextmanager
def held(engine: sa.Engine) -> Iterator[None]:
    """Hold the schema upgrade lock of `engine`'s database (waiting for it)."""
    key = _shown(engine)
    if key in _HELD.get():
        yield
        return
    backend = engine.dialect.name
    if backend == "postgresql":
        lock = _postgresql(engine)
    elif backend in ("mysql", "mariadb"):
        lock = _mysql(engine)
    else:
        lock = _sqlite(engine)
    with lock:
        token = _HELD.set(_HELD.get() | {key})
        try:
            yield
        finally:
            _HELD.reset(token)


def _waiting(engine: sa.Engine) -> None:
    log.warning(
        "waiting for the schema upgrade lock of %s: another `tally db upgrade` (or `tally "
        "serve` starting) is upgrading it",
        _shown(engine),
    )


def _shown(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


@contextlib.contextmanager
def _own_connection(engine: sa.Engine, **connect_args: object) -> Iterator[sa.Connection]:
    """A connection of its own (no pool), so closing it releases a session lock."""
    connect_args = {"connect_timeout": CONNECT_SECONDS, **connect_args}
    own = sa.create_engine(engine.url, poolclass=NullPool, connect_args=connect_args)
    try:
        with own.connect() as conn:
            yield conn
    finally:
        own.dispose()


@contextlib.contextmanager
def _postgresql(engine: sa.Engine) -> Iterator[None]:
    with _own_connection(engine) as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if not conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_KEY}).scalar():
            _waiting(engine)
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": PG_KEY})
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": PG_KEY})


@contextlib.contextmanager
def _mysql(engine: sa.Engine) -> Iterator[None]:
    name = f"tally-upgrade:{engine.url.database or ''}"[:64]  # GET_LOCK's longest name
    with _own_connection(engine, read_timeout=MYSQL_WAIT_SECONDS + 30) as conn:
        try:
            got = conn.execute(sa.text("SELECT GET_LOCK(:n, 0)"), {"n": name}).scalar()
        except sa.exc.OperationalError as exc:
            if getattr(exc.orig, "args", (None,))[0] != MYSQL_UNSUPPORTED:
                raise
            log.warning(
                "%s refuses GET_LOCK (a Galera node): upgrading without the schema upgrade "
                "lock; run `tally db upgrade` from one host at a time",
                _shown(engine),
            )
            yield
            return
        if got != 1:
            _waiting(engine)
        while got != 1:
            wait = {"n": name, "s": MYSQL_WAIT_SECONDS}
            got = conn.execute(sa.text("SELECT GET_LOCK(:n, :s)"), wait).scalar()
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK(:n)"), {"n": name})


@contextlib.contextmanager
def _sqlite(engine: sa.Engine) -> Iterator[None]:
    path = engine.url.database
    fd = None
    if path and path != ":memory:":
        try:
            fd = os.open(f"{path}-upgrade.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a folder it cannot write: the migration's own lock only
            log.debug("no upgrade lock file beside %s: %s", path, exc)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _waiting(engine)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (the lock goes with it)
