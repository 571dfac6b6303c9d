"""Create and drop throw-away databases on a PostgreSQL or MySQL server, for test
servers and fixtures (`TALLY_TEST_DATABASE` names the server, without a database)."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa


def create_database(server_url: str, name: str) -> tuple[str, Callable[[], None]]:
    """Create database `name` on the server; return its URL and a function dropping it."""
    base = sa.engine.make_url(server_url)
    backend = base.get_backend_name()
    if backend == "postgresql":
        admin_url, create = base.set(database="postgres"), f'CREATE DATABASE "{name}"'
        drop_sql = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    elif backend in ("mysql", "mariadb"):
        admin_url = base.set(database=None)
        create = f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        drop_sql = f"DROP DATABASE IF EXISTS `{name}`"
    else:
        raise ValueError(f"cannot make test databases on {backend}")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(create)

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(drop_sql)
        admin.dispose()

    url = base.set(database=name)
    if backend in ("mysql", "mariadb"):
        url = url.update_query_dict({"charset": "utf8mb4"})
    return url.render_as_string(hide_password=False), drop
