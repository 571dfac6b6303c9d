"""Moving a cloud from upstream Placement to Tally and back, with upstream
OpenStack Placement 16.0.0 itself on both ends.

Upstream makes its database (`placement-manage db sync`, or its own migrations up to
the consumer types revision) and its books are written through its API
(`placement_books.populate`); `tally db import` copies them into an empty database
for Tally; Tally's answers to every read in `placement_books.reads` must equal
upstream's; a write with the generations Nova holds then succeeds; `tally db export`
copies the result into a fresh database in upstream's schema, upstream Placement
serves it, and answers every read as Tally did. SQLite always; PostgreSQL and MySQL
when TALLY_TEST_DATABASE / TALLY_TEST_MYSQL name a server.

Upstream (with gunicorn and the psycopg2 / PyMySQL drivers) lives in a throw-away venv
under /tmp, made once and reused (TALLY_UPSTREAM_DB_VENV to move it). Upstream names a
PostgreSQL database `postgresql+psycopg2://` (its code needs psycopg2), as its operators'
placement.conf files do; Tally reads the same URLs with its own driver, psycopg 3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import MYSQL_SERVER, PG_SERVER, create_database
from tests.e2e import placement_books as books
from tests.e2e.test_cli_story import UPSTREAM
from tests.live import VENV_TIMEOUT, free_port, server_process, tally_serve, throwaway_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(VENV_TIMEOUT)]

VENV = Path(
    os.environ.get(
        "TALLY_UPSTREAM_DB_VENV", Path(tempfile.gettempdir()) / "tally-upstream-16.0.0-db"
    )
)
CONF = """\
[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = {url}
[oslo_policy]
enforce_new_defaults = False
"""
# upstream's own migrations, stopped at a revision (placement-manage goes to head only)
MIGRATE_TO = """\
import sys
from oslo_config import cfg
from placement import conf, db_api
from placement.db.sqlalchemy import migration
config = cfg.ConfigOpts()
conf.register_opts(config)
config(["--config-file", sys.argv[1]], project="placement", default_config_files=[])
db_api.configure(config)
migration.upgrade(sys.argv[2])
"""


def install() -> Path:
    packages = [UPSTREAM, "gunicorn", "psycopg2-binary", "PyMySQL"]  # upstream needs psycopg2
    return throwaway_venv(VENV, packages, f"upstream {UPSTREAM} with database drivers")


class Upstream:
    """Upstream Placement 16.0.0 over one database."""

    def __init__(self, venv: Path, folder: Path, url: str) -> None:
        self.venv, self.folder, self.url = venv, folder, url
        folder.mkdir(parents=True, exist_ok=True)
        self.conf = folder / "placement.conf"
        self.conf.write_text(CONF.format(url=url))

    def sync(self, revision: str = "head") -> None:
        if revision == "head":
            command = [str(self.venv / "bin" / "placement-manage"), "--config-file",
                       str(self.conf), "db", "sync"]  # fmt: skip
        else:
            command = [str(self.venv / "bin" / "python"), "-c", MIGRATE_TO, str(self.conf),
                       revision]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        port = free_port()
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=str(self.folder))
        command = [
            str(self.venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers",
            "1", "--chdir", str(self.folder), "placement.wsgi.api:application",
        ]  # fmt: skip
        log = self.folder / "upstream.log"
        with server_process(command, env, log, port) as (url, _proc):
            yield url


class Databases:
    """New, empty databases on one backend (SQLite files, or a test server's)."""

    def __init__(self, backend: str, folder: Path) -> None:
        self.backend, self.folder, self.drops = backend, folder, []
        server = {"postgresql": PG_SERVER, "mysql": MYSQL_SERVER}.get(backend)
        if backend != "sqlite" and not server:
            pytest.skip(f"{backend} needs TALLY_TEST_DATABASE / TALLY_TEST_MYSQL")
        self.server = server

    def new(self, name: str) -> str:
        """A new database's URL, as upstream's placement.conf would write it."""
        if self.backend == "sqlite":
            return f"sqlite:///{self.folder / name}.sqlite"
        url, drop = create_database(self.server, f"tally_move_{name}_{uuid.uuid4().hex[:8]}")
        self.drops.append(drop)
        return url.replace("postgresql+psycopg://", "postgresql+psycopg2://")

    def close(self) -> None:
        for drop in self.drops:
            drop()


def ours(url: str) -> str:
    """The same database, on the driver this test process has."""
    return url.replace("postgresql+psycopg2://", "postgresql+psycopg://")


def tally(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from tally.cli.main import cli; cli()", *args],
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=300,
    )


def fingerprint(url: str) -> str:
    """A SQLite file's bytes and journal mode (a server database: its row counts)."""
    url = ours(url)
    path = sa.engine.make_url(url).database
    if url.startswith("sqlite"):
        mode = sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("PRAGMA journal_mode")
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() + mode.fetchone()[0]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        names = sorted(sa.inspect(conn).get_table_names())
        counts = [conn.execute(sa.text(f"SELECT COUNT(*) FROM {n}")).scalar() for n in names]
    engine.dispose()
    return repr(list(zip(names, counts, strict=True)))


def schema_of(url: str) -> dict:
    """Tables, columns, keys and indexes as SQLAlchemy reflects them."""
    engine = sa.create_engine(ours(url))
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        found = {}
        for table in sorted(inspector.get_table_names()):
            found[table] = {
                "columns": [
                    (c["name"], type(c["type"]).__name__, c["nullable"])
                    for c in inspector.get_columns(table)
                ],
                "pk": sorted(inspector.get_pk_constraint(table)["constrained_columns"]),
                "fks": sorted(
                    (tuple(fk["constrained_columns"]), fk["referred_table"])
                    for fk in inspector.get_foreign_keys(table)
                ),
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                    for i in inspector.get_indexes(table)
                ),
                "uniques": sorted(
                    (u["name"], tuple(u["column_names"]))
                    for u in inspector.get_unique_constraints(table)
                ),
            }
    engine.dispose()
    return found


@pytest.mark.parametrize(
    ("backend", "revision"),
    [
        ("sqlite", "head"),
        ("sqlite", "422ece571366"),  # the consumer types revision: imported, not exported
        pytest.param("postgresql", "head", marks=pytest.mark.postgres),
        pytest.param("mysql", "head", marks=pytest.mark.mysql),
    ],
)
def test_upstream_to_tally_and_back(backend, revision, tmp_path):
    venv = install()
    dbs = Databases(backend, tmp_path)
    try:
        _round_trip(venv, dbs, revision, tmp_path)
    finally:
        dbs.close()


def _round_trip(venv: Path, dbs: Databases, revision: str, tmp: Path) -> None:
    """Upstream -> Tally, the same answers, Nova's writes; then (from upstream's head)
    Tally -> upstream, the same answers again."""
    # upstream makes its database and its books
    source = Upstream(venv, tmp / "upstream", dbs.new("placement"))
    source.sync(revision)
    with source.serve() as url:
        books.populate(books.Api(url))
        before = books.answers(url)
    untouched = fingerprint(source.url)

    # pointed at it, Tally refuses (changing nothing) and names the way in
    for command in (["db", "upgrade"], ["serve", "--port", str(free_port())]):
        refused = tally(*command, "--placement-conf", str(source.conf))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "is an upstream Placement database" in refused.stderr
        assert "tally db import --from" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert fingerprint(source.url) == untouched

    # import, a dry run first
    target = {"TALLY_DATABASE_URL": ours(dbs.new("tally"))}
    dry = tally("db", "import", "--from", source.url, "--dry-run", env=target)
    assert dry.returncode == 0, dry.stderr
    assert "nothing was written" in dry.stdout and books.uid("cn3") in dry.stdout
    done = tally("db", "import", "--from", str(source.conf), "-f", "json", env=target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fingerprint(source.url) == untouched
    _imported_as_reported(json.loads(done.stdout), revision)
    again = tally("db", "import", "--from", source.url, env=target)
    assert again.returncode == 1 and "is not empty" in again.stderr, again.stderr

    (tmp / "tally").mkdir()
    with tally_serve(tmp / "tally", database_url=target["TALLY_DATABASE_URL"], lab="off") as url:
        got = books.answers(url)
        assert books.differences(before, got) == []
        _only_known_upstream_failures(before, dbs.backend)
        _write_with_nova_generations(books.Api(url), before)
        after_writes = books.answers(url)
    assert after_writes != got
    if revision != "head":
        return

    # and back: a new database in upstream's schema, served by upstream
    back = Upstream(venv, tmp / "back", dbs.new("back"))
    done = tally("db", "export", "--to", back.url, env=target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert schema_of(back.url) == schema_of(source.url)  # as upstream's db sync made it
    with back.serve() as url:
        again = books.answers(url)
        assert books.differences(again, after_writes) == []
        _only_known_upstream_failures(again, dbs.backend)
        api = books.Api(url)  # and upstream takes a write at the generation Tally left
        api.inventories("cn1-numa1", VCPU={"total": 12}, MEMORY_MB={"total": 16384})


def _imported_as_reported(report: dict, revision: str) -> None:
    """The summary: rows per table, every check passed, cn3 over capacity."""
    assert report["revision"] == (upstream_head() if revision == "head" else revision)
    counts = {c["table"]: (c["source"], c["target"]) for c in report["report"]["counts"]}
    assert counts["resource_providers"] == (7, 7)
    assert counts["consumers"] == (6, 6)
    assert counts["allocations"] == (13, 13)
    assert counts["resource_provider_traits"] == (8, 8)
    assert report["report"]["ok"] is True
    assert all(not check["differences"] for check in report["report"]["checks"])
    (over,) = report["report"]["over_capacity"]
    assert (over["provider"], over["resource_class"], over["used"], over["capacity"]) == (
        books.uid("cn3"),
        "VCPU",
        4,
        2.0,
    )


def upstream_head() -> str:
    from tally.db import upstream_schema as upstream

    return upstream.HEAD


def _only_known_upstream_failures(upstream: dict, backend: str) -> None:
    failed = books.upstream_failures(upstream)
    if backend == "postgresql":  # its /usages query at 1.38+ is refused by PostgreSQL
        failed = [key for key in failed if not key.startswith("1.39 /usages?")]
    assert failed == []


def _write_with_nova_generations(api: books.Api, before: dict) -> None:
    """Writes carrying the generations read from upstream before the move."""
    cn2 = books.uid("cn2")
    _, provider = before[f"{books.LATEST} /resource_providers/{cn2}"]
    generation = int(provider["generation"])
    stale = api.call(
        "PUT",
        f"/resource_providers/{cn2}/inventories",
        {"resource_provider_generation": generation - 1, "inventories": {"VCPU": {"total": 9}}},
    )
    assert stale.status_code == 409
    assert stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    inventories = {
        "VCPU": {"total": 10},
        "MEMORY_MB": {"total": 8192},
        "DISK_GB": {"total": 100},
        "CUSTOM_GPU": {"total": 2},
    }
    written = api.write(
        "PUT",
        f"/resource_providers/{cn2}/inventories",
        {"resource_provider_generation": generation, "inventories": inventories},
    )
    assert written["resource_provider_generation"] == generation + 1
    inst4 = books.uid("inst4")
    _, held = before[f"{books.LATEST} /allocations/{inst4}"]
    seen = int(held["consumer_generation"])
    assert seen == 3  # created, then rewritten twice
    api.write(
        "PUT",
        f"/allocations/{inst4}",
        {
            "allocations": {cn2: {"resources": {"CUSTOM_GPU": 2, "VCPU": 1}}},
            "project_id": "p2",
            "user_id": "u3",
            "consumer_generation": seen,
            "consumer_type": "INSTANCE",
        },
    )
    assert api.write("GET", f"/allocations/{inst4}")["consumer_generation"] == seen + 1
