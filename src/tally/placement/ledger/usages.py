"""Usages: what providers have handed out, and what projects and users hold.

The consumer-type grouping (1.38) groups by the type id and names the groups
in Python, so the same SQL runs on SQLite, PostgreSQL and MySQL (grouping by
one column while selecting another is an error on PostgreSQL).
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import transaction
from tally.placement.ledger import consumers as cons
from tally.placement.ledger.common import provider_row
from tally.placement.ledger.usage_queries import capacity, used_by_provider

ALL_TYPES = "all"


@dataclasses.dataclass
class ProviderUsage:
    generation: int
    usages: dict[str, int]  # every class the provider has inventory of


def for_provider(engine: sa.Engine, provider_uuid: str) -> ProviderUsage:
    inv, a, rc = t.inventories, t.allocations, t.resource_classes
    with transaction(engine) as conn:
        provider = provider_row(conn, provider_uuid)
        used = (
            sa.select(sa.func.coalesce(sa.func.sum(a.c.used), 0))
            .where(a.c.resource_provider_id == inv.c.resource_provider_id)
            .where(a.c.resource_class_id == inv.c.resource_class_id)
            .scalar_subquery()
        )
        rows = conn.execute(
            sa.select(rc.c.name, used)
            .select_from(inv.join(rc, rc.c.id == inv.c.resource_class_id))
            .where(inv.c.resource_provider_id == provider.id)
        ).all()
    return ProviderUsage(provider.generation, {name: int(n) for name, n in rows})


def _owned_by(query: sa.Select, project_id: str, user_id: str | None) -> sa.Select:
    c = t.consumers
    query = query.where(c.c.project_id == project_id)
    if user_id:
        query = query.where(c.c.user_id == user_id)
    return query


def totals(engine: sa.Engine, project_id: str, user_id: str | None = None) -> dict[str, int]:
    """GET /usages before 1.38: {resource class: total used} of a project (and user)."""
    a, c, rc = t.allocations, t.consumers, t.resource_classes
    query = _owned_by(
        sa.select(rc.c.name, sa.func.sum(a.c.used))
        .select_from(
            a.join(c, c.c.uuid == a.c.consumer_id).join(rc, rc.c.id == a.c.resource_class_id)
        )
        .group_by(rc.c.name),
        project_id,
        user_id,
    )
    with transaction(engine) as conn:
        return {name: int(n) for name, n in conn.execute(query)}


def totals_by_type(
    engine: sa.Engine,
    project_id: str,
    user_id: str | None = None,
    consumer_type: str | None = None,
) -> dict[str, dict[str, int]]:
    """GET /usages from 1.38: {type: {resource class: used, "consumer_count": n}}.

    `consumer_type` None groups by type; "all" puts everything in one "all" group;
    "unknown" keeps consumers without a type; any other name keeps that type.
    """
    a, c, rc = t.allocations, t.consumers, t.resource_classes
    # One group ("all"), or one per type id (NULL: no type).
    group = [] if consumer_type == ALL_TYPES else [c.c.consumer_type_id]
    base = a.join(c, c.c.uuid == a.c.consumer_id)
    with transaction(engine) as conn:
        names = cons.consumer_type_names(conn)
        where = []
        if consumer_type == cons.UNKNOWN_TYPE:
            where.append(c.c.consumer_type_id.is_(None))
        elif consumer_type not in (None, ALL_TYPES):
            type_id = next((i for i, n in names.items() if n == consumer_type and i), None)
            if type_id is None:
                return {}
            where.append(c.c.consumer_type_id == type_id)
        sums = _owned_by(
            sa.select(*group, rc.c.name, sa.func.sum(a.c.used))
            .select_from(base.join(rc, rc.c.id == a.c.resource_class_id))
            .where(*where)
            .group_by(*group, rc.c.name),
            project_id,
            user_id,
        )
        counts = _owned_by(
            sa.select(*group, sa.func.count(sa.distinct(a.c.consumer_id)))
            .select_from(base)
            .where(*where)
            .group_by(*group),
            project_id,
            user_id,
        )
        sum_rows = conn.execute(sums).all()
        count_rows = conn.execute(counts).all()

    def label(row: sa.Row) -> str:
        return ALL_TYPES if not group else names.get(row[0], cons.UNKNOWN_TYPE)

    result: dict[str, dict[str, int]] = {}
    for row in sum_rows:
        result.setdefault(label(row), {})[row[-2]] = int(row[-1])
    for row in count_rows:
        if label(row) in result:
            result[label(row)]["consumer_count"] = int(row[-1])
    return result


def sample(engine: sa.Engine, max_providers: int) -> list[tuple[str, str, int, int, int]]:
    """(provider uuid, class, capacity, reserved, used) of at most `max_providers`
    providers (the first by id), for /metrics."""
    with transaction(engine) as conn:
        ids = (
            conn.execute(
                sa.select(t.resource_providers.c.id)
                .order_by(t.resource_providers.c.id)
                .limit(max_providers)
            )
            .scalars()
            .all()
        )
        if not ids:
            return []
        rows = conn.execute(
            sa.select(
                t.resource_providers.c.uuid,
                t.resource_classes.c.name,
                t.inventories.c.resource_provider_id,
                t.inventories.c.resource_class_id,
                t.inventories.c.total,
                t.inventories.c.reserved,
                t.inventories.c.allocation_ratio,
            )
            .join(
                t.resource_providers,
                t.resource_providers.c.id == t.inventories.c.resource_provider_id,
            )
            .join(t.resource_classes, t.resource_classes.c.id == t.inventories.c.resource_class_id)
            .where(t.inventories.c.resource_provider_id.in_(ids))
        ).all()
        used = used_by_provider(conn, list(ids))
    return [
        (
            r.uuid,
            r.name,
            capacity(r.total, r.reserved, r.allocation_ratio),
            r.reserved,
            used.get((r.resource_provider_id, r.resource_class_id), 0),
        )
        for r in rows
    ]
