"""Folding a SQLite database's write-ahead log back into its file off the writers'
path. SQLite checkpoints inside the COMMIT that takes the log past
`wal_autocheckpoint` pages: that writer pays for copying every page written since.
Here a thread of its own runs a PASSIVE checkpoint (it never blocks readers or
writers, and SQLite lets other threads run while it works) shortly after writes;
the automatic one stays, at a higher mark, for when the thread falls behind (a long
read holding an old snapshot). The thread ends when writes stop for a while and
starts again with the next one."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time

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

    def wrote(self) -> None:
        """A write transaction is committing: fold the log soon."""
        self._wanted.set()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(
                        target=self._run, name="tally-wal-checkpoint", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=1.0, check_same_thread=False)
        except sqlite3.Error:
            return
        try:
            while self._wanted.wait(IDLE_SECONDS):
                self._wanted.clear()
                time.sleep(PAUSE_SECONDS)  # (the COMMIT that asked lands first)
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            pass  # the file went (a test's folder), or is busy: the next write asks again
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
