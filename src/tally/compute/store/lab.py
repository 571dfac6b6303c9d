"""The lab as a whole: emptied in one transaction (`tally lab reset`)."""

from __future__ import annotations

import sqlalchemy as sa

from tally.db.compute_schema import (
    compute_flavors,
    compute_hosts,
    compute_migrations,
    compute_servers,
)
from tally.db.transaction import transaction

# children first: what refers to a server or a host goes before it
TABLES = (
    ("migrations", compute_migrations),
    ("servers", compute_servers),
    ("hosts", compute_hosts),
    ("flavors", compute_flavors),
)


def clear(engine: sa.Engine) -> dict[str, int]:
    """Delete every migration, server (deleted ones too), host and flavor; how many
    rows of each went. The identity's signing key stays, so tokens stay valid."""
    with transaction(engine, write=True) as conn:
        return {name: conn.execute(table.delete()).rowcount for name, table in TABLES}
