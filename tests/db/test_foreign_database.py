"""Pointed at a database it must not use, `tally serve`, `tally db upgrade` and the
WSGI app refuse in one line, and change nothing there: an upstream Placement
database (its schema revision named, and `tally db import`), a schema revision no one
knows, a server that cannot be reached (the URL without its password, the driver's
reason), a URL whose driver is not installed (the extra that brings it)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tally.cli.main import cli
from tally.config import Settings
from tally.db import upstream_schema as upstream
from tally.db.probe import UnusableDatabase
from tally.serve.compose import create_server
from tests.conftest import server_database_url
from tests.live import free_port


def upstream_database(url: str, revision: str = upstream.HEAD) -> None:
    """Upstream's schema (as tests/e2e/test_upstream_move.py checks it against
    upstream's own) at `revision`, holding one provider."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        upstream.create_schema(conn)
        conn.execute(upstream.alembic_version.update().values(version_num=revision))
        conn.execute(
            upstream.resource_providers.insert().values(
                id=1, uuid="4e8e5957-649f-477b-9e5b-f1f75b21c03c", name="cn1", generation=3
            )
        )
    engine.dispose()


def state(url: str) -> str:
    """What a refusal must leave as it was: a SQLite file's bytes and journal mode
    (no WAL), or a server database's tables and revision."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        with sqlite3.connect(f"file:{parsed.database}?mode=ro", uri=True) as conn:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return hashlib.sha256(Path(parsed.database).read_bytes()).hexdigest() + mode
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        tables = sorted(sa.inspect(conn).get_table_names())
        revision = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    return f"{tables} {revision}"


def run(*args: str, database: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"TALLY_DATABASE_URL": database})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'placement.sqlite'}"
        return
    url, drop = server_database_url(request.param)
    yield url
    drop()


@pytest.mark.parametrize("revision", [upstream.HEAD, "422ece571366", "b4ed3a175331"])
def test_an_upstream_database_is_refused_and_left_alone(database, revision):
    upstream_database(database, revision)
    before = state(database)
    where = sa.engine.make_url(database).render_as_string(hide_password=True)
    for command in (["db", "upgrade"], ["serve", "--port", str(free_port())]):
        code, output = run(*command, database=database)
        assert code == 1
        (line,) = output.splitlines()
        assert line.startswith(f"Error: {where} is an upstream Placement database")
        assert f"schema revision {revision}" in line
        assert f"`tally db import --from {where}`" in line
    with pytest.raises(UnusableDatabase, match=f"upstream Placement database .*{revision}"):
        create_server(Settings.of(database_url=database))
    code, output = run("db", "version", database=database)
    assert code == 0 and f"current {revision}, head " in output
    assert state(database) == before


def test_the_wsgi_module_refuses_an_upstream_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'placement.sqlite'}"
    upstream_database(url)
    before = state(url)
    done = subprocess.run(
        [sys.executable, "-c", "import tally.serve.wsgi"],
        env=dict(os.environ, TALLY_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"tally.db.errors.UnusableDatabase: {url} is an upstream Placement database (schema "
        f"revision {upstream.HEAD}, the head of openstack-placement 16.0.0). Tally keeps its "
        f"own schema and has changed nothing there: copy it into an empty database with "
        f"`tally db import --from {url}` and point Tally at that one (database_url / "
        f"TALLY_DATABASE_URL)."
    )
    assert state(url) == before


def test_a_revision_no_one_knows_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.sqlite'}"
    upstream_database(url, "0fedcba98765")
    before = state(url)
    code, output = run("db", "upgrade", database=url)
    assert code == 1
    assert "at schema revision 0fedcba98765, which this Tally does not know" in output
    assert state(url) == before


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql+psycopg://tally:s3cret@127.0.0.1:{port}/tally", "Connection refused"),
        ("mysql+pymysql://tally:s3cret@127.0.0.1:{port}/tally", "Can't connect to MySQL"),
    ],
    ids=["postgresql", "mysql"],
)
def test_an_unreachable_database_is_one_line(url, reason):
    url = url.format(port=free_port())  # nothing listens there
    shown = url.replace("s3cret", "***")
    for command in (["db", "upgrade"], ["serve", "--port", str(free_port())]):
        code, output = run(*command, database=url)
        assert code == 1
        (line,) = output.splitlines()
        assert line.startswith(f"Error: cannot reach database {shown}: ")
        assert reason in line and "s3cret" not in line


def test_a_sqlite_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database\n" * 100)
    code, output = run("db", "upgrade", database=f"sqlite:///{path}")
    assert code == 1
    assert output == f"Error: cannot reach database sqlite:///{path}: file is not a database\n"
    assert path.read_text() == "not a database\n" * 100


@pytest.mark.parametrize(
    ("url", "module", "package", "extra"),
    [
        (
            "postgresql+psycopg://tally@127.0.0.1/tally",
            "psycopg",
            "psycopg[binary]>=3.1",
            "postgres",
        ),
        ("mysql+pymysql://tally@127.0.0.1/tally", "pymysql", "pymysql>=1.1", "mysql"),
    ],
)
def test_a_missing_driver_names_what_installs_it(url, module, package, extra, monkeypatch):
    """Into the Python running Tally (no index has Tally itself), or its extra from
    Tally's checkout."""
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    for command in (["db", "upgrade"], ["serve", "--port", str(free_port())]):
        code, output = run(*command, database=url)
        assert code == 1
        assert output == (
            f"Error: cannot use {url}: its driver ({module}) is not installed; install it: "
            f"`{sys.executable} -m pip install '{package}'` (Tally's [{extra}] extra; from "
            f"Tally's checkout: `pip install '.[{extra}]'`).\n"
        )


@pytest.mark.postgres
def test_a_placement_conf_url_for_psycopg2_runs_on_psycopg(monkeypatch):
    url, drop = server_database_url("postgresql")
    try:
        monkeypatch.setitem(sys.modules, "psycopg2", None)
        code, output = run("db", "upgrade", database=url.replace("+psycopg://", "+psycopg2://"))
        assert code == 0, output
        assert output.startswith("database at revision ")
    finally:
        drop()


def test_a_sqlite_folder_that_cannot_be_made(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    url = f"sqlite:///{blocker / 'data' / 'tally.sqlite'}"
    code, output = run("db", "upgrade", database=url)
    assert (code, output) == (
        1,
        f"Error: the data folder {blocker / 'data'} cannot be made: {blocker} is not a "
        "folder; choose another folder: data_dir (TALLY_DATA_DIR), or a sqlite:/// "
        "database_url\n",
    )
