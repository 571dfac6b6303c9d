"""The durability cell of the failed searches' Recorder, on every backend x 1 and
4 workers: a serving process whose workers note failures without pause
(failure_notes.py) is stopped by SIGTERM, and every note its Recorder had taken
before the signal was sent is in `tally_failures` after (the worker writes its
queue before it exits); started again and killed (-9, the whole process group)
while noting: the database is intact (SQLite's integrity_check), what the first run
wrote is still there, and the service starts again over it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import make_engine
from tally.db.transaction import transaction
from tests.live import free_port, server_process, wait_until

REPO = Path(__file__).resolve().parents[2]
NOTED = 300  # notes taken (in all workers) before the signal

pytestmark = [pytest.mark.durability, pytest.mark.slow]


def queued(path: Path) -> set[str]:
    """The request ids of whole lines of `path` (a line is written after its note)."""
    if not path.exists():
        return set()
    text = path.read_text()
    return set(text[: text.rfind("\n") + 1].split())


def stored(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with transaction(engine) as conn:
            return set(conn.execute(sa.select(t.failures.c.request_id)).scalars())
    finally:
        engine.dispose()


def noting(data: Path, url: str, workers: int, files: Path, signum: int) -> set[str]:
    """Serve and note until NOTED notes were taken, then signal the process group;
    the ids taken before the signal."""
    port = free_port()
    env = dict(
        os.environ,
        TALLY_DATABASE_URL=url,
        TALLY_PORT=str(port),
        TALLY_WORKERS=str(workers),
        TALLY_DATA_DIR=str(data),
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]),
    )
    command = [sys.executable, "-m", "tests.durability.failure_notes", str(files)]
    with server_process(command, env, data / f"serve-{signum}.log", port) as (_, proc):
        assert wait_until(lambda: len(queued(files)) >= NOTED, 60), "no notes were taken"
        before = queued(files)
        os.killpg(proc.pid, signum)
        proc.wait(timeout=30)
    return before


def test_notes_queued_before_sigterm_are_written(
    backend: str, workers: int, database_url: str, tmp_path: Path
) -> None:
    terminated = noting(tmp_path, database_url, workers, tmp_path / "term.ids", signal.SIGTERM)
    kept = stored(database_url)
    assert terminated <= kept, f"{len(terminated - kept)} queued notes lost at SIGTERM"

    noting(tmp_path, database_url, workers, tmp_path / "kill.ids", signal.SIGKILL)
    if backend == "sqlite":
        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                assert conn.execute(sa.text("PRAGMA integrity_check")).scalar() == "ok"
        finally:
            engine.dispose()
    assert kept <= stored(database_url)  # what SIGTERM's run wrote survived the kill
    again = noting(tmp_path, database_url, workers, tmp_path / "again.ids", signal.SIGTERM)
    assert again <= stored(database_url)  # it starts again, and writes as before
