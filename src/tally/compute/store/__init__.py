"""SQL on the lab's own tables (db/compute_schema.py): plain dicts in and out.
Every write is one short transaction (`db.transaction.transaction`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def matching(query: sa.Select, table: sa.Table, **values: Any) -> sa.Select:
    """`query` narrowed to rows whose column equals each value given; None: any."""
    for column, value in values.items():
        if value is not None:
            query = query.where(table.c[column] == value)
    return query
