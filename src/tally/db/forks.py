"""Nothing of a database crosses a fork.

A connection inherited by a child is one file handle (or socket) in two processes.
For SQLite that is fatal: its locks are the process's, so the parent closing its
copy, believing itself the last connection, checkpoints and deletes the
write-ahead log under the children still writing into it (acknowledged writes
lost, "disk I/O error", "database disk image is malformed"). So every engine
counts its open connections here (`track`), background jobs that hold one of
their own (the SQLite checkpoint thread) register a way to stop (`background`),
and a process about to fork workers calls `before_fork`: the jobs are stopped,
and if any connection is still open it refuses, naming it.

Other forkers (a WSGI server that loads the app before forking) get the jobs
stopped by `os.register_at_fork`; their pooled connections are theirs to close
(gunicorn and uWSGI load the app after the fork by default).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import Counter
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy import event

_LOCK = threading.Lock()
_OPEN: Counter[str] = Counter()  # what (a URL without password) -> connections open


class Stoppable(Protocol):
    def stop(self) -> None: ...


_JOBS: weakref.WeakSet[Stoppable] = weakref.WeakSet()  # type: ignore[type-var]


class ForkUnsafe(Exception):
    """A database connection is open in a process about to fork."""


def opened(what: str, count: int = 1) -> None:
    """Note `count` connections of `what` opened (negative: closed)."""
    with _LOCK:
        _OPEN[what] += count
        if _OPEN[what] <= 0:
            del _OPEN[what]


def track(engine: sa.Engine) -> None:
    """Count `engine`'s connections as its pool opens and closes them."""
    what = engine.url.render_as_string(hide_password=True)

    @event.listens_for(engine, "connect")
    def _connected(_dbapi, _record) -> None:  # noqa: ANN001
        opened(what)

    @event.listens_for(engine, "close")
    def _closed(_dbapi, _record) -> None:  # noqa: ANN001
        opened(what, -1)

    @event.listens_for(engine, "close_detached")
    def _closed_detached(_dbapi) -> None:  # noqa: ANN001
        opened(what, -1)


def background(job: Stoppable) -> None:
    """`job` holds a connection of its own: `stop()` ends it and closes it."""
    _JOBS.add(job)


def stop_background() -> None:
    for job in list(_JOBS):
        job.stop()


def open_connections() -> dict[str, int]:
    with _LOCK:
        return dict(_OPEN)


def before_fork() -> None:
    """Stop the background jobs; refuse (ForkUnsafe) if a connection is still open."""
    stop_background()
    still = open_connections()
    if still:
        listed = ", ".join(f"{n} to {what}" for what, n in sorted(still.items()))
        raise ForkUnsafe(
            f"refusing to fork workers: database connections are open in this process "
            f"({listed}); a child would share them and could lose acknowledged writes"
        )


os.register_at_fork(before=stop_background)
