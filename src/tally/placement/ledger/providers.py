"""Resource providers: create, read, rename, re-parent, delete, and the filters
of the provider list.

Trees: every provider row carries `root_provider_id` (its own id for a root)
and `parent_provider_id`, so a whole tree is one indexed lookup. Re-parenting
moves a subtree and rewrites the root of each provider in it.

A rename or re-parent does not change the provider generation (as upstream:
the generation guards inventories, allocations, traits and aggregates).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import NamedTuple

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.engine import is_sqlite, run_retrying, transaction
from tally.placement.ledger.common import (
    has_rows,
    ids_by_name,
    locking,
    provider_row,
    utcnow,
)
from tally.placement.ledger.errors import (
    BadRequest,
    CannotDeleteParent,
    ConcurrentUpdate,
    DuplicateName,
    NotFound,
    ProviderInUse,
)

_rp = t.resource_providers
RETRIES = 10  # runs of a provider update the database aborted to break a deadlock


class Provider(NamedTuple):
    """One provider as the API shows it (a tuple: listings build thousands)."""

    id: int
    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


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


class _Unset:
    """Marks "parent_provider_uuid was not in the request" (None means un-parent)."""


UNSET = _Unset()


# --- reading ---------------------------------------------------------------


def _provider_select() -> tuple[sa.Select, sa.Alias]:
    rp = _rp.alias("rp")
    parent = _rp.alias("parent")
    root = _rp.alias("root")
    query = sa.select(
        rp.c.id,
        rp.c.uuid,
        rp.c.name,
        rp.c.generation,
        parent.c.uuid.label("parent_provider_uuid"),
        root.c.uuid.label("root_provider_uuid"),
        rp.c.created_at,
        rp.c.updated_at,
    ).select_from(
        rp.outerjoin(parent, rp.c.parent_provider_id == parent.c.id).outerjoin(
            root, rp.c.root_provider_id == root.c.id
        )
    )
    return query, rp


def _to_provider(row: sa.Row) -> Provider:
    rp_id, uuid, name, generation, parent, root, created_at, updated_at = row
    return Provider(rp_id, uuid, name, generation, parent, root or uuid, created_at, updated_at)


def _load(conn: sa.Connection, uuid: str, missing: str | None = None) -> Provider:
    query, rp = _provider_select()
    row = conn.execute(query.where(rp.c.uuid == uuid)).first()
    if row is None:
        raise NotFound(missing or f"No resource provider with uuid {uuid} found")
    return _to_provider(row)


def get_provider(engine: sa.Engine, uuid: str) -> Provider:
    with transaction(engine) as conn:
        return _load(conn, uuid)


def list_providers(engine: sa.Engine, filters: ProviderFilter) -> list[Provider]:
    with transaction(engine) as conn:
        query, rp = _provider_select()
        conditions = filter_conditions(conn, rp.c, filters)
        if conditions is None:
            return []
        rows = conn.execute(query.where(*conditions).order_by(rp.c.id)).all()
    return [_to_provider(row) for row in rows]


# --- filters -----------------------------------------------------------------


def filter_conditions(
    conn: sa.Connection, rp: sa.ColumnCollection, f: ProviderFilter
) -> list[sa.ColumnElement] | None:
    """WHERE clauses on provider columns `rp` for the filter `f`, or None when
    no provider can match (an aggregate set naming only unknown aggregates).

    Unknown traits and resource classes are a 400 (checked before anything is
    matched, so bad input never passes for "no match").
    """
    conditions: list[sa.ColumnElement] = []
    trait_ids = _trait_ids(conn, set().union(*f.required_traits, f.forbidden_traits))
    class_ids = _class_ids(conn, set(f.resources))
    if f.name is not None:
        conditions.append(rp.name == f.name)
    if f.uuid is not None:
        conditions.append(rp.uuid == f.uuid)
    if f.in_tree is not None:
        tree = _rp.alias("tree")
        conditions.append(
            rp.root_provider_id.in_(
                sa.select(tree.c.root_provider_id).where(tree.c.uuid == f.in_tree)
            )
        )
    for any_of in f.required_traits:
        conditions.append(rp.id.in_(_having_traits({trait_ids[n] for n in any_of})))
    if f.forbidden_traits:
        ids = {trait_ids[n] for n in f.forbidden_traits}
        conditions.append(rp.id.not_in(_having_traits(ids)))
    agg_ids = _aggregate_ids(conn, set().union(*f.member_of, f.forbidden_aggregates))
    for any_of in f.member_of:
        known = {agg_ids[u] for u in any_of if u in agg_ids}
        if not known:
            return None
        conditions.append(rp.id.in_(_in_aggregates(known)))
    forbidden_aggs = {agg_ids[u] for u in f.forbidden_aggregates if u in agg_ids}
    if forbidden_aggs:
        conditions.append(rp.id.not_in(_in_aggregates(forbidden_aggs)))
    for name, amount in f.resources.items():
        conditions.append(rp.id.in_(providers_with_capacity(class_ids[name], amount)))
    return conditions


def _trait_ids(conn: sa.Connection, names: set[str]) -> dict[str, int]:
    found = ids_by_name(conn, t.traits, names)
    missing = sorted(names - found.keys())
    if missing:
        raise BadRequest(
            f'Invalid trait(s) in "required" parameter: No such trait(s): {", ".join(missing)}.'
        )
    return found


def _class_ids(conn: sa.Connection, names: set[str]) -> dict[str, int]:
    found = ids_by_name(conn, t.resource_classes, names)
    missing = sorted(names - found.keys())
    if missing:
        raise BadRequest(
            "Invalid resource class in resources parameter: "
            f"No such resource class {', '.join(missing)}."
        )
    return found


def _aggregate_ids(conn: sa.Connection, uuids: set[str]) -> dict[str, int]:
    if not uuids:
        return {}
    agg = t.placement_aggregates
    rows = conn.execute(sa.select(agg.c.uuid, agg.c.id).where(agg.c.uuid.in_(uuids)))
    return {row.uuid: row.id for row in rows}


def _having_traits(trait_ids: set[int]) -> sa.Select:
    rpt = t.resource_provider_traits
    return sa.select(rpt.c.resource_provider_id).where(rpt.c.trait_id.in_(trait_ids))


def _in_aggregates(aggregate_ids: set[int]) -> sa.Select:
    rpa = t.resource_provider_aggregates
    return sa.select(rpa.c.resource_provider_id).where(rpa.c.aggregate_id.in_(aggregate_ids))


def providers_with_capacity(class_id: int, amount: int) -> sa.Select:
    """Ids of providers that could take `amount` of the class now: inventory
    whose unused capacity covers it, within min_unit/max_unit, a multiple of
    step_size."""
    inv = t.inventories
    alloc = t.allocations
    used = (
        sa.select(alloc.c.resource_provider_id, sa.func.sum(alloc.c.used).label("used"))
        .where(alloc.c.resource_class_id == class_id)
        .group_by(alloc.c.resource_provider_id)
        .subquery("used")
    )
    wanted = sa.literal(amount, sa.Integer)
    return (
        sa.select(inv.c.resource_provider_id)
        .select_from(inv.outerjoin(used, used.c.resource_provider_id == inv.c.resource_provider_id))
        .where(
            inv.c.resource_class_id == class_id,
            sa.func.coalesce(used.c.used, 0) + wanted
            <= (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio,
            inv.c.min_unit <= wanted,
            inv.c.max_unit >= wanted,
            wanted % inv.c.step_size == 0,
        )
    )


# --- writing -----------------------------------------------------------------


def create_provider(
    engine: sa.Engine, *, name: str, uuid: str, parent_uuid: str | None = None
) -> Provider:
    """A new provider; a root unless `parent_uuid` names an existing provider."""
    with transaction(engine, write=True) as conn:
        failed = f'Unable to create resource provider "{name}", {uuid}'
        if not name:
            raise BadRequest(f"{failed}: a name is required.")
        _refuse_duplicates(conn, uuid=uuid, name=name)
        parent_id = root_id = None
        if parent_uuid is not None:
            if parent_uuid == uuid:
                raise BadRequest(
                    f"{failed}: parent provider UUID cannot be same as UUID. "
                    "Leave parent_provider_uuid out or null for a root provider."
                )
            parent = _parent_row(conn, parent_uuid, failed)
            parent_id, root_id = parent.id, parent.root_provider_id
        insert = _rp.insert().values(
            uuid=uuid,
            name=name,
            generation=0,
            parent_provider_id=parent_id,
            root_provider_id=root_id,
            created_at=utcnow(),
        )
        try:
            with conn.begin_nested():
                new_id = conn.execute(insert).inserted_primary_key[0]
        except sa.exc.IntegrityError:  # a concurrent create won the race
            _refuse_duplicates(conn, uuid=uuid, name=name)
            raise
        if root_id is None:
            conn.execute(_rp.update().where(_rp.c.id == new_id).values(root_provider_id=new_id))
        return _load(conn, uuid)


def update_provider(
    engine: sa.Engine,
    uuid: str,
    *,
    name: str,
    parent_uuid: str | None | _Unset = UNSET,
    allow_reparenting: bool = False,
) -> Provider:
    """Rename and/or (re-, un-)parent a provider. Giving a root its first parent
    is always allowed; moving or un-parenting a child needs `allow_reparenting`
    (microversion 1.37).

    Two re-parents that lock the same rows in opposite orders (A under B while B
    goes under A) can deadlock on PostgreSQL and MySQL: the database aborts one, and
    it runs again from the start, as allocation writes do (then it sees the other's
    result, e.g. a loop, and answers for that)."""
    return run_retrying(
        engine,
        lambda conn: _update(conn, uuid, name, parent_uuid, allow_reparenting),
        retries=RETRIES,
        gave_up=lambda: ConcurrentUpdate(
            f"Unable to save resource provider {uuid}: other requests kept changing "
            "the same provider tree, please retry"
        ),
    )


def _update(
    conn: sa.Connection,
    uuid: str,
    name: str,
    parent_uuid: str | None | _Unset,
    allow_reparenting: bool,
) -> Provider:
    row = provider_row(conn, uuid, for_update=True)
    values: dict = {"name": name, "updated_at": utcnow()}
    new_root: int | None = None
    subtree: list[int] = []
    failed = f"Unable to save resource provider {uuid}"
    if parent_uuid is None and row.parent_provider_id is not None:
        if not allow_reparenting:
            raise BadRequest(f"{failed}: un-parenting a provider is not currently allowed.")
        subtree = _subtree_ids(conn, row)
        new_root = row.id
        values.update(parent_provider_id=None, root_provider_id=row.id)
    elif isinstance(parent_uuid, str):
        parent = _parent_row(conn, parent_uuid, failed)
        moving = row.parent_provider_id is not None and row.parent_provider_id != parent.id
        if moving and not allow_reparenting:
            raise BadRequest(f"{failed}: re-parenting a provider is not currently allowed.")
        subtree = _subtree_ids(conn, row)
        if parent.id in subtree:
            raise BadRequest(f"{failed}: creating loop in the provider tree is not allowed.")
        new_root = parent.root_provider_id
        values.update(parent_provider_id=parent.id, root_provider_id=new_root)
    taken = DuplicateName(f"Conflicting resource provider {name} already exists.")
    if name != row.name and _name_taken(conn, name):
        raise taken
    try:
        with conn.begin_nested():
            conn.execute(_rp.update().where(_rp.c.id == row.id).values(**values))
    except sa.exc.IntegrityError:  # a concurrent rename took the name first
        raise taken from None
    if new_root is not None and subtree:
        conn.execute(_rp.update().where(_rp.c.id.in_(subtree)).values(root_provider_id=new_root))
    return _load(conn, uuid)


def delete_provider(engine: sa.Engine, uuid: str) -> None:
    """Delete a provider with its inventories, traits and aggregate links;
    409 while it has children or allocations."""
    with transaction(engine, write=True) as conn:
        row = provider_row(
            conn,
            uuid,
            for_update=True,
            missing=f"No resource provider with uuid {uuid} found for delete",
        )
        if has_rows(conn, _rp, _rp.c.parent_provider_id == row.id):
            raise CannotDeleteParent(
                f"Unable to delete parent resource provider {uuid}: "
                "It has child resource providers."
            )
        if has_rows(conn, t.allocations, t.allocations.c.resource_provider_id == row.id):
            raise ProviderInUse(
                f"Unable to delete resource provider {uuid}: Resource provider has allocations."
            )
        for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates):
            conn.execute(table.delete().where(table.c.resource_provider_id == row.id))
        conn.execute(_rp.delete().where(_rp.c.id == row.id))


# --- helpers of the writers --------------------------------------------------


def _parent_row(conn: sa.Connection, parent_uuid: str, failed: str) -> sa.Row:
    """The would-be parent, locked (and read after the lock) so that it cannot
    vanish or change trees before we commit."""
    row = conn.execute(locking(conn, sa.select(_rp).where(_rp.c.uuid == parent_uuid))).first()
    if row is None:
        raise BadRequest(f"{failed}: parent provider UUID does not exist.")
    return row


def _subtree_ids(conn: sa.Connection, row: sa.Row) -> list[int]:
    """Ids of `row` and all its descendants. The whole tree is locked first and
    read after, so a child created meanwhile is either seen or waits for us."""
    query = sa.select(_rp.c.id, _rp.c.parent_provider_id).where(
        _rp.c.root_provider_id == row.root_provider_id
    )
    if not is_sqlite(conn):
        conn.execute(locking(conn, query.order_by(_rp.c.id))).all()
    tree = conn.execute(query).all()
    children: dict[int, list[int]] = {}
    for member in tree:
        if member.parent_provider_id is not None:
            children.setdefault(member.parent_provider_id, []).append(member.id)
    found, todo = [], [row.id]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _name_taken(conn: sa.Connection, name: str) -> bool:
    return conn.execute(sa.select(_rp.c.id).where(_rp.c.name == name)).first() is not None


def _refuse_duplicates(conn: sa.Connection, *, uuid: str, name: str) -> None:
    clashes = []
    if conn.execute(sa.select(_rp.c.id).where(_rp.c.uuid == uuid)).first() is not None:
        clashes.append(f"uuid: {uuid}")
    if _name_taken(conn, name):
        clashes.append(f"name: {name}")
    if clashes:
        raise DuplicateName(f"Conflicting resource provider {', '.join(clashes)} already exists.")
