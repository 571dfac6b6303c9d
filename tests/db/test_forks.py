"""Nothing of a database crosses a fork: the SQLite checkpoint thread stops (its
connection closed) when its engine is disposed and before any fork, and a process
about to fork workers with a connection still open refuses, naming it."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from pathlib import Path

import pytest

from tally.db import forks
from tally.db import schema as t
from tally.db.engine import make_engine
from tally.db.transaction import transaction
from tally.placement.ledger.bootstrap import prepare_database


def _checkpoint_threads() -> list[threading.Thread]:
    return [th for th in threading.enumerate() if th.name == "tally-wal-checkpoint"]


def _write(engine) -> None:  # noqa: ANN001
    with transaction(engine, write=True) as conn:
        name = f"CUSTOM_F{uuid.uuid4().hex.upper()}"
        conn.execute(t.traits.insert(), [{"name": name, "created_at": None}])


def _ours(url: str) -> dict[str, int]:
    return {what: n for what, n in forks.open_connections().items() if url in what}


def test_dispose_stops_the_checkpoint_thread_and_closes_every_connection(tmp_path: Path):
    path = tmp_path / "tally.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    prepare_database(engine)
    _write(engine)
    assert _checkpoint_threads(), "a write starts the checkpoint thread"
    assert _ours(str(path)), "the pool's connection and the thread's are counted"
    engine.dispose()  # what `tally serve` does before it forks its workers
    assert not _checkpoint_threads()
    assert _ours(str(path)) == {}  # nothing of this database would cross a fork


def test_a_fork_refuses_while_a_connection_is_open(tmp_path: Path):
    path = tmp_path / "tally.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect():  # checked out across the fork
            with pytest.raises(forks.ForkUnsafe, match=r"1 to sqlite:///.*tally\.sqlite"):
                forks.before_fork()
    finally:
        engine.dispose()
    assert _ours(str(path)) == {}


def test_any_fork_stops_the_checkpoint_thread_first(tmp_path: Path):
    """A WSGI server that loads the app, then forks (os.register_at_fork)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    prepare_database(engine)
    _write(engine)
    assert _checkpoint_threads()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports whether a checkpoint connection came across
        inherited = [w for w in forks.open_connections() if "checkpoint thread" in w]
        os.write(write, b"inherited" if inherited else b"clean")
        os._exit(0)
    os.close(write)
    told = os.read(read, 64)
    os.waitpid(pid, 0)
    os.close(read)
    assert told == b"clean"
    assert not _checkpoint_threads()
    _write(engine)  # the next write starts it again, in the process that writes
    assert _checkpoint_threads()
    engine.dispose()


def test_serve_refuses_to_fork_workers_while_a_connection_is_open(tmp_path: Path, caplog):
    from tally.serve import server as serving  # noqa: PLC0415

    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    sock = serving.listen("127.0.0.1", 0)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with engine.connect(), pytest.raises(SystemExit) as stopped:
            serving.serve(sock, lambda: None, serving.Limits(), workers=2)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        sock.close()
        engine.dispose()
    assert stopped.value.code == 1
    assert "refusing to fork workers" in caplog.text
