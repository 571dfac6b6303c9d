"""`tally db upgrade` from every host at once (a systemd unit's ExecStartPre on each
API host): three processes upgrade the same empty database together, on each
backend; every one exits 0, and the schema is at head once (one `alembic_version`
row, the standard classes written once). Without the lock they raced: "relation
already exists" on PostgreSQL, "table exists" on MySQL, "database is locked" on
SQLite.

The processes start the upgrade together (each waits for the test's go), and do it
on several new databases in turn on SQLite, where one race loses only some of the
time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import os_resource_classes
import pytest
import sqlalchemy as sa

from tally.db import migrate

pytestmark = pytest.mark.slow

UPGRADER = """
import json, os, sys, time
from tally.cli.main import cli

for n, url in enumerate(json.loads(sys.argv[1])):
    while not os.path.exists(f"{sys.argv[2]}.{n}"):
        time.sleep(0.005)
    os.environ["TALLY_DATABASE_URL"] = url
    try:
        cli(["db", "upgrade"])
    except SystemExit as exc:
        print("upgraded", json.dumps([n, exc.code or 0]), flush=True)
"""
PROCESSES = 3


def upgraded(proc: subprocess.Popen) -> list[int] | None:
    """[database number, exit status] of the upgrader's next upgrade (None: it ended)."""
    for line in proc.stdout:
        if line.startswith("upgraded "):
            return json.loads(line.split(" ", 1)[1])
    return None


def test_three_upgrades_at_once_all_succeed_and_migrate_once(backend, new_database, tmp_path):
    urls = [new_database(f"race{n}") for n in range(4 if backend == "sqlite" else 1)]
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", UPGRADER, json.dumps(urls), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    seen = []
    try:
        for n in range(len(urls)):
            Path(f"{go}.{n}").touch()  # all three begin this database's upgrade now
            seen.append([upgraded(proc) for proc in procs])
            if seen[-1] != [[n, 0]] * PROCESSES:
                break
    finally:
        for proc in procs:
            proc.kill()
    errors = [proc.communicate()[1][-2000:] for proc in procs]
    assert seen == [[[n, 0]] * PROCESSES for n in range(len(urls))], errors
    for url in urls:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                versions = conn.execute(sa.text("SELECT version_num FROM alembic_version"))
                assert versions.scalars().all() == [migrate.head_revision()]
                classes = conn.execute(sa.text("SELECT COUNT(*) FROM resource_classes"))
                assert classes.scalar() == len(os_resource_classes.STANDARDS)
        finally:
            engine.dispose()
