"""Instance actions (os-instance-actions): one row per server operation, found by the
request id of the compute API call that began it; its events a JSON list."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from tally.db.compute_schema import compute_instance_actions as t
from tally.db.transaction import transaction


def _row(row: sa.Row) -> dict[str, Any]:
    found = dict(row._mapping)
    found["events"] = json.loads(found["events"])
    return found


def create(engine: sa.Engine, actions: Iterable[Mapping[str, Any]]) -> None:
    """Record finished actions (the lab does each operation within its call)."""
    rows = [{**a, "events": json.dumps(a["events"])} for a in actions]
    if not rows:
        return
    with transaction(engine, write=True) as conn:
        for start in range(0, len(rows), 500):
            conn.execute(t.insert(), rows[start : start + 500])


def listing(
    engine: sa.Engine,
    server_uuid: str,
    *,
    changed_since: dt.datetime | None = None,
    changed_before: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """The server's actions, newest first (as Nova orders them)."""
    query = sa.select(t).where(t.c.server_uuid == server_uuid).order_by(t.c.id.desc())
    if changed_since is not None:
        query = query.where(t.c.updated_at >= changed_since)
    if changed_before is not None:
        query = query.where(t.c.updated_at <= changed_before)
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(query)]


def get(engine: sa.Engine, server_uuid: str, request_id: str) -> dict[str, Any] | None:
    query = (
        sa.select(t)
        .where(t.c.server_uuid == server_uuid, t.c.request_id == request_id)
        .order_by(t.c.id.desc())
    )
    with transaction(engine) as conn:
        row = conn.execute(query).first()
    return _row(row) if row else None
