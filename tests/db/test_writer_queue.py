"""SQLite writers queue on a lock file next to the database (db.writer_queue.WriterQueue).

A write transaction begins only once it holds an exclusive `flock` on
`<database>-writers.lock`, so writers of every `tally serve` worker on the host
take turns without SQLite's sleeping busy handler; reads never wait for it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from tally.db.engine import make_engine
from tally.db.retry import unavailable
from tally.db.transaction import transaction
from tally.db.writer_queue import WriterQueue


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    engine = make_engine(f"sqlite:///{tmp_path}/tally.sqlite")
    with transaction(engine, write=True) as conn:
        conn.exec_driver_sql("CREATE TABLE notes (n INTEGER)")
    return engine


def _held_elsewhere(path: str) -> bool:
    """Whether another open file description holds the lock on `path`."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_write_begins_only_when_the_queue_lets_it(engine: sa.Engine, tmp_path: Path) -> None:
    lock_file = f"{tmp_path}/tally.sqlite-writers.lock"
    assert os.path.exists(lock_file)  # made by the first write
    other = os.open(lock_file, os.O_RDWR)  # another worker, mid-write
    fcntl.flock(other, fcntl.LOCK_EX)
    done = threading.Event()

    def write() -> None:
        with transaction(engine, write=True) as conn:
            conn.exec_driver_sql("INSERT INTO notes VALUES (1)")
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert not done.wait(0.5), "the write went ahead of the queue"
        with transaction(engine) as conn:  # reading does not queue
            assert conn.exec_driver_sql("SELECT count(*) FROM notes").scalar() == 0
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    assert done.wait(5), "the write did not go on once the queue was free"
    writer.join()
    with transaction(engine) as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM notes").scalar() == 1
    assert not _held_elsewhere(lock_file)  # released after the commit


def test_a_write_whose_turn_came_too_late_is_a_locked_database(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue's clock is the test's: the writer asks for its turn, the clock moves
    past `WAIT_SECONDS` while another worker holds the lock, then the lock comes free."""
    now = [1000.0]
    asked = threading.Event()

    def monotonic() -> float:
        asked.set()  # (the queue reads the clock as a write asks for its turn)
        return now[0]

    other = os.open(f"{tmp_path}/tally.sqlite-writers.lock", os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)  # another worker's write, longer than the timeout
    queue_module = sys.modules[WriterQueue.__module__]
    monkeypatch.setattr(queue_module, "time", SimpleNamespace(monotonic=monotonic))
    refused: list[Exception] = []

    def write() -> None:
        try:
            with transaction(engine, write=True) as conn:
                conn.exec_driver_sql("INSERT INTO notes VALUES (1)")
        except Exception as exc:  # noqa: BLE001 (kept for the assertions below)
            refused.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert asked.wait(5), "the write never asked for its turn"
        now[0] += WriterQueue.WAIT_SECONDS + 1  # the other worker's write goes on and on
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    writer.join(5)
    assert len(refused) == 1 and isinstance(refused[0], sa.exc.TimeoutError)
    assert unavailable(refused[0])  # answered 503 with retry-after, as a locked database
    with transaction(engine, write=True) as conn:  # the next write goes ahead
        conn.exec_driver_sql("INSERT INTO notes VALUES (2)")
    with transaction(engine) as conn:
        assert [n for (n,) in conn.exec_driver_sql("SELECT n FROM notes")] == [2]
    assert not _held_elsewhere(f"{tmp_path}/tally.sqlite-writers.lock")


def test_the_queue_is_released_when_a_write_fails(engine: sa.Engine, tmp_path: Path) -> None:
    with pytest.raises(sa.exc.OperationalError):
        with transaction(engine, write=True) as conn:
            conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")
    assert not _held_elsewhere(f"{tmp_path}/tally.sqlite-writers.lock")


def test_a_nested_turn_keeps_the_lock_until_the_outer_one_ends(tmp_path: Path) -> None:
    queue = WriterQueue(str(tmp_path / "db.sqlite"))
    lock_file = f"{tmp_path}/db.sqlite-writers.lock"
    with queue.turn():
        with queue.turn():
            assert _held_elsewhere(lock_file)
        assert _held_elsewhere(lock_file)
    assert not _held_elsewhere(lock_file)


def test_threads_take_turns_and_every_write_lands(engine: sa.Engine) -> None:
    def writes(start: int) -> None:
        for n in range(start, start + 50):
            with transaction(engine, write=True) as conn:
                conn.exec_driver_sql(f"INSERT INTO notes VALUES ({n})")

    threads = [threading.Thread(target=writes, args=(i * 50,)) for i in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started < 60
    with transaction(engine) as conn:
        found = [n for (n,) in conn.exec_driver_sql("SELECT n FROM notes ORDER BY n")]
    assert found == list(range(300))


def test_an_unwritable_directory_leaves_the_order_to_sqlite(tmp_path: Path) -> None:
    queue = WriterQueue(str(tmp_path / "missing" / "db.sqlite"))  # no such directory
    with queue.turn():  # no lock file can be made: the turn is the thread lock alone
        pass
    assert queue.path is None
