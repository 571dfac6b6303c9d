"""The filters of `GET /resource_providers`: a `ProviderFilter` as WHERE
clauses on the provider table (`providers.list_providers` and
`providers.list_provider_rows` run them).
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.amounts import raw_capacity
from tally.db import schema as t
from tally.db.bound_lists import among
from tally.db.row_rules import sound_inventory
from tally.placement.error_types import BadRequest
from tally.placement.ledger.common import ids_by_name

_rp = t.resource_providers
_rpt = t.resource_provider_traits
_rpa = t.resource_provider_aggregates
_TREE = _rp.alias("tree")  # built once: an alias costs more to set up than a small query


@dataclasses.dataclass(frozen=True)
class ProviderFilter:
    """What `GET /resource_providers` may ask for; every filter ANDs with the
    others. Trait and aggregate filters are lists of any-of sets (AND of ORs)."""

    name: str | None = None
    uuid: str | None = None
    in_tree: str | None = None
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required_traits: list[frozenset[str]] = dataclasses.field(default_factory=list)
    forbidden_traits: frozenset[str] = frozenset()
    member_of: list[frozenset[str]] = dataclasses.field(default_factory=list)
    forbidden_aggregates: frozenset[str] = frozenset()


def filter_conditions(
    conn: sa.Connection, rp: sa.ColumnCollection, f: ProviderFilter
) -> list[sa.ColumnElement] | None:
    """WHERE clauses on provider columns `rp` for the filter `f`, or None when
    no provider can match (an aggregate set naming only unknown aggregates, or
    no provider with the capacity asked for).

    Unknown traits and resource classes are a 400 (checked before anything is
    matched, so bad input never passes for "no match").

    Each clause is an IN or NOT EXISTS on one indexed table, or (resources, on
    PostgreSQL) an array of ids worked out before, so whatever the planner's
    row estimates (none at all right after a bulk load), the worst it can
    pick is an index probe per provider: no grouped subquery rescanned inside
    a nested loop, no hashed NOT IN falling back to a rescan per provider
    once it outgrows work_mem.
    """
    conditions: list[sa.ColumnElement] = []
    trait_ids = _trait_ids(conn, set().union(*f.required_traits, f.forbidden_traits))
    class_ids = _class_ids(conn, set(f.resources))
    if f.name is not None:
        conditions.append(rp.name == f.name)
    if f.uuid is not None:
        conditions.append(rp.uuid == f.uuid)
    if f.in_tree is not None:
        conditions.append(
            rp.root_provider_id.in_(
                sa.select(_TREE.c.root_provider_id).where(_TREE.c.uuid == f.in_tree)
            )
        )
    for any_of in f.required_traits:
        conditions.append(rp.id.in_(_having_traits({trait_ids[n] for n in any_of})))
    if f.forbidden_traits:
        ids = {trait_ids[n] for n in f.forbidden_traits}
        holders = _having_traits(ids).where(_rpt.c.resource_provider_id == rp.id)
        conditions.append(~holders.exists())
    agg_ids = _aggregate_ids(conn, set().union(*f.member_of, f.forbidden_aggregates))
    for any_of in f.member_of:
        known = {agg_ids[u] for u in any_of if u in agg_ids}
        if not known:
            return None
        conditions.append(rp.id.in_(_in_aggregates(known)))
    forbidden_aggs = {agg_ids[u] for u in f.forbidden_aggregates if u in agg_ids}
    if forbidden_aggs:
        outside = _in_aggregates(forbidden_aggs).where(_rpa.c.resource_provider_id == rp.id)
        conditions.append(~outside.exists())
    if f.resources:
        wanted = {class_ids[name]: amount for name, amount in f.resources.items()}
        fitting = _with_capacity(conn, rp.id, wanted)
        if fitting is None:
            return None
        conditions.append(fitting)
    return conditions


UNKNOWN_TRAITS = 'Invalid trait(s) in "required" parameter: No such trait(s): {}.'
UNKNOWN_CLASSES = "Invalid resource class in resources parameter: No such resource class {}."


def known_ids(ids: dict[str, int], names: set[str], refusal: str) -> dict[str, int]:
    """Ids of `names` (from `ids`, name -> id); 400 `refusal` naming the unknown ones."""
    missing = sorted(names - ids.keys())
    if missing:
        raise BadRequest(refusal.format(", ".join(missing)))
    return {name: ids[name] for name in names}


def _trait_ids(conn: sa.Connection, names: set[str]) -> dict[str, int]:
    return known_ids(ids_by_name(conn, t.traits, names), names, UNKNOWN_TRAITS)


def _class_ids(conn: sa.Connection, names: set[str]) -> dict[str, int]:
    return known_ids(ids_by_name(conn, t.resource_classes, names), names, UNKNOWN_CLASSES)


def _aggregate_ids(conn: sa.Connection, uuids: set[str]) -> dict[str, int]:
    if not uuids:
        return {}
    agg = t.placement_aggregates
    rows = conn.execute(sa.select(agg.c.uuid, agg.c.id).where(agg.c.uuid.in_(uuids)))
    return {row.uuid: row.id for row in rows}


def _having_traits(trait_ids: set[int]) -> sa.Select:
    return sa.select(_rpt.c.resource_provider_id).where(_rpt.c.trait_id.in_(trait_ids))


def _in_aggregates(aggregate_ids: set[int]) -> sa.Select:
    return sa.select(_rpa.c.resource_provider_id).where(_rpa.c.aggregate_id.in_(aggregate_ids))


def providers_with_capacity(wanted: dict[int, int]) -> sa.Select:
    """Ids of the providers that could take every `{class id: amount}` now:
    inventory of each class whose unused capacity covers the amount, within
    min_unit/max_unit, the amount a multiple of step_size.

    One pass over the inventory rows and the allocation rows of those classes,
    grouped by provider: no join, so no join order or method for row
    estimates to spoil."""
    inv, alloc = t.inventories, t.allocations
    fits_units = [
        sa.and_(
            inv.c.resource_class_id == class_id,
            inv.c.min_unit <= amount,
            inv.c.max_unit >= amount,
            sa.literal(amount, sa.Integer) % sa.func.nullif(inv.c.step_size, 0) == 0,
            sound_inventory(inv),  # a row stored against the rules is left out, not a 500
        )
        for class_id, amount in wanted.items()
    ]
    rows = sa.union_all(
        sa.select(
            inv.c.resource_provider_id.label("rp"),
            inv.c.resource_class_id.label("rc"),
            raw_capacity(inv.c.total, inv.c.reserved, inv.c.allocation_ratio).label("capacity"),
            sa.literal(0, sa.Integer).label("used"),
        ).where(sa.or_(*fits_units)),
        sa.select(
            alloc.c.resource_provider_id,
            alloc.c.resource_class_id,
            sa.null().cast(sa.Float),
            alloc.c.used,
        ).where(alloc.c.resource_class_id.in_(wanted)),
    ).subquery("usage")
    fits_capacity = []
    for class_id, amount in wanted.items():
        of_class = rows.c.rc == class_id
        used = sa.func.sum(sa.case((of_class, rows.c.used)))  # 0 from the inventory row
        capacity = sa.func.max(sa.case((of_class, rows.c.capacity)))  # NULL: no inventory fits
        fits_capacity.append(used + amount <= capacity)
    return sa.select(rows.c.rp).group_by(rows.c.rp).having(*fits_capacity)


def _with_capacity(
    conn: sa.Connection, rp_id: sa.ColumnElement, wanted: dict[int, int]
) -> sa.ColumnElement[bool] | None:
    """`rp_id` is one of `providers_with_capacity(wanted)` (None: there are none).

    On PostgreSQL the ids are read first and passed back as one array, so the
    planner knows how many providers pass instead of guessing. Its guess is
    far too low (`amount % step_size = 0` is taken to keep 0.5% of the rows,
    with or without ANALYZE), and a subquery it takes for one row ends up
    rescanned for every provider: 12 s (analyzed) to 19 s (freshly loaded)
    for `resources=VCPU:1,MEMORY_MB:1024&required=...` at 10,000 providers,
    when the usage was a join with allocations grouped by provider. SQLite
    and MySQL build the subquery's list once, then look providers up in it."""
    fitting = providers_with_capacity(wanted)
    if conn.dialect.name != "postgresql":
        # From a derived table: MySQL then builds the list once (a grouped
        # subquery may instead be re-run for every provider).
        return rp_id.in_(sa.select(fitting.subquery("fitting").c.rp))
    ids = conn.scalars(fitting).all()
    if not ids:
        return None
    return among(rp_id, ids, conn.dialect.name)
