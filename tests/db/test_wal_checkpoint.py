"""SQLite's write-ahead log is folded back into the database file by a thread of
its own after writes, not by the writer's COMMIT (which would pay for copying
every page since the last fold)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from tally.db import schema as t
from tally.db import wal_checkpoint
from tally.db.transaction import transaction
from tests.live import wait_until


def test_writes_are_folded_into_the_file_off_the_commit(sqlite_engine):
    path = Path(sqlite_engine.url.database)
    with sqlite_engine.connect() as conn:  # every connection raises the COMMIT's own mark
        mark = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    assert mark == wal_checkpoint.AUTOCHECKPOINT_PAGES
    before = path.stat().st_size
    rows = [{"name": f"CUSTOM_T{n:05d}", "created_at": None} for n in range(3000)]
    with transaction(sqlite_engine, write=True) as conn:
        conn.execute(t.traits.insert(), rows)
    # well under the mark: no COMMIT folded it; the thread does
    assert wait_until(lambda: path.stat().st_size > before, seconds=10), (
        "the log was never folded into the database file"
    )
    with sqlite_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.traits)).scalar() >= 3000


def test_a_database_in_memory_has_no_checkpoint_thread():
    from tally.db.engine import make_engine  # noqa: PLC0415

    engine = make_engine("sqlite:///:memory:")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 1000  # SQLite's
