"""Usage arithmetic shared by the capacity guard, allocation checks and filters."""

from __future__ import annotations

import sqlalchemy as sa

from tally.db import schema as t


def used_by_provider(conn: sa.Connection, provider_ids: list[int]) -> dict[tuple[int, int], int]:
    """Sum of allocations per (provider id, resource class id)."""
    if not provider_ids:
        return {}
    a = t.allocations
    rows = conn.execute(
        sa.select(a.c.resource_provider_id, a.c.resource_class_id, sa.func.sum(a.c.used))
        .where(a.c.resource_provider_id.in_(provider_ids))
        .group_by(a.c.resource_provider_id, a.c.resource_class_id)
    ).all()
    return {(rp, rc): int(used) for rp, rc, used in rows}
