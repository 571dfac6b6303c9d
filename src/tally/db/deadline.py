"""How long one request may wait for a database that does not answer, in all.

Each wait of a request on the database (a free pooled connection, connecting, the
server's greeting, the ping of an idle connection, each statement's answer) draws on
one budget (`request`): it starts when the request does and is whole again each
time the database answers a statement. A server that stopped answering (a frozen
Galera node) thus costs a request one timeout, not one per step: the TCP connect
and the greeting after it, a ping and the reconnect after it, a wait for the pool
and the statement after it share it. A slow but answering database keeps each
statement's own timeout (a first index load of a large cloud runs many). The MySQL
engine applies it (`tally.db.mysql`); outside a request nothing is bounded here.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

# Below this a wait is not worth starting (and a socket timeout of 0 would not wait
# at all): the request is out of time.
LEAST_SECONDS = 0.05


class DeadlinePassed(Exception):  # noqa: N818 (a state of the service, as TimeoutError)
    """The request waited for the database as long as one timeout allows (503)."""


class _Budget:
    """The start of the request's current silence of the database."""

    def __init__(self) -> None:
        self.since = time.monotonic()


_CURRENT: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "tally_db_wait_budget", default=None
)


@contextlib.contextmanager
def request() -> Iterator[None]:
    """One request's budget, for the code run inside (the thread's context)."""
    token = _CURRENT.set(_Budget())
    try:
        yield
    finally:
        _CURRENT.reset(token)


def begin() -> contextvars.Token:
    """`request` for middleware that opens and closes it in two calls (`end`)."""
    return _CURRENT.set(_Budget())


def end(token: contextvars.Token) -> None:
    _CURRENT.reset(token)


def left(timeout: float) -> float | None:
    """Seconds left of a budget of `timeout` seconds (None outside a request): 0 or
    less when the database was silent for that long."""
    budget = _CURRENT.get()
    if budget is None:
        return None
    return budget.since + timeout - time.monotonic()


def bounded(own: float | None, timeout: float) -> float | None:
    """A wait's own timeout `own` (None: none), cut to what is left of a budget of
    `timeout` seconds; DeadlinePassed when too little is left to start one."""
    remaining = left(timeout)
    if remaining is None:
        return own
    if remaining < LEAST_SECONDS:
        raise DeadlinePassed(
            f"the database did not answer for {timeout:g} s (the read timeout) in this request"
        )
    return remaining if own is None else min(own, remaining)


def answered() -> None:
    """The database answered: the budget is whole again."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.since = time.monotonic()
