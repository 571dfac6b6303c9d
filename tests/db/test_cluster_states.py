"""A clustered database's states as the service's states, without a cluster: a Galera
node that is not ready or cut off (MySQL errors 1047, 1180) is unavailable (503), a
certification failure (1213) is a race to run again, the causal-read level comes
from the URL, and /healthcheck reports a node that is not a synced Primary member
as unready. (tests/cluster runs the same against a real 3-node cluster.)"""

from __future__ import annotations

import falcon.testing
import pymysql.err
import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.db import cluster, probe
from tally.db.engine import make_engine
from tally.db.retry import _retriable, unavailable
from tally.serve.compose import create_server


def _mysql_error(errno: int, message: str) -> sa.exc.DBAPIError:
    orig = pymysql.err.InternalError(errno, message)  # pymysql has no class of its own
    return sa.exc.DBAPIError.instance("SELECT 1", {}, orig, pymysql.err.Error)


@pytest.mark.parametrize(
    "errno, message",
    [
        (1047, "WSREP has not yet prepared node for application use"),
        (1180, "Got error 6 'No such device or address' during COMMIT"),
    ],
)
def test_a_galera_node_out_of_the_cluster_is_unavailable(errno, message):
    exc = _mysql_error(errno, message)
    assert unavailable(exc) and not _retriable(exc)


def test_a_certification_failure_is_a_race_to_run_again():
    exc = _mysql_error(1213, "Deadlock found when trying to get lock; try restarting transaction")
    assert _retriable(exc) and not unavailable(exc)


def test_any_other_mysql_error_stays_a_bug():
    assert not unavailable(_mysql_error(1064, "You have an error in your SQL syntax"))


@pytest.mark.parametrize("given, level", [(None, 1), ("0", 0), (("1", "3"), 3)])
def test_the_causal_read_level_comes_from_the_url(given, level):
    assert cluster.sync_wait_level(given) == level


def test_a_wrong_causal_read_level_is_refused_in_one_line():
    with pytest.raises(probe.UnusableDatabase, match="wsrep_sync_wait must be an integer"):
        make_engine("mysql+pymysql://tally:tally@127.0.0.1:1/tally?wsrep_sync_wait=on")


def test_an_unready_node_fails_the_healthcheck(sqlite_engine, monkeypatch):
    client = falcon.testing.TestClient(create_server(Settings.of(lab="off"), sqlite_engine))
    assert client.simulate_get("/healthcheck").status_code == 200
    monkeypatch.setattr(
        "tally.serve.health.cluster_state",
        lambda _engine: "galera node not synced (Donor/Desynced)",
    )
    answer = client.simulate_get("/healthcheck")
    assert (answer.status_code, answer.text) == (503, "database node unready")
    assert client.simulate_head("/healthcheck").status_code == 503


def test_a_database_that_is_no_cluster_has_no_cluster_state(engine):
    assert cluster.cluster_state(engine) is None  # SQLite, PostgreSQL, plain MariaDB
