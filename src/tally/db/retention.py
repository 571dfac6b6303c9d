"""Keeping an append-only table within its retention: the claim history and the
failed searches (both ordered by a growing `id`, timed by `created_at`)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from tally.db.retry import retrying
from tally.db.transaction import transaction

BATCH = 500  # rows a pruning transaction deletes at most


@retrying
def prune_oldest(
    engine: sa.Engine,
    table: sa.Table,
    keep_days: int,
    keep_rows: int,
    batch: int = BATCH,
    now: dt.datetime | None = None,
) -> int:
    """Delete at most `batch` rows of `table` past retention (older than
    `keep_days`, or beyond the newest `keep_rows`; 0: no limit of that kind), oldest
    first, in one short write transaction of its own; the number deleted."""
    past: list[sa.ColumnElement[bool]] = []
    if keep_days > 0:
        now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
        past.append(table.c.created_at < now - dt.timedelta(days=keep_days))
    with transaction(engine) as conn:
        if keep_rows > 0:
            newest = conn.execute(sa.select(sa.func.max(table.c.id))).scalar()
            if newest is not None and newest > keep_rows:
                past.append(table.c.id <= newest - keep_rows)  # ids grow with every row
        if not past:
            return 0
        ids = list(
            conn.execute(
                sa.select(table.c.id).where(sa.or_(*past)).order_by(table.c.id).limit(batch)
            ).scalars()
        )
    if not ids:
        return 0
    with transaction(engine, write=True) as conn:
        return conn.execute(table.delete().where(table.c.id.in_(ids))).rowcount
