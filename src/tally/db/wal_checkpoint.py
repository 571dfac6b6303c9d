"""Folding a SQLite database's write-ahead log back into its file off the writers'
path. SQLite checkpoints inside the COMMIT that takes the log past
`wal_autocheckpoint` pages: that writer pays for copying every page written since.
Here a thread of its own runs a PASSIVE checkpoint (it never blocks readers or
writers, and SQLite lets other threads run while it works) shortly after writes;
the automatic one stays, at a higher mark, for when the thread falls behind (a long
read holding an old snapshot). The thread ends when writes stop for a while and
starts again with the next one; it is stopped, and its connection closed, when the
engine is disposed and before any fork (`tally.db.forks`): a connection that crossed
a fork would delete the log under the workers when closed."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time

from tally.db import forks

AUTOCHECKPOINT_PAGES = 10_000  # 40 MB of log before a COMMIT folds it itself
IDLE_SECONDS = 5.0  # no write for this long: the thread ends
PAUSE_SECONDS = 0.05  # between two checkpoints, at most


class Checkpointer:
    """The checkpoint thread of one database file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False
        forks.background(self)

    def wrote(self) -> None:
        """A write transaction is committing: fold the log soon."""
        self._wanted.set()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._stopping = False
                    self._thread = threading.Thread(
                        target=self._run, name="tally-wal-checkpoint", daemon=True
                    )
                    self._thread.start()

    def stop(self, seconds: float = 5.0) -> None:
        """End the thread and close its connection (the next write starts another)."""
        with self._lock:
            thread, self._stopping = self._thread, True
            self._wanted.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(seconds)

    def _run(self) -> None:
        what = f"sqlite:///{self.path} (checkpoint thread)"
        try:
            conn = sqlite3.connect(self.path, timeout=1.0, check_same_thread=False)
        except sqlite3.Error:
            return
        forks.opened(what)
        try:
            while self._wanted.wait(IDLE_SECONDS) and not self._stopping:
                self._wanted.clear()
                time.sleep(PAUSE_SECONDS)  # (the COMMIT that asked lands first)
                if self._stopping:
                    break
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            pass  # the file went (a test's folder), or is busy: the next write asks again
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            forks.opened(what, -1)
