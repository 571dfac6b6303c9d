"""Create and drop throw-away PostgreSQL databases for test servers."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa


def create_database(server_url: str, name: str) -> tuple[str, Callable[[], None]]:
    """Create database `name` on the server; return its URL and a function dropping it."""
    base = sa.engine.make_url(server_url)
    admin = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    return base.set(database=name).render_as_string(hide_password=False), drop
