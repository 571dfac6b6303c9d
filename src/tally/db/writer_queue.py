"""SQLite writers wait their turn here, not in SQLite's busy handler.

SQLite lets one writer in at a time and makes the others poll, sleeping 1, 2, 5, 10 ms
and longer between tries: under a steady stream of small writes a waiting writer
often sleeps well past the moment the lock came free. Here a writer takes a lock of
its process, then an exclusive `flock` on a file next to the database (the other
`tally serve` workers on this host), and only then begins: the next writer wakes the
moment the previous one commits (a blocking `flock`: retrying it within a millisecond
instead cost 20-35% of the write rate). A writer whose turn came only after
`WAIT_SECONDS` (SQLite's busy timeout) gives up at once as on a locked database
(503), so a queue held up by a writer that is not Tally's drains without running each
in turn into the busy timeout. SQLite's own lock still guards the data.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator

import sqlalchemy as sa

LOG = logging.getLogger(__name__)


class WriterQueue:
    """The queue of one SQLite database's writers (`install`, then `of(engine)`)."""

    WAIT_SECONDS = 30.0

    def __init__(self, database: str | None) -> None:
        self.path = f"{database}-writers.lock" if database else None
        self._thread_lock = threading.RLock()
        self._file: tuple[int, int] | None = None  # (pid, descriptor): one per process
        self._depth = 0  # turns the thread holding the lock is in

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        asked = time.monotonic()
        with self._thread_lock:
            fd = self._descriptor() if self._depth == 0 else None  # (a nested turn holds it)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if self._depth == 0 and time.monotonic() - asked > self.WAIT_SECONDS:
                    raise sa.exc.TimeoutError("no turn to write within the busy timeout")
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _descriptor(self) -> int | None:
        if self.path is None:
            return None
        pid = os.getpid()
        if self._file is None or self._file[0] != pid:  # new, or inherited over a fork
            try:
                self._file = (pid, os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            except OSError as exc:  # a read-only directory: SQLite alone decides
                LOG.debug("no writer queue file %s: %s", self.path, exc)
                self.path = None
                return None
        return self._file[1]


_QUEUES: weakref.WeakKeyDictionary[sa.Engine, WriterQueue] = weakref.WeakKeyDictionary()


def install(engine: sa.Engine, database: str | None) -> None:
    """Give the SQLite `engine` (of the file `database`; None in memory) its queue."""
    _QUEUES[engine] = WriterQueue(database)


def of(engine: sa.Engine) -> WriterQueue | None:
    """The queue of `engine`'s writers; None for a server database."""
    return _QUEUES.get(engine)
