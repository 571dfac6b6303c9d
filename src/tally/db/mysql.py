"""What each MySQL or MariaDB connection is told when it opens: short lock waits,
timeouts, and on a Galera node causal reads (`cluster.causal_reads`); and how each
wait of a request on the server draws on the request's one budget (`deadline`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import QueuePool

from tally.db import cluster, deadline

# Connecting, and each read and write of the connection: 5 s, above what a causal read
# on a busy Galera node waits (2 s cut healthy reads off on a loaded 2-core test
# cluster), so a frozen or cut-off node costs a 503, not a hang. A URL's own
# connect_timeout, read_timeout or write_timeout wins. The read timeout is also what
# one request may wait in all for a server that does not answer (`deadline`).
MYSQL_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5, "write_timeout": 5}
# Below the read timeout, so a statement waiting for a row lock that long is told so
# (1205, a race: the write runs again) before its connection counts as lost.
MYSQL_LOCK_WAIT_SECONDS = 1


def timeouts_of(url: sa.URL) -> dict[str, float]:
    """The timeouts a connection to `url` has: `MYSQL_TIMEOUTS`, or the URL's own."""
    timeouts = {k: float(v) for k, v in MYSQL_TIMEOUTS.items()}
    for name in MYSQL_TIMEOUTS.keys() & set(url.query):
        given = url.query[name]
        timeouts[name] = float(given[-1] if isinstance(given, tuple) else given)
    return timeouts


def session(engine: sa.Engine, sync_wait: int, timeouts: dict[str, float]) -> None:
    """Each new connection of `engine`: short lock waits, and the Galera causal-read
    level `sync_wait` (0: none). Within a request every wait on the server (the pool,
    connecting, the greeting, a ping, each statement) shares one budget of the read
    timeout (`timeouts`, as the connections have them), whole again after an answer."""
    read = float(timeouts["read_timeout"])
    write = float(timeouts["write_timeout"])
    if isinstance(engine.pool, BoundedPool):
        engine.pool.budget_seconds = read

    @event.listens_for(engine, "connect")
    def _connected(dbapi_conn, _record) -> None:  # noqa: ANN001
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {MYSQL_LOCK_WAIT_SECONDS}")
            cluster.causal_reads(cursor, sync_wait)
        finally:
            cursor.close()

    @event.listens_for(engine, "do_connect")
    def _connecting(_dialect, _record, _cargs, cparams: dict[str, Any]) -> None:  # noqa: ANN001
        remaining = deadline.bounded(None, read)
        if remaining is None:
            return
        # The TCP connect and the greeting after it (the read timeout) share it: a
        # frozen server's kernel may take the connection and the server never greet.
        connect = min(float(cparams.get("connect_timeout") or read), remaining / 2)
        cparams["connect_timeout"] = connect
        cparams["read_timeout"] = min(read, remaining - connect)
        cparams["write_timeout"] = min(write, remaining - connect)

    @event.listens_for(engine, "checkout")
    def _lent(dbapi_conn, _record, _proxy) -> None:  # noqa: ANN001
        _bound(dbapi_conn, read, write, strict=False)  # (before the ping of an idle one)

    @event.listens_for(engine, "before_cursor_execute")
    def _asking(_conn, cursor, _statement, _params, _context, _many) -> None:  # noqa: ANN001
        _bound(cursor.connection, read, write, strict=True)

    @event.listens_for(engine, "after_cursor_execute")
    def _answered(*_args: object) -> None:
        deadline.answered()

    @event.listens_for(engine, "commit")
    @event.listens_for(engine, "rollback")
    def _ending(conn: sa.Connection) -> None:
        if not conn.invalidated:  # (a lost connection's would connect anew)
            _bound(conn.connection.dbapi_connection, read, write, strict=False)


def _bound(dbapi_conn: Any, read: float, write: float, *, strict: bool) -> None:
    """The connection's timeouts for its next exchange: its own, cut to what is left
    of the request's budget. `strict`: DeadlinePassed when nothing is left; else
    (a commit, a rollback, a ping) a last short wait. PyMySQL's timeouts are its
    attributes, read at each exchange; another driver keeps its own."""
    if not hasattr(dbapi_conn, "_read_timeout"):
        return
    try:
        dbapi_conn._read_timeout = deadline.bounded(read, read)
        dbapi_conn._write_timeout = deadline.bounded(write, read)
    except deadline.DeadlinePassed:
        if strict:
            raise
        dbapi_conn._read_timeout = dbapi_conn._write_timeout = deadline.LEAST_SECONDS


class BoundedPool(QueuePool):
    """A QueuePool whose wait for a free connection draws on the request's budget
    (`budget_seconds`, set by `session`), not a fresh `pool_timeout` of its own."""

    budget_seconds: float | None = None

    @property
    def _timeout(self) -> float:  # (read by QueuePool's checkout, each time)
        remaining = None if self.budget_seconds is None else deadline.left(self.budget_seconds)
        own = self._own_timeout
        return own if remaining is None else max(0.0, min(own, remaining))

    @_timeout.setter
    def _timeout(self, value: float) -> None:
        self._own_timeout = value

    def recreate(self) -> QueuePool:
        made = super().recreate()
        made._timeout = self._own_timeout  # (not what was left to the request disposing it)
        made.budget_seconds = self.budget_seconds
        return made
