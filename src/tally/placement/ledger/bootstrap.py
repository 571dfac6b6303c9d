"""Make the database hold the standard resource classes and traits of the
installed os-resource-classes and os-traits (idempotent; run at start)."""

from __future__ import annotations

import os_resource_classes
import os_traits
import sqlalchemy as sa

from tally.db import migrate, probe, sqlite, upgrade_lock
from tally.db import schema as t
from tally.db.retry import retrying
from tally.db.transaction import transaction


@retrying
def sync_standards(engine: sa.Engine) -> None:
    with transaction(engine, write=True) as conn:
        have = {row.name for row in conn.execute(sa.select(t.resource_classes.c.name))}
        missing = [
            {"id": idx, "name": name, "created_at": None}
            for idx, name in enumerate(os_resource_classes.STANDARDS)
            if name not in have
        ]
        if missing:
            conn.execute(t.resource_classes.insert(), missing)
        have = {row.name for row in conn.execute(sa.select(t.traits.c.name))}
        new_traits = [{"name": name} for name in os_traits.get_traits() if name not in have]
        if new_traits:
            conn.execute(t.traits.insert(), new_traits)


def prepare_database(engine: sa.Engine) -> None:
    """Migrate the schema to head and sync the standard classes and traits. First,
    without changing anything: an upstream Placement database (or a revision Tally
    does not know) is refused, and so are a database that cannot be reached and a
    SQLite file this process could not write, each in one line
    (probe.UnusableDatabase)."""
    sqlite.refuse_unwritable(engine.url)
    probe.refuse_foreign(engine.url, strict=True)
    probe.reach(engine)
    with upgrade_lock.held(engine):  # every host may run this at once (tally db upgrade)
        migrate.upgrade(engine)
        sync_standards(engine)
