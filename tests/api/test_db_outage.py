"""A database that cannot be reached answers 503 with `retry-after` and Placement's
error body (not 500 "unexpected error"), and service comes back by itself once the
database does: SQLite locked past its busy timeout, a PostgreSQL or MySQL server
that refuses connections, and a private PostgreSQL cluster stopped and started
again under a running app."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tally.config import Settings
from tally.db.engine import make_engine
from tally.db.retry import unavailable
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tests.conftest import PlacementClient
from tests.live import free_port


def assert_unavailable(result) -> None:  # noqa: ANN001 - a falcon test result
    assert result.status_code == 503, result.text
    assert int(result.headers["retry-after"]) > 0
    (error,) = result.json["errors"]
    assert error["status"] == 503
    assert error["title"] == "Service Unavailable"
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == result.headers["openstack-request-id"]
    assert "database is unavailable" in error["detail"]


def provider_body() -> dict:
    return {"name": f"rp-{uuid.uuid4().hex[:8]}"}


def test_sqlite_locked_past_the_busy_timeout(tmp_path):
    path = tmp_path / "tally.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    prepare_database(engine)

    @event.listens_for(engine, "connect")
    def short_wait(dbapi_conn, _record) -> None:  # noqa: ANN001 - after tally's 30 s
        dbapi_conn.execute("PRAGMA busy_timeout=200")

    engine.dispose()
    client = PlacementClient(create_app(Settings.of(), engine))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        assert_unavailable(client.simulate_post("/resource_providers", json=provider_body()))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert client.simulate_post("/resource_providers", json=provider_body()).status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres@127.0.0.1:{port}/tally",
        "mysql+pymysql://tally:tally@127.0.0.1:{port}/tally",
    ],
    ids=["postgresql", "mysql"],
)
def test_a_server_refusing_connections(url):
    engine = make_engine(url.format(port=free_port()))  # nothing listens there
    client = PlacementClient(create_app(Settings.of(), engine))
    assert_unavailable(client.simulate_get("/resource_providers"))
    assert_unavailable(client.simulate_post("/resource_providers", json=provider_body()))
    engine.dispose()


def test_a_wrong_statement_is_still_a_500_not_a_503(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")  # never migrated
    client = PlacementClient(create_app(Settings.of(), engine))
    result = client.simulate_get("/resource_providers")
    assert result.status_code == 500
    assert "retry-after" not in result.headers
    with engine.connect() as conn, pytest.raises(sa.exc.OperationalError) as caught:
        conn.exec_driver_sql("SELECT * FROM no_such_table")
    assert not unavailable(caught.value)
    engine.dispose()


# ---------------------------------------------------------------- a real outage


class PrivateCluster:
    """A throw-away PostgreSQL cluster (as bin/db-private makes), run as user
    postgres when we are root."""

    def __init__(self, folder: Path) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        if not bins:
            pytest.skip("PostgreSQL server binaries are not installed")
        self.bin, self.folder, self.port = bins[-1], folder, free_port()
        self.data = folder / "data"
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.folder / "log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-o", options, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.as_postgres, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr + done.stdout


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    folder = Path(tempfile.mkdtemp(prefix="tally-pg-outage-"))  # pytest's tmp is root-only
    found = None
    try:
        found = PrivateCluster(folder)
        found.start()
        yield found
    finally:
        if found is not None and (found.data / "postmaster.pid").exists():
            found.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_postgresql_stopped_then_started_again(cluster):
    engine = make_engine(cluster.url)
    prepare_database(engine)
    client = PlacementClient(create_app(Settings.of(), engine))
    created = client.simulate_post("/resource_providers", json=provider_body())
    assert created.status_code == 200
    cluster.stop()
    assert_unavailable(client.simulate_get("/resource_providers"))
    assert_unavailable(client.simulate_post("/resource_providers", json=provider_body()))
    cluster.start()
    listed = client.simulate_get("/resource_providers")  # no restart of the app
    assert listed.status_code == 200
    assert [rp["uuid"] for rp in listed.json["resource_providers"]] == [created.json["uuid"]]
    engine.dispose()
