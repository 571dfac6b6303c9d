"""The failed searches' Recorder over a SQLite file: its queue is bounded (a note
that finds it full is dropped and counted, never waited for), `stop` writes every
queued note before the thread ends, the next note starts another, the fork guard
(`tally.db.forks`) stops it, and a write that fails loses its batch, not the thread.
The writer is held inside its write where a test needs the queue to fill: events,
no sleeps."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa

from tally.db import forks
from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger import failure_records
from tally.placement.ledger.failure_records import FailureNote, Recorder


def note(request_id: str) -> FailureNote:
    return FailureNote(
        created_at=dt.datetime(2026, 12, 1),
        request_id=request_id,
        global_request_id=None,
        user_id=None,
        project_id=None,
        microversion="1.39",
        query="resources=VCPU:1",
        reason=None,
        verdict={},
    )


def kept(engine: sa.Engine) -> list[str]:
    with transaction(engine) as conn:
        query = sa.select(t.failures.c.request_id).order_by(t.failures.c.id)
        return list(conn.execute(query).scalars())


class HeldWriter:
    """`failure_records._insert`, held at its start until `release()`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.released = threading.Event(), threading.Event()
        real = failure_records._insert

        def held(engine: sa.Engine, rows: list[dict]) -> None:
            self.entered.set()
            assert self.released.wait(30)
            real(engine, rows)

        monkeypatch.setattr(failure_records, "_insert", held)

    def release(self) -> None:
        self.released.set()


def test_a_full_queue_drops_and_counts(sqlite_engine, monkeypatch, caplog):
    writer = HeldWriter(monkeypatch)
    recorder = Recorder(sqlite_engine, queue_size=2)
    assert recorder.note(note("req-1"))
    assert writer.entered.wait(30)  # the writer holds req-1, the queue is empty
    assert recorder.note(note("req-2")) and recorder.note(note("req-3"))
    assert not recorder.note(note("req-4"))  # full: dropped, at once
    assert not recorder.note(note("req-5"))
    assert recorder.dropped == 2
    assert [r.message for r in caplog.records].count(
        "failed searches are coming faster than they are written: 1 dropped so far "
        "(setting failures_queue = 2)"
    ) == 1  # once a minute, not once a note
    writer.release()
    recorder.stop()
    assert kept(sqlite_engine) == ["req-1", "req-2", "req-3"]


def test_stop_writes_everything_queued(sqlite_engine, monkeypatch):
    writer = HeldWriter(monkeypatch)
    recorder = Recorder(sqlite_engine, queue_size=1000)
    names = [f"req-{i}" for i in range(250)]  # more than a batch
    for name in names:
        assert recorder.note(note(name))
    assert writer.entered.wait(30)
    writer.release()
    recorder.stop()
    assert not recorder.running
    assert kept(sqlite_engine) == names


def test_the_next_note_after_stop_starts_another_writer(sqlite_engine):
    recorder = Recorder(sqlite_engine)
    recorder.stop()  # never started: nothing to do
    recorder.note(note("req-1"))
    recorder.stop()
    assert not recorder.running
    recorder.note(note("req-2"))
    assert recorder.running
    recorder.stop()
    assert kept(sqlite_engine) == ["req-1", "req-2"]


def test_stopped_before_a_fork(sqlite_engine):
    """`forks.before_fork` stops every background job: the writer writes its queue,
    ends, and gives its connection back (disposing the engine then leaves none)."""
    recorder = Recorder(sqlite_engine)
    recorder.note(note("req-1"))
    forks.stop_background()
    assert not recorder.running
    assert kept(sqlite_engine) == ["req-1"]
    sqlite_engine.dispose()
    url = sqlite_engine.url.render_as_string(hide_password=True)
    assert url not in forks.open_connections()


def test_a_failed_write_loses_its_batch_not_the_writer(sqlite_engine, monkeypatch):
    real = failure_records._insert
    calls: list[int] = []

    def failing_once(engine: sa.Engine, rows: list[dict]) -> None:
        calls.append(len(rows))
        if len(calls) == 1:
            raise sa.exc.OperationalError("INSERT", {}, Exception("database is locked"))
        real(engine, rows)

    monkeypatch.setattr(failure_records, "_insert", failing_once)
    recorder = Recorder(sqlite_engine)
    recorder.note(note("req-1"))
    recorder.stop()
    recorder.note(note("req-2"))
    recorder.stop()
    assert kept(sqlite_engine) == ["req-2"] and recorder.dropped == 1


def test_an_idle_writer_prunes_once_more_and_ends(sqlite_engine, monkeypatch):
    """No thread outlives the notes by more than a pruning period (each process's
    writer would otherwise prune an idle table forever); the next note starts one."""
    pruned = threading.Event()
    real = failure_records.prune

    def prune(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        found = real(*args, **kwargs)
        pruned.set()
        return found

    monkeypatch.setattr(failure_records, "prune", prune)
    recorder = Recorder(sqlite_engine, prune_every=0.05)
    recorder.note(note("req-1"))
    assert pruned.wait(30)
    thread = recorder._thread
    if thread is not None:  # (it may have ended already)
        thread.join(30)
    assert not recorder.running and kept(sqlite_engine) == ["req-1"]
    recorder.note(note("req-2"))
    recorder.stop()
    assert kept(sqlite_engine) == ["req-1", "req-2"]


def test_a_disposed_engine_stops_its_writer(sqlite_engine):
    recorder = Recorder(sqlite_engine, prune_every=3600)
    recorder.note(note("req-1"))
    assert recorder.running
    sqlite_engine.dispose()
    assert not recorder.running and kept(sqlite_engine) == ["req-1"]
