"""Inventories of a resource provider, and the capacity guard.

Every write is one transaction: lock the provider row, check the generation the
client sent (where the API takes one), check the records against the rules of
the microversion, run the capacity guard against the usage in that same
transaction, write, and bump the provider generation.

The capacity guard (Tally's spec, stricter than upstream Placement): a write
that *lowers* the capacity of a class below what is allocated from it is
refused with 409 `placement.inventory.inuse`, naming the consumers holding it.
A write that does not lower a capacity is never refused, so an operator can
always repair a provider that is already over capacity. With
`over_capacity = allow` the shrink is written and a warning logged, as upstream
does. Removing a class that allocations still hold is refused in both modes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.retry import retrying
from tally.db.schema import MAX_CAPACITY
from tally.db.transaction import at_commit, insert_at_commit, transaction
from tally.placement.error_types import (
    BadRequest,
    ConcurrentUpdate,
    NotFound,
)
from tally.placement.ledger import history_records
from tally.placement.ledger.capacity_guard import UPDATE_CONFLICT, guard
from tally.placement.ledger.common import provider_row, utcnow
from tally.placement.ledger.inventory_record import FIELDS, Record
from tally.placement.ledger.provider_bumps import bump_generation
from tally.placement.ledger.resource_classes import lock_for_inventory

log = logging.getLogger("tally.placement.inventory")


@dataclasses.dataclass(frozen=True)
class Rules:
    """What a write may do, from the request's microversion and the settings."""

    reserved_may_equal_total: bool = True  # microversion 1.26 and later
    over_capacity: str = "refuse"  # "refuse" (our spec) or "allow" (upstream)


@dataclasses.dataclass(frozen=True)
class ProviderInventory:
    """All inventories of one provider, with the provider generation."""

    generation: int
    records: dict[str, Record]

    @property
    def last_modified(self) -> dt.datetime | None:
        stamps = [r.last_modified for r in self.records.values() if r.last_modified]
        return max(stamps) if stamps else None


# ---------------------------------------------------------------- reads


def get_inventories(engine: sa.Engine, uuid: str) -> ProviderInventory:
    with transaction(engine) as conn:
        provider = provider_row(conn, uuid)
        return ProviderInventory(provider.generation, _records(conn, provider.id))


def get_inventory(engine: sa.Engine, uuid: str, resource_class: str) -> tuple[int, Record]:
    """The provider generation and one inventory; 404 if either is missing."""
    with transaction(engine) as conn:
        provider = provider_row(conn, uuid)
        record = _records(conn, provider.id).get(resource_class)
    if record is None:
        raise NotFound(f"No inventory of class {resource_class} for {uuid}")
    return provider.generation, record


# ---------------------------------------------------------------- writes


@retrying
def replace_inventories(
    engine: sa.Engine, uuid: str, generation: int, records: list[Record], rules: Rules
) -> ProviderInventory:
    """Make `records` the whole inventory of the provider (PUT of the collection)."""
    with transaction(engine, write=True) as conn:
        return replace_inventories_in(conn, uuid, generation, records, rules, last=True)


def replace_inventories_in(
    conn: sa.Connection,
    uuid: str,
    generation: int | None,
    records: list[Record],
    rules: Rules,
    *,
    last: bool = False,
) -> ProviderInventory:
    """The body of `replace_inventories`, inside a write transaction the caller
    opened (`generation` None: the provider's current one)."""
    provider = _locked(conn, uuid, generation)
    for record in records:
        _check_record(uuid, record, rules, "update")
    state = _state(conn, provider.id, [r.resource_class for r in records])
    unknown = sorted(r.resource_class for r in records if r.resource_class not in state.ids)
    if unknown:
        raise BadRequest(
            f"Unknown resource class in inventory for resource provider {uuid}: "
            + ", ".join(unknown)
        )
    after = {r.resource_class: r for r in records}
    return _write(conn, provider, state, after, rules, opening=UPDATE_CONFLICT, last=last)


@retrying
def add_inventory(engine: sa.Engine, uuid: str, record: Record, rules: Rules) -> tuple[int, Record]:
    """Add the inventory of one class the provider does not have yet (POST)."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        _check_record(uuid, record, rules, "create")
        state = _state(conn, provider.id, [record.resource_class])
        if record.resource_class not in state.ids:
            raise BadRequest(
                f"Unable to create inventory for resource provider {uuid}: "
                f"No such resource class {record.resource_class}"
            )
        if record.resource_class in state.before:
            raise ConcurrentUpdate(
                f"Update conflict: resource provider {uuid} already has an inventory "
                f"of {record.resource_class}; change it with PUT"
            )
        after = {**state.before, record.resource_class: record}
        found = _write(conn, provider, state, after, rules, last=True)
        return found.generation, found.records[record.resource_class]


@retrying
def update_inventory(
    engine: sa.Engine, uuid: str, generation: int, record: Record, rules: Rules
) -> tuple[int, Record]:
    """Change the inventory of one class the provider has (PUT of one class)."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid, generation)
        _check_record(uuid, record, rules, "update")
        state = _state(conn, provider.id, [record.resource_class])
        if record.resource_class not in state.before:
            if record.resource_class not in state.ids:
                raise NotFound(f"No such resource class {record.resource_class}")
            raise BadRequest(
                f"No inventory record with resource class {record.resource_class} "
                f"for resource provider {uuid}: add it with POST first"
            )
        after = {**state.before, record.resource_class: record}
        found = _write(conn, provider, state, after, rules, opening=UPDATE_CONFLICT, last=True)
        return found.generation, found.records[record.resource_class]


@retrying
def delete_inventory(engine: sa.Engine, uuid: str, resource_class: str, rules: Rules) -> int:
    """Remove the inventory of one class; the new provider generation."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        state = _state(conn, provider.id, [])
        if resource_class not in state.before:
            raise NotFound(
                f"No inventory of class {resource_class} found for delete "
                f"on resource provider {uuid}"
            )
        after = {rc: r for rc, r in state.before.items() if rc != resource_class}
        opening = f"Unable to delete inventory of class {resource_class}: "
        return _write(conn, provider, state, after, rules, opening=opening, last=True).generation


@retrying
def delete_inventories(engine: sa.Engine, uuid: str, rules: Rules) -> int:
    """Remove every inventory of the provider; the new provider generation."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        state = _state(conn, provider.id, [])
        return _write(conn, provider, state, {}, rules, last=True).generation


# ---------------------------------------------------------------- inside a caller's transaction


def records_in(conn: sa.Connection, provider_id: int) -> dict[str, Record]:
    """The inventory of a provider, by class name."""
    return _records(conn, provider_id)


def check_record(uuid: str, record: Record, rules: Rules, action: str = "update") -> None:
    """400 for amounts that make no usable inventory (see `Rules`)."""
    _check_record(uuid, record, rules, action)


def write_in(
    conn: sa.Connection,
    provider: sa.Row,
    records: dict[str, Record],
    rules: Rules | None,
    baseline: dict[str, Record] | None = None,
) -> ProviderInventory:
    """Make `records` the whole inventory of `provider` (a row the caller read after
    locking it, so its generation is current) and bump the generation, inside the
    caller's write transaction. The capacity guard judges the change from
    `baseline` (default: the inventory now) to `records` against the allocations
    as they are at this point of the transaction; `rules=None` writes unguarded
    (an interim state the caller guards later)."""
    state = _state(conn, provider.id, list(records))
    return _write(conn, provider, state, records, rules, baseline=baseline, opening=UPDATE_CONFLICT)


# ---------------------------------------------------------------- internals


def _locked(conn: sa.Connection, uuid: str, generation: int | None = None) -> sa.Row:
    """The provider row, locked until commit; 409 if the client's generation is stale."""
    provider = provider_row(conn, uuid, for_update=True)
    if generation is not None and generation != provider.generation:
        raise ConcurrentUpdate(
            f"resource provider generation conflict: {uuid} is at generation "
            f"{provider.generation}, the request names {generation}; re-read and retry"
        )
    return provider


def _check_record(uuid: str, record: Record, rules: Rules, action: str) -> None:
    """400 for amounts that make no usable inventory (before 1.26 the capacity
    must be positive; from 1.26 reserved may equal total)."""
    prefix = f"Unable to {action} inventory for resource provider {uuid}"
    rc, total, reserved = record.resource_class, record.total, record.reserved
    if reserved > total or (reserved == total and not rules.reserved_may_equal_total):
        relation = "greater than" if rules.reserved_may_equal_total else "greater than or equal to"
        raise BadRequest(
            f"{prefix}: the reserved value of {rc} ({reserved}) is {relation} total ({total})"
        )
    if record.capacity <= 0 and not rules.reserved_may_equal_total:
        raise BadRequest(
            f"{prefix}: {rc} would have no capacity: ({total} - {reserved}) * "
            f"{record.allocation_ratio} rounds down to 0"
        )
    if record.min_unit > record.max_unit:
        raise BadRequest(
            f"{prefix}: min_unit of {rc} ({record.min_unit}) is greater than "
            f"max_unit ({record.max_unit})"
        )
    if record.capacity > MAX_CAPACITY:
        raise BadRequest(
            f"{prefix}: the capacity of {rc}, (total - reserved) * allocation_ratio = "
            f"({total} - {reserved}) * {record.allocation_ratio} = {record.capacity}, "
            f"is greater than the maximum of {MAX_CAPACITY}: lower allocation_ratio"
        )


_inv, _rc, _a = t.inventories, t.resource_classes, t.allocations
_RECORDS = (
    sa.select(_rc.c.name, *(_inv.c[name] for name in FIELDS), _inv.c.created_at, _inv.c.updated_at)
    .join(_rc, _rc.c.id == _inv.c.resource_class_id)
    .where(_inv.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(_inv.c.resource_class_id)
)
_DELETE_CLASS = _inv.delete().where(
    _inv.c.resource_provider_id == sa.bindparam("provider_id"),
    _inv.c.resource_class_id == sa.bindparam("class_id"),
)
_UPDATE_RECORD = (
    _inv.update()
    .where(
        _inv.c.resource_provider_id == sa.bindparam("provider_id"),
        _inv.c.resource_class_id == sa.bindparam("class_id"),
    )
    .values(**{name: sa.bindparam(name) for name in FIELDS}, updated_at=sa.bindparam("now"))
)
# What a write reads once the provider is locked, in one statement: each class the
# provider has inventory of, holds allocations of, or the write names, with its
# inventory record and usage here (on PostgreSQL the class rows share-locked, so
# `delete_class` cannot remove them before this commits).
_used_here = (
    sa.select(
        _a.c.resource_class_id,
        sa.func.sum(_a.c.used).label("used"),
        sa.func.count().label("allocation_rows"),
    )
    .where(_a.c.resource_provider_id == sa.bindparam("provider_id"))
    .group_by(_a.c.resource_class_id)
    .subquery("used_here")
)
_STATE = (
    sa.select(
        _rc.c.name,
        _rc.c.id,
        _inv.c.id.label("inventory_id"),
        *(_inv.c[name] for name in FIELDS),
        _inv.c.created_at,
        _inv.c.updated_at,
        _used_here.c.used,
        _used_here.c.allocation_rows,
    )
    .select_from(
        _rc.outerjoin(
            _inv,
            sa.and_(
                _inv.c.resource_class_id == _rc.c.id,
                _inv.c.resource_provider_id == sa.bindparam("provider_id"),
            ),
        ).outerjoin(_used_here, _used_here.c.resource_class_id == _rc.c.id)
    )
    .where(  # (one IN of a UNION, so that each part reads its own index)
        _rc.c.id.in_(
            sa.union_all(
                sa.select(_rc.c.id).where(in_bound_list(_rc.c.name, "names")),
                sa.select(_inv.c.resource_class_id).where(
                    _inv.c.resource_provider_id == sa.bindparam("provider_id")
                ),
                sa.select(_used_here.c.resource_class_id),
            )
        )
    )
    .order_by(_rc.c.id)
)
_STATE_LOCKED = _STATE.with_for_update(read=True, key_share=True, of=_rc)


@dataclasses.dataclass(frozen=True)
class _State:
    """What a write reads once the provider is locked (`_state`)."""

    before: dict[str, Record]  # the inventory now, by class name
    usage: dict[str, tuple[int, int, int]]  # class name -> (class id, used, allocation rows)
    ids: dict[str, int]  # class ids: of those above, and of the names asked that exist


def _state(conn: sa.Connection, provider_id: int, names: list[str]) -> _State:
    """The provider's inventory and usage, and the ids of `names` (share-locked:
    in the same statement on PostgreSQL, before it on MySQL, whose MariaDB cannot
    lock one table of a join; SQLite has one writer anyway)."""
    dialect = conn.dialect.name
    if dialect == "mysql":
        lock_for_inventory(conn, names)
    query = _STATE_LOCKED if dialect == "postgresql" else _STATE
    rows = conn.execute(query, {"provider_id": provider_id, "names": sorted(set(names))}).all()
    before, usage = {}, {}
    for row in rows:
        if row.inventory_id is not None:
            amounts = {name: row._mapping[name] for name in FIELDS}
            before[row.name] = Record(
                row.name, **amounts, created_at=row.created_at, updated_at=row.updated_at
            )
        if row.used is not None:
            usage[row.name] = (row.id, int(row.used), int(row.allocation_rows))
    return _State(before, usage, {row.name: row.id for row in rows})


def _records(conn: sa.Connection, provider_id: int) -> dict[str, Record]:
    rows = conn.execute(_RECORDS, {"provider_id": provider_id}).all()
    return {
        row.name: Record(row.name, **{k: v for k, v in row._mapping.items() if k != "name"})
        for row in rows
    }


def _write(
    conn: sa.Connection,
    provider: sa.Row,
    state: _State,
    after: dict[str, Record],
    rules: Rules | None,
    baseline: dict[str, Record] | None = None,
    opening: str = "",
    last: bool = False,
) -> ProviderInventory:
    """Guard, then turn the provider's inventory from `state.before` into `after`
    (records of `before` found in `after` are left alone) and bump the generation.
    The guard compares `after` with `baseline` (default: `before`); `rules=None`
    skips it. `opening` starts the last line of a refusal (upstream's sentence for
    the path). `last`: nothing later in the transaction reads the inventory, so
    the writes go with the COMMIT (`engine.at_commit`)."""
    before, ids = state.before, state.ids
    over = (
        []
        if rules is None
        else guard(
            conn,
            provider,
            before if baseline is None else baseline,
            after,
            state.usage,
            rules.over_capacity == "refuse",
            opening,
        )
    )
    missing = sorted(rc for rc in after if rc not in ids)
    if missing:  # deleted by a request that committed while we were checking
        raise BadRequest(
            f"Unknown resource class in inventory for resource provider {provider.uuid}: "
            + ", ".join(missing)
        )
    now = utcnow()
    for rc in before:
        if rc not in after:
            gone = {"provider_id": provider.id, "class_id": ids[rc]}
            at_commit(conn, _DELETE_CLASS, gone, defer=last)
    added = []
    for rc, record in after.items():
        if record is before.get(rc):
            continue
        if rc in before:
            values = {"provider_id": provider.id, "class_id": ids[rc], "now": now}
            at_commit(conn, _UPDATE_RECORD, {**values, **_amounts(record)}, defer=last)
        else:
            added.append(
                {
                    "resource_provider_id": provider.id,
                    "resource_class_id": ids[rc],
                    **_amounts(record),
                    "created_at": now,
                }
            )
    insert_at_commit(conn, _inv, added, defer=last)
    generation = bump_generation(conn, provider.id, provider.generation, provider.uuid, last=last)
    history_records.inventory_written(conn, provider, generation, before, after)
    for rc in over:
        log.warning("Resource provider %s is now over-capacity for %s", provider.uuid, rc)
    return ProviderInventory(generation, _as_written(conn, provider.id, before, after, ids, now))


def _as_written(
    conn: sa.Connection,
    provider_id: int,
    before: dict[str, Record],
    after: dict[str, Record],
    ids: dict[str, int],
    now: dt.datetime,
) -> dict[str, Record]:
    """The inventory as `_write` left it, in the order `_records` reads it (by
    class id), without reading it back; read back on MySQL, which keeps an
    allocation ratio in single precision (1.23456789 comes back as 1.23457)."""
    if conn.dialect.name == "mysql":
        return _records(conn, provider_id)
    written: dict[str, Record] = {}
    for rc in sorted(after, key=ids.__getitem__):
        record, old = after[rc], before.get(rc)
        written[rc] = (
            old
            if record is old
            else dataclasses.replace(
                record,
                **_amounts(record),
                created_at=old.created_at if old else now,
                updated_at=now if old else None,
            )
        )
    return written


def _amounts(record: Record) -> dict[str, Any]:
    values = record.amounts()
    for name in FIELDS[:-1]:
        values[name] = int(values[name])
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return values
