"""Flavors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from tally.db.compute_schema import compute_flavors as t
from tally.db.transaction import transaction


def _row(row: sa.Row) -> dict[str, Any]:
    found = dict(row._mapping)
    found["extra_specs"] = json.loads(found["extra_specs"] or "{}")
    return found


def create(engine: sa.Engine, flavor: Mapping[str, Any]) -> dict[str, Any] | None:
    """The new flavor, or None when its id or name is taken."""
    values = dict(flavor, extra_specs=json.dumps(flavor.get("extra_specs") or {}))
    taken = sa.select(t.c.id).where(
        sa.or_(t.c.flavorid == values["flavorid"], t.c.name == values["name"])
    )
    with transaction(engine, write=True) as conn:
        if conn.execute(taken).first():
            return None
        conn.execute(t.insert().values(**values))
        return _row(conn.execute(sa.select(t).where(t.c.flavorid == values["flavorid"])).one())


def listing(engine: sa.Engine) -> list[dict[str, Any]]:
    with transaction(engine) as conn:
        return [_row(r) for r in conn.execute(sa.select(t).order_by(t.c.id))]


def get(engine: sa.Engine, ref: str) -> dict[str, Any] | None:
    """By flavor id, else by name."""
    with transaction(engine) as conn:
        row = conn.execute(sa.select(t).where(t.c.flavorid == ref)).first()
        if row is None:
            row = conn.execute(sa.select(t).where(t.c.name == ref)).first()
    return _row(row) if row else None


def delete(engine: sa.Engine, ref: str) -> bool:
    with transaction(engine, write=True) as conn:
        return conn.execute(t.delete().where(t.c.flavorid == ref)).rowcount > 0
