"""A SQLite database as Tally runs it (datasette's discipline): WAL mode with a busy
timeout, writers in line before they begin (`writer_queue`), and write transactions
that start with `BEGIN IMMEDIATE`, so writers take the lock up front instead of
failing half-way with "database is locked". The log is folded back into the file by
a thread of its own after writes (`wal_checkpoint`), not inside a writer's COMMIT."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event

from tally.db import damage, probe, wal_checkpoint, writer_queue
from tally.db.errors import UnusableDatabase
from tally.db.transaction import WRITE, refuse_writes_in_reads

BUSY_TIMEOUT_SECONDS = 30
_ELSEWHERE = "choose another folder: data_dir (TALLY_DATA_DIR), or a sqlite:/// database_url"


def sqlite_engine(url: sa.URL) -> sa.Engine:
    """The engine of the SQLite file `url` names (its folder made when missing)."""
    path = url.database if url.database and url.database != ":memory:" else None
    if path is not None:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            refuse_unwritable(url)  # the folder's own words, when that is why
            raise probe.UnusableDatabase(
                f"cannot reach database {probe.safe_url(url)}: {exc.strerror or exc}"
            ) from None
    engine = probe.create(
        url,
        connect_args={"timeout": BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        pool_size=8,
    )
    refuse_writes_in_reads(engine)
    folding = wal_checkpoint.Checkpointer(path) if path is not None else None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
        cur.execute("PRAGMA foreign_keys=OFF")
        if folding is not None:
            cur.execute(f"PRAGMA wal_autocheckpoint={wal_checkpoint.AUTOCHECKPOINT_PAGES}")
        cur.close()

    if folding is not None:
        event.listen(engine, "engine_disposed", lambda _engine: folding.stop())

        @event.listens_for(engine, "commit")
        def _on_commit(conn: sa.Connection) -> None:
            if conn.get_execution_options().get(WRITE, False):
                folding.wrote()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    writer_queue.install(engine, path)
    damage.watch(engine)
    return engine


def refuse_unwritable(database: str | sa.URL) -> None:
    """UnusableDatabase, in one line, when `database` is a SQLite file this process
    could not write: its folder (or the nearest one that exists, where it would be
    made) or the file itself. A server database passes."""
    path = probe.sqlite_path(probe.parse(database))
    if path is None:
        return
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UnusableDatabase(
            f"the data folder {folder} cannot be made: {existing} is not a folder; {_ELSEWHERE}"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        what = f"the data folder {folder}"
        what += " is not" if existing == folder else f" cannot be made: {existing} is not"
        raise UnusableDatabase(
            f"{what} writable by this process (uid {os.geteuid()}): the SQLite database "
            f"{path.name} and its -wal file live there; make it writable, or {_ELSEWHERE}"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise UnusableDatabase(
            f"the SQLite database {path} is read-only for this process (uid "
            f"{os.geteuid()}): make it writable, or {_ELSEWHERE}"
        )
