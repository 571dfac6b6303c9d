"""Usages: what providers have handed out, and what projects and users hold.

The consumer-type grouping (1.38) groups by the type id and names the groups
in Python, so the same SQL runs on SQLite, PostgreSQL and MySQL (grouping by
one column while selecting another is an error on PostgreSQL).
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.amounts import capacity
from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger import consumers as cons
from tally.placement.ledger.common import provider_row
from tally.placement.ledger.usage_queries import used_by_provider

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


@dataclasses.dataclass(frozen=True)
class Amounts:
    """One inventory of one provider with what is used of it."""

    provider: str  # uuid
    resource_class: str
    total: int
    reserved: int
    allocation_ratio: float
    used: int

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)


def amounts(engine: sa.Engine, max_providers: int | None = None) -> list[Amounts]:
    """Every inventory with its usage, of every provider (or of the first
    `max_providers` by id), in two reads: what a page of many providers shows, and
    /metrics's per-provider gauges."""
    rp, inv, rc, alloc = t.resource_providers, t.inventories, t.resource_classes, t.allocations
    with transaction(engine) as conn:
        wanted = sa.true()
        if max_providers is not None:
            ids = conn.execute(sa.select(rp.c.id).order_by(rp.c.id).limit(max_providers))
            wanted = inv.c.resource_provider_id.in_(ids.scalars().all())
        rows = conn.execute(
            sa.select(
                rp.c.uuid,
                rc.c.name,
                inv.c.resource_provider_id,
                inv.c.resource_class_id,
                inv.c.total,
                inv.c.reserved,
                inv.c.allocation_ratio,
            )
            .join(rp, rp.c.id == inv.c.resource_provider_id)
            .join(rc, rc.c.id == inv.c.resource_class_id)
            .where(wanted)
            .order_by(rp.c.id, rc.c.name)
        ).all()
        providers = sorted({r.resource_provider_id for r in rows})
        if max_providers is not None:
            used = used_by_provider(conn, providers)
        else:
            sums = conn.execute(
                sa.select(
                    alloc.c.resource_provider_id,
                    alloc.c.resource_class_id,
                    sa.func.sum(alloc.c.used),
                ).group_by(alloc.c.resource_provider_id, alloc.c.resource_class_id)
            )
            used = {(p, c): int(n) for p, c, n in sums}
    return [
        Amounts(
            r.uuid,
            r.name,
            r.total,
            r.reserved,
            r.allocation_ratio,
            used.get((r.resource_provider_id, r.resource_class_id), 0),
        )
        for r in rows
    ]


def sample(engine: sa.Engine, max_providers: int) -> list[tuple[str, str, int, int, int]]:
    """(provider uuid, class, capacity, reserved, used) of at most `max_providers`
    providers (the first by id), for /metrics."""
    return [
        (a.provider, a.resource_class, a.capacity, a.reserved, a.used)
        for a in amounts(engine, max_providers)
    ]
