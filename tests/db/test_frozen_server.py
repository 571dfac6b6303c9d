"""A MySQL server that takes connections and never answers (a frozen node: its kernel
accepts them, the server never greets) costs a request one read timeout in all,
then a 503: the waits of one request (for the pool, a connection, the greeting, a
ping, each statement) share that one budget, whole again after each answer.
(tests/cluster/test_galera.py freezes a real Galera node.)"""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.db import deadline
from tally.db.engine import make_engine
from tally.db.mysql import BoundedPool
from tally.db.retry import unavailable
from tally.placement.app import create_app
from tests.api.test_db_outage import assert_unavailable
from tests.conftest import PlacementClient

READ_TIMEOUT = 1.0
SLACK = 0.4  # a loaded test machine's own delays on top


@pytest.fixture
def frozen_url() -> Iterator[str]:
    """A listening socket nothing ever accepts from: connecting works, nothing is read."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]
    yield f"mysql+pymysql://tally:tally@127.0.0.1:{port}/tally?read_timeout={READ_TIMEOUT:g}"
    server.close()


@pytest.fixture
def frozen_engine(frozen_url: str) -> Iterator[sa.Engine]:
    engine = make_engine(frozen_url)  # (its probe waits one read timeout, then lets it be)
    yield engine
    engine.dispose()


def _tries(engine: sa.Engine, times: int) -> tuple[float, list[BaseException]]:
    """Seconds taken by `times` attempts to read, and what each raised."""
    raised = []
    started = time.monotonic()
    for _ in range(times):
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - each is checked by the caller
            raised.append(exc)
    return time.monotonic() - started, raised


def test_outside_a_request_each_wait_has_its_own_timeout(frozen_engine):
    took, raised = _tries(frozen_engine, 2)
    assert took >= 2 * READ_TIMEOUT
    assert len(raised) == 2 and all(unavailable(exc) for exc in raised)


def test_a_request_waits_one_read_timeout_in_all(frozen_engine):
    with deadline.request():
        took, raised = _tries(frozen_engine, 3)
    assert took <= READ_TIMEOUT + SLACK, f"three tries took {took:.2f} s"
    assert len(raised) == 3 and all(unavailable(exc) for exc in raised)


def test_each_request_of_the_app_is_a_503_within_the_read_timeout(frozen_engine):
    client = PlacementClient(create_app(Settings.of(), frozen_engine))
    for method, path in (("GET", "/resource_providers"), ("GET", "/allocation_candidates")):
        started = time.monotonic()
        result = client.simulate_request(method, path, query_string="resources=VCPU:1")
        took = time.monotonic() - started
        assert_unavailable(result)
        assert took <= READ_TIMEOUT + SLACK, f"{path}: a 503 after {took:.2f} s"


def test_waiting_for_a_pooled_connection_draws_on_the_budget():
    pool = BoundedPool(lambda: sqlite3.connect(":memory:"), pool_size=1, max_overflow=0)
    pool.budget_seconds = 0.3
    held = pool.connect()  # the only connection, in use
    try:
        started = time.monotonic()
        with deadline.request(), pytest.raises(sa.exc.TimeoutError):
            pool.connect()
        assert time.monotonic() - started < 0.3 + SLACK  # not pool_timeout's 30 s
    finally:
        held.close()
    assert pool.recreate()._timeout == 30  # its own timeout, whoever disposes it


def test_an_answer_makes_the_budget_whole_again():
    with deadline.request():
        time.sleep(0.2)
        assert deadline.left(1.0) < 0.85
        deadline.answered()
        assert deadline.left(1.0) > 0.95
    assert deadline.left(1.0) is None  # outside a request nothing is bounded
