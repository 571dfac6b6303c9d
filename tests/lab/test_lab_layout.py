"""The lab's module sizes and its schema: the migrations (0002, then 0008) create exactly
the tables of db/compute_schema.py. (Its import rules are in tests/unit/test_architecture.py.)"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tally.db import compute_schema, migrate
from tally.db.schema import metadata

SRC = Path(__file__).resolve().parents[2] / "src" / "tally"


def test_modules_stay_small():
    sizes = {
        p.relative_to(SRC): len(p.read_text().splitlines())
        for folder in ("compute", "identity")
        for p in (SRC / folder).rglob("*.py")
    }
    assert {p: n for p, n in sizes.items() if n > 400} == {}


def test_migration_0002_matches_the_lab_tables(sqlite_engine):
    assert migrate.head_revision() >= "0002"  # later migrations add other tables
    with sqlite_engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    lab_tables = {
        table.name
        for table in vars(compute_schema).values()
        if isinstance(table, sa.Table) and table.metadata is metadata
    }
    assert lab_tables == {
        "compute_hosts",
        "compute_flavors",
        "compute_servers",
        "compute_migrations",
        "compute_instance_actions",  # (from migration 0008)
        "lab_secrets",
    }
    assert lab_tables <= tables
    assert diff == []
