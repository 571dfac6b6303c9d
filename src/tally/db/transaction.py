"""The one transaction helper: every read and write of Tally's tables is one short
transaction (`transaction`), committed on success and rolled back on any error.

A read may not change anything (`refuse_writes_in_reads`, on every database, so
tests on any catch it); on PostgreSQL it runs in autocommit: at READ COMMITTED each
statement sees its own snapshot anyway, and BEGIN and COMMIT would be two more round
trips. A SQLite writer waits its turn first (`writer_queue`).

The last writes of a transaction that nothing reads back (its history rows, the
journal's version) go to PostgreSQL together with the COMMIT, in one round trip
(`at_commit`, `insert_at_commit`); a module notes what it will write just before the
commit (`notes`). A write transaction knows the tables its statements wrote, and
hands them to the `before_commit` hooks (the journal derives from them what no
write may forget to name).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql

from tally.db import writer_queue

WRITE = "tally_write"  # execution options that say what a transaction is
READ = "tally_read"
N = TypeVar("N")
_NOTES = "tally.notes"
_LAST = "tally.at_commit"
_WROTE = "tally.wrote"
# the table a statement writes (Core's, the driver's and our text statements alike)
_DML = re.compile(
    r"\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM)\s+[\"`]?(\w+)", re.IGNORECASE
)
_BEFORE_COMMIT: list[Callable[[sa.Connection, set[str]], None]] = []
_Statements = list[tuple[sa.Executable, dict | None]]


@contextlib.contextmanager
def transaction(engine: sa.Engine, write: bool = False) -> Iterator[sa.Connection]:
    """One short transaction: committed on success, rolled back on any error.
    A read (`write=False`) may not change anything."""
    with engine.connect() as conn, _run(conn, write) as conn:
        yield conn


@contextlib.contextmanager
def write_on(conn: sa.Connection) -> Iterator[sa.Connection]:
    """`transaction(engine, write=True)` on a connection the caller holds (a test of
    one writer's versions); the connection stays marked a writer's."""
    with _run(conn, True) as conn:
        yield conn


@contextlib.contextmanager
def _run(conn: sa.Connection, write: bool) -> Iterator[sa.Connection]:
    engine = conn.engine
    queue = writer_queue.of(engine) if write else None
    with queue.turn() if queue else contextlib.nullcontext():
        options: dict = {WRITE: True} if write else {READ: True}
        if not write and engine.dialect.name == "postgresql":
            options["isolation_level"] = "AUTOCOMMIT"
        conn = conn.execution_options(**options)
        conn.info.pop(_NOTES, None)  # (the info of a pooled connection outlives us)
        conn.info.pop(_LAST, None)
        conn.info.pop(_WROTE, None)
        if write and engine.dialect.name == "postgresql":
            conn.info[_LAST] = []  # at_commit's writes wait for the COMMIT
        try:
            with conn.begin() as trans:
                yield conn
                wrote = conn.info.pop(_WROTE, None)
                for hook in _BEFORE_COMMIT if wrote else ():
                    hook(conn, wrote)
                notes = conn.info.pop(_NOTES, {})
                for _, noted, flush in sorted(notes.values(), key=lambda entry: entry[0]):
                    flush(conn, noted)
                _commit_with_last_writes(conn, trans, conn.info.pop(_LAST, []))
        finally:
            if not conn.invalidated:  # (reading `info` of a lost connection would connect
                conn.info.pop(_NOTES, None)  # anew: a second timeout on a frozen server)
                conn.info.pop(_LAST, None)
                conn.info.pop(_WROTE, None)


def refuse_writes_in_reads(engine: sa.Engine) -> None:
    """A write in a read transaction (autocommit on PostgreSQL: each statement
    would commit alone) is a bug: refuse it on every database, so tests on any
    catch it. In a write transaction, note the table each statement writes."""

    @event.listens_for(engine, "before_cursor_execute")
    def _check(conn, _cursor, statement, _params, context, _many) -> None:  # noqa: ANN001
        options = conn.get_execution_options()
        if options.get(WRITE):
            _note_written(conn, statement)
        elif options.get(READ) and (context.isinsert or context.isupdate or context.isdelete):
            raise RuntimeError(f"a write in a read transaction: {statement[:80]}")


def before_commit(hook: Callable[[sa.Connection, set[str]], None]) -> None:
    """Run `hook(conn, tables)` in every write transaction that wrote `tables`, as
    it commits (before the `notes` flush)."""
    if hook not in _BEFORE_COMMIT:
        _BEFORE_COMMIT.append(hook)


def _note_written(conn: sa.Connection, statement: str) -> None:
    found = _DML.match(statement)
    if found is not None:
        conn.info.setdefault(_WROTE, set()).add(found.group(1).lower())


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
        _note_written(conn, _compiled(statement, conn.dialect))  # (runs after the hooks)
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
    rows as one JSON parameter; elsewhere (or with `defer=False`) now."""
    if not rows:
        return
    if defer and defers(conn):
        columns = tuple(rows[0])
        values = [[row[column] for column in columns] for row in rows]
        at_commit(conn, _json_insert(table, columns), {"rows": orjson.dumps(values).decode()})
    elif conn.dialect.positional:  # SQLite: the driver's executemany, values as tuples
        sql, columns, processors = _positional_insert(table, tuple(rows[0]), conn.dialect)
        values = [[row[column] for column in columns] for row in rows]
        for i, process in processors:
            _convert(values, i, process)
        conn.exec_driver_sql(sql, list(map(tuple, values)))
    else:
        conn.execute(_insert(table), rows)


@functools.cache
def _insert(table: sa.Table) -> sa.Insert:
    return table.insert()  # (built once: building costs about what a small write does)


def _convert(values: list[list], i: int, process: Callable) -> None:
    """Convert column `i` of every row, each distinct value once (a write's rows
    share their stamp)."""
    done: dict = {}
    for value in values:
        raw = value[i]
        try:
            converted = done.get(raw, done)
        except TypeError:  # (a value that cannot be a key)
            value[i] = process(raw)
            continue
        if converted is done:
            converted = done[raw] = process(raw)
        value[i] = converted


@functools.cache
def _positional_insert(
    table: sa.Table, columns: tuple[str, ...], dialect: sa.Dialect
) -> tuple[str, tuple[str, ...], list[tuple[int, Callable]]]:
    """The INSERT of these columns as the driver takes it, its parameters' order,
    and the conversions some need (a date to SQLite's text): SQLAlchemy's own
    processing of each row cost a bulk claim a fifth of its time."""
    compiled = table.insert().compile(dialect=dialect, column_keys=list(columns))
    order = tuple(compiled.positiontup or ())
    processors = [
        (i, process)
        for i, name in enumerate(order)
        if (process := table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
    ]
    return str(compiled), order, processors


@functools.cache
def _json_insert(table: sa.Table, columns: tuple[str, ...]) -> sa.TextClause:
    """PostgreSQL: insert the rows of a JSON array of arrays (each row's values in
    the order of `columns`): read by position, it costs the server a seventh of
    what reading objects by name did."""
    dialect = postgresql.dialect()
    values = ", ".join(
        _from_text(f"r ->> {i}", table.c[name].type, dialect) for i, name in enumerate(columns)
    )
    return sa.text(
        f"INSERT INTO {table.name} ({', '.join(columns)}) SELECT {values}"
        " FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r"
    )


def _from_text(value: str, column_type: sa.types.TypeEngine, dialect: sa.Dialect) -> str:
    """`value`, text, as the column takes it: a string as it is (its column's
    length still checked: a cast to VARCHAR(n) would cut it short), else cast."""
    if isinstance(column_type.dialect_impl(dialect), sa.String):
        return value
    return f"CAST({value} AS {column_type.compile(dialect)})"


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
