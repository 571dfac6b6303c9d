"""The durability matrix: every backend x 1 and 4 workers, a live `tally serve`
under a mixed write load for longer than each background timer of ours (the
SQLite checkpoint thread ends after 5 s idle, the history's pruning is set to run
every second), stopped by SIGTERM, started again and killed (-9, the whole
process group) in the middle of the load. After each stop the database is read
alone: every acknowledged write is there, nothing refused is, no provider
generation went back, and `tally db check` passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from tally.db.engine import make_engine
from tests.durability.ledger_load import FAILURES, Books, LedgerLoad, make_hosts, problems
from tests.live import tally_process

LOAD_SECONDS = 7.0  # past the checkpoint thread's 5 s idle and several pruning passes
CLAIMERS = 6
TIMERS = {  # every background job of ours runs during the load
    "history_prune_seconds": "1",
    "history_keep_rows": "150",
}

pytestmark = [pytest.mark.durability, pytest.mark.slow]


def signal_after(proc: subprocess.Popen, signum: int, seconds: float) -> Callable[[], bool]:
    """The load's `stop`: false for `seconds`, then it signals the server's whole
    process group (the writers are still writing) and is true from then on."""
    started, sent = time.monotonic(), []

    def due() -> bool:
        if not sent and time.monotonic() - started > seconds:
            sent.append(signum)
            os.killpg(proc.pid, signum)
        return bool(sent)

    return due


def test_every_acknowledged_write_survives(
    backend: str, workers: int, database_url: str, tmp_path: Path
) -> None:
    books: Books | None = None
    FAILURES.clear()
    hosts: list[str] = []
    figures = []
    for stop in (signal.SIGTERM, signal.SIGKILL):
        data = tmp_path / f"data-{stop.name}"
        data.mkdir()
        settings = {"database_url": database_url, "workers": str(workers), **TIMERS}
        with tally_process(data, **settings) as (url, proc):
            hosts = hosts or make_hosts(url, 4)
            load = LedgerLoad(url, hosts, books)
            books = load.books
            before = books.acknowledged
            load.run(CLAIMERS, signal_after(proc, stop, LOAD_SECONDS))
            proc.wait(timeout=30)
            figures.append(f"{stop.name}: {books.acknowledged - before} acknowledged")
        engine = make_engine(database_url)
        try:
            found = problems(books, engine)
            assert not found, f"after {stop.name} ({figures}):\n" + "\n".join(found[:20])
            if backend == "sqlite":
                with engine.connect() as conn:
                    assert conn.execute(sa.text("PRAGMA integrity_check")).scalar() == "ok"
        finally:
            engine.dispose()
        checked = subprocess.run(
            [sys.executable, "-c", "from tally.cli.main import cli; cli()", "db", "check"],
            env={**os.environ, "TALLY_DATABASE_URL": database_url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert books.acknowledged - before > 50, f"the load hardly wrote: {figures}"
        assert not FAILURES, f"{len(FAILURES)} answers 5xx, first: {FAILURES[:3]}"
    print(
        f"{backend} x {workers}: {figures}, refused {books.refused}, unanswered {books.unanswered}"
    )
