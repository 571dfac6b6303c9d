"""What a database error means, and the one retry loop of every write.

A transaction the database aborted to resolve a race with another writer
(deadlock, serialization failure, lock wait timeout, a Galera certification failure)
is run again from the start, bounded and jittered (`retried`, `run_retrying`,
`retrying`); an error that says the database cannot be used now (down, restarting,
out of connections, a cluster node that is not ready) is a 503 with Retry-After
(`unavailable`).
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

import tally.retrying
from tally import counts
from tally.db.deadline import DeadlinePassed
from tally.db.transaction import transaction

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# Transactions the database aborted to resolve a race: run them again.
_RETRIABLE_PGCODES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
# MySQL: deadlock found (also a Galera certification failure or brute-force abort),
# lock wait timeout, record changed since last read (MariaDB's snapshot isolation).
_RETRIABLE_MYSQL_ERRNOS = {1213, 1205, 1020}

# The database cannot be reached or used right now (a retry later may work), as
# opposed to a statement being wrong. PostgreSQL SQLSTATE classes: 08 connection
# exception, 53 insufficient resources (too many connections, disk full), 57P0x
# shutting down / starting up, 55P03 lock timeout. MySQL errors: too many connections,
# shutdown in progress, lock wait timeout, can't connect, server gone away, lost
# connection. SQLite: locked past the busy timeout, file missing or unreadable.
_UNAVAILABLE_PG_CLASSES = {"08", "53"}
_UNAVAILABLE_PGCODES = {"57P01", "57P02", "57P03", "55P03"}  # and lock_not_available
_UNAVAILABLE_MYSQL_ERRNOS = {1040, 1053, 1205, 1927, 2002, 2003, 2005, 2006, 2013, 2055, 4031}
# A Galera node that is not part of the Primary Component or not synced: "WSREP has
# not yet prepared node for application use" (1047), an error during COMMIT because
# it was cut off (1180). Whatever class the driver gives them: a cluster state.
_CLUSTER_MYSQL_ERRNOS = {1047, 1180}
_UNAVAILABLE_SQLITE = ("database is locked", "unable to open database file", "disk i/o error")


class RunAgain(Exception):  # noqa: N818 (not an error: a request to run once more)
    """Raised by the body of `run_retrying` whose first run took a shortcut that
    turned out not to apply: it runs once more, not counted as a race."""


class ConflictsPersisted(Exception):
    """A write lost its race with other writers every time it was run: the
    database is too busy with the same rows now (503, retry later)."""


WRITE_RETRIES = 10  # runs of a write the database keeps aborting, in all
BACKOFF_SECONDS = 0.002  # the first pause between two runs; it doubles, jittered
BACKOFF_MAX_SECONDS = 0.1


def run_retrying(
    engine: sa.Engine,
    body: Callable[[sa.Connection], T],
    *,
    retries: int = WRITE_RETRIES,
    gave_up: Callable[[], Exception] = lambda: ConflictsPersisted(),
    also: tuple[type[Exception], ...] = (),
) -> T:
    """`body` in a write transaction; run again from the start, at most `retries`
    times in all, when the database aborted it to resolve a race with another writer
    (deadlock, serialization failure, lock wait timeout, a Galera certification
    failure) or it raised one of `also` (races the caller detects itself). Then
    `gave_up()` is raised. A first `RunAgain` runs it once more without counting."""
    free = [1]

    def attempt() -> T:
        try:
            with transaction(engine, write=True) as conn:
                return body(conn)
        except RunAgain:
            if not free[0]:
                raise
            free[0] -= 1
            return attempt()

    return retried(attempt, retries=retries, gave_up=gave_up, also=also)


def retried(
    attempt: Callable[[], T],
    *,
    retries: int = WRITE_RETRIES,
    gave_up: Callable[[], Exception] = lambda: ConflictsPersisted(),
    also: tuple[type[Exception], ...] = (),
) -> T:
    """The one retry loop of every write (`tally.retrying.retried`): `attempt()`
    (which runs its own write transactions, whole) again after a race the database
    resolved by aborting it or one of `also`, after a short jittered pause that
    doubles each time; each run again counted in /metrics
    (`tally_database_retries_total`)."""

    def raced(exc: Exception) -> bool:
        return isinstance(exc, also) or _retriable(exc)

    def again(exc: Exception) -> None:
        LOG.debug("write raced another writer (%s); retrying", getattr(exc, "orig", exc))
        counts.database_retry()

    def given_up(_exc: Exception) -> Exception:
        LOG.warning("write gave up after %d attempts", max(1, retries))
        return gave_up()

    return tally.retrying.retried(
        attempt,
        attempts=retries,
        on=(*also, sa.exc.DBAPIError),
        when=raced,
        gave_up=given_up,
        before_again=again,
        pause=_backoff,
    )


def _backoff(run: int) -> float:
    """Jittered, doubling from `BACKOFF_SECONDS` up to `BACKOFF_MAX_SECONDS`."""
    return random.uniform(0, min(BACKOFF_MAX_SECONDS, BACKOFF_SECONDS * 2 ** (run - 1)))


def retrying(function: Callable[..., T]) -> Callable[..., T]:
    """A ledger write that opens its own write transactions, run through `retried`:
    the whole function again when the database aborted it to resolve a race."""

    @functools.wraps(function)
    def run(*args: object, **kwargs: object) -> T:
        return retried(lambda: function(*args, **kwargs))

    return run


def _retriable(exc: Exception) -> bool:
    """A deadlock or serialization failure the database resolved by aborting us."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    pgcode, mysql_errno = _codes(exc)
    return pgcode in _RETRIABLE_PGCODES or mysql_errno in _RETRIABLE_MYSQL_ERRNOS


def _codes(exc: sa.exc.DBAPIError) -> tuple[str | None, object]:
    orig = exc.orig
    pgcode = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    mysql_errno = orig.args[0] if orig is not None and orig.args else None
    return pgcode, mysql_errno


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached or used now (down,
    restarting, refusing connections, out of connections, locked past the busy
    timeout, the pool exhausted), so the request may work if sent again later."""
    if isinstance(exc, sa.exc.TimeoutError | ConflictsPersisted | DeadlinePassed):
        # no pooled connection came free in time; a write lost every race; the
        # request waited its one read timeout for a server that did not answer
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:  # the driver said: disconnected
        return True
    pgcode, mysql_errno = _codes(exc)
    module = type(exc.orig).__module__
    mysql = module.startswith(("pymysql", "MySQLdb"))
    if mysql and mysql_errno in _CLUSTER_MYSQL_ERRNOS:  # whatever class the driver gave it
        return True
    if not isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        return False
    if module.startswith("psycopg"):
        # No SQLSTATE: the client library failed (connection refused or lost).
        return (
            pgcode is None
            or pgcode[:2] in _UNAVAILABLE_PG_CLASSES
            or (pgcode in _UNAVAILABLE_PGCODES)
        )
    if mysql:
        return mysql_errno in _UNAVAILABLE_MYSQL_ERRNOS
    if module.startswith("sqlite3"):
        return str(exc.orig).lower().startswith(_UNAVAILABLE_SQLITE)
    return False
