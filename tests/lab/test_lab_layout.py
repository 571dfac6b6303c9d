"""The lab's layering and its schema: compute speaks to Placement only over its API
(never its tables or its code), handlers hold no SQL, and migration 0002 creates
exactly the tables of db/compute_schema.py."""

from __future__ import annotations

import ast
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tally.db import compute_schema, migrate
from tally.db.schema import metadata

SRC = Path(__file__).resolve().parents[2] / "src" / "tally"
FORBIDDEN = {
    "compute": ("tally.placement", "tally.db.schema"),
    "compute/handlers": ("sqlalchemy", "tally.db"),
    "compute/ops": ("sqlalchemy", "tally.db", "falcon"),
    "compute/store": ("falcon", "httpx"),
    "identity": ("tally.placement", "tally.compute"),
}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_lab_keeps_its_layers():
    offences = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((SRC / package).rglob("*.py")):
            offences += [
                f"{path.relative_to(SRC)} imports {name}"
                for name in imports_of(path)
                if name.startswith(banned)
            ]
    assert offences == []


def test_modules_stay_small():
    sizes = {
        p.relative_to(SRC): len(p.read_text().splitlines())
        for folder in ("compute", "identity")
        for p in (SRC / folder).rglob("*.py")
    }
    assert {p: n for p, n in sizes.items() if n > 400} == {}


def test_migration_0002_matches_the_lab_tables(sqlite_engine):
    assert migrate.head_revision() == "0002"
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
        "lab_secrets",
    }
    assert lab_tables <= tables
    assert diff == []
