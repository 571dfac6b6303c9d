"""Schema migrations by Alembic, run programmatically (`tally db upgrade`, `tally serve`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.pool import NullPool

from tally.db import upgrade_lock
from tally.db.transaction import WRITE

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Migrate to `revision` in one transaction (where the database's DDL is
    transactional), under the schema upgrade lock (`upgrade_lock`): from any number
    of hosts at once, one migrates and the others find it done."""
    with upgrade_lock.held(engine), _patient(engine) as patient, patient.connect() as conn:
        if conn.dialect.name == "sqlite":  # BEGIN IMMEDIATE: the file's write lock at once
            conn.execution_options(**{WRITE: True})
        with conn.begin():
            command.upgrade(alembic_config(conn), revision)


@contextlib.contextmanager
def _patient(engine: sa.Engine) -> Iterator[sa.Engine]:
    """`engine`, or on MySQL one like it without the request path's short read
    timeout: a schema change may take long (a Galera cluster applies DDL on every
    node in turn), and one cut off half-way would leave its tables half made."""
    if engine.dialect.name not in ("mysql", "mariadb"):
        yield engine
        return
    timeouts = {"connect_timeout": 10, "read_timeout": 3600, "write_timeout": 3600}
    patient = sa.create_engine(engine.url, poolclass=NullPool, connect_args=timeouts)
    try:
        yield patient
    finally:
        patient.dispose()


def current_revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
