"""A database that says it is damaged: SQLite's "disk I/O error", "database disk
image is malformed", "file is not a database". A `SELECT 1` still answers on such a
file (it reads no page), so the health check would call it healthy while every
write fails; here each engine remembers the last such error any of its statements
met (`watch`), and `/healthcheck` reports it (`recent`) for `REMEMBER_SECONDS`."""

from __future__ import annotations

import time
import weakref

import sqlalchemy as sa
from sqlalchemy import event

REMEMBER_SECONDS = 60.0
SIGNS = ("disk i/o error", "malformed", "file is not a database")

_SEEN: weakref.WeakKeyDictionary[sa.Engine, tuple[float, str]] = weakref.WeakKeyDictionary()


def watch(engine: sa.Engine) -> None:
    """Remember the damage `engine`'s statements report."""

    @event.listens_for(engine, "handle_error")
    def _noted(context: sa.engine.ExceptionContext) -> None:
        told = str(context.original_exception).strip()
        if any(sign in told.lower() for sign in SIGNS):
            _SEEN[engine] = (time.monotonic(), told)


def recent(engine: sa.Engine) -> str | None:
    """The damage `engine` reported within `REMEMBER_SECONDS`, with its age."""
    seen = _SEEN.get(engine)
    if seen is None:
        return None
    age = time.monotonic() - seen[0]
    return f"{seen[1]} ({age:.0f} s ago)" if age < REMEMBER_SECONDS else None
