"""What every table module of the database shares: the one `MetaData` its tables
are declared on (Alembic compares it with the database, migrations/env.py) and the
timestamp columns. Neither Placement's tables (`schema`) nor the lab's
(`compute_schema`) live here, so either can be loaded without the other.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()


def timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]
