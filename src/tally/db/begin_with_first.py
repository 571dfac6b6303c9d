"""PostgreSQL: a write transaction's BEGIN travels with its first statement.

psycopg opens a transaction by sending BEGIN alone and waiting for its answer:
one round trip of the four a write takes (BEGIN, the lock, one read, the COMMIT
script). A write transaction therefore runs with the driver in autocommit (it
sends no BEGIN of its own) and `pending(conn)` marks it; the first statement then
goes in one pipeline with our BEGIN (one Sync: one round trip), its rows read as
usual once the pipeline is done. After that the server holds a transaction open:
the COMMIT comes at the end of the `at_commit` script (or, with nothing queued,
from the driver, which sends COMMIT or ROLLBACK whenever the server says a
transaction is open, autocommit or not), and a failed statement is rolled back as
before. A transaction that ran no statement sends nothing at all.

A first statement without parameters (a script) or run for many rows gets its
BEGIN sent just before it, as psycopg would; the `at_commit` script, when it is the
first, starts with it (`opening`).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import event

_PENDING = "tally.begin_pending"


def install(engine: sa.Engine) -> None:
    """Send a pending BEGIN with the first statement of each transaction of `engine`."""
    try:
        import psycopg
    except ImportError:  # (psycopg2: it keeps its own BEGIN)
        return
    if not psycopg.Pipeline.is_supported():  # libpq before 14
        return
    event.listen(engine, "do_execute", _with_first)
    event.listen(engine, "do_executemany", _before_first)
    event.listen(engine, "do_execute_no_params", _before_first)


def supported(engine: sa.Engine) -> bool:
    return event.contains(engine, "do_execute", _with_first)


def pending(conn: sa.Connection) -> None:
    """Mark the transaction just begun on `conn` (its driver in autocommit) as
    waiting for its BEGIN."""
    conn.info[_PENDING] = True


def forget(conn: sa.Connection) -> None:
    conn.info.pop(_PENDING, None)


def opening(conn: sa.Connection) -> str:
    """`"BEGIN"` when the transaction has not begun on the server yet (its first
    statement is the caller's script), else `""`."""
    return "BEGIN" if conn.info.pop(_PENDING, False) else ""


def _popped(context) -> bool:  # noqa: ANN001
    try:
        info = context.root_connection.info
    except NotImplementedError:  # the dialect's first look at the server: no transaction
        return False
    return info.pop(_PENDING, False)


def _with_first(cursor, statement, parameters, context) -> bool:  # noqa: ANN001
    if not _popped(context):
        return False
    driver = cursor.connection
    with driver.pipeline():
        driver.execute("BEGIN")
        cursor.execute(statement, parameters)
    return True  # executed: the rows are on the cursor


def _before_first(cursor, statement, *_rest) -> bool:  # noqa: ANN001, ANN002
    if _popped(_rest[-1]):
        cursor.connection.execute("BEGIN")
    return False  # the statement itself runs as usual
