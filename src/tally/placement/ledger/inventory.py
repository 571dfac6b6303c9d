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
from tally.db.engine import transaction
from tally.placement.ledger import history
from tally.placement.ledger.capacity_guard import UPDATE_CONFLICT, guard
from tally.placement.ledger.common import bump_generation, ids_by_name, provider_row, utcnow
from tally.placement.ledger.errors import (
    BadRequest,
    ConcurrentUpdate,
    NotFound,
)
from tally.placement.ledger.resource_classes import lock_for_inventory
from tally.placement.ledger.usage_queries import capacity

log = logging.getLogger("tally.placement.inventory")

MAX_INT = 2147483647  # the INT columns of an inventory (and of an allocation's amount)
# The largest capacity, int((total - reserved) * allocation_ratio), a write may
# give an inventory. The searches compute capacity in SQL from the stored
# fields: PostgreSQL casts it to BIGINT (an error past 2^63, failing every
# search for everyone) and adds an amount to a BIGINT usage; SQLite's CAST
# saturates at 2^63 - 1; all compare usage + amount with the double product.
# Up to 2^53 every one of those is exact in a double, on each backend and in
# Python, and usage (which never exceeds a capacity that was) stays in range
# with it; JSON readers that hold numbers as doubles read it exactly too. No
# real inventory comes near (2^31 units at a ratio of four million).
MAX_CAPACITY = 2**53 - 1
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


@dataclasses.dataclass(frozen=True)
class Rules:
    """What a write may do, from the request's microversion and the settings."""

    reserved_may_equal_total: bool = True  # microversion 1.26 and later
    over_capacity: str = "refuse"  # "refuse" (our spec) or "allow" (upstream)


@dataclasses.dataclass(frozen=True)
class Record:
    """One inventory: a resource class and its amounts."""

    resource_class: str
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at

    def amounts(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


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


def replace_inventories(
    engine: sa.Engine, uuid: str, generation: int, records: list[Record], rules: Rules
) -> ProviderInventory:
    """Make `records` the whole inventory of the provider (PUT of the collection)."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid, generation)
        for record in records:
            _check_record(uuid, record, rules, "update")
        # share-locked now (as `_write` would lock the classes it adds): one lookup
        ids = lock_for_inventory(conn, [r.resource_class for r in records])
        unknown = sorted(r.resource_class for r in records if r.resource_class not in ids)
        if unknown:
            raise BadRequest(
                f"Unknown resource class in inventory for resource provider {uuid}: "
                + ", ".join(unknown)
            )
        after = {r.resource_class: r for r in records}
        return _write(conn, provider, after, rules, opening=UPDATE_CONFLICT, locked_ids=ids)


def add_inventory(engine: sa.Engine, uuid: str, record: Record, rules: Rules) -> tuple[int, Record]:
    """Add the inventory of one class the provider does not have yet (POST)."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        _check_record(uuid, record, rules, "create")
        ids = _class_ids(conn, [record.resource_class])
        if record.resource_class not in ids:
            raise BadRequest(
                f"Unable to create inventory for resource provider {uuid}: "
                f"No such resource class {record.resource_class}"
            )
        before = _records(conn, provider.id)
        if record.resource_class in before:
            raise ConcurrentUpdate(
                f"Update conflict: resource provider {uuid} already has an inventory "
                f"of {record.resource_class}; change it with PUT"
            )
        after = {**before, record.resource_class: record}
        found = _write(conn, provider, after, rules, before)
        return found.generation, found.records[record.resource_class]


def update_inventory(
    engine: sa.Engine, uuid: str, generation: int, record: Record, rules: Rules
) -> tuple[int, Record]:
    """Change the inventory of one class the provider has (PUT of one class)."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid, generation)
        _check_record(uuid, record, rules, "update")
        before = _records(conn, provider.id)
        if record.resource_class not in before:
            if not _class_ids(conn, [record.resource_class]):
                raise NotFound(f"No such resource class {record.resource_class}")
            raise BadRequest(
                f"No inventory record with resource class {record.resource_class} "
                f"for resource provider {uuid}: add it with POST first"
            )
        after = {**before, record.resource_class: record}
        found = _write(conn, provider, after, rules, before, opening=UPDATE_CONFLICT)
        return found.generation, found.records[record.resource_class]


def delete_inventory(engine: sa.Engine, uuid: str, resource_class: str, rules: Rules) -> int:
    """Remove the inventory of one class; the new provider generation."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        before = _records(conn, provider.id)
        if resource_class not in before:
            raise NotFound(
                f"No inventory of class {resource_class} found for delete "
                f"on resource provider {uuid}"
            )
        after = {rc: r for rc, r in before.items() if rc != resource_class}
        opening = f"Unable to delete inventory of class {resource_class}: "
        return _write(conn, provider, after, rules, before, opening=opening).generation


def delete_inventories(engine: sa.Engine, uuid: str, rules: Rules) -> int:
    """Remove every inventory of the provider; the new provider generation."""
    with transaction(engine, write=True) as conn:
        provider = _locked(conn, uuid)
        before = _records(conn, provider.id)
        return _write(conn, provider, {}, rules, before).generation


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
    return _write(conn, provider, records, rules, baseline=baseline, opening=UPDATE_CONFLICT)


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


_inv, _rc = t.inventories, t.resource_classes
_RECORDS = (
    sa.select(_rc.c.name, *(_inv.c[name] for name in FIELDS), _inv.c.created_at, _inv.c.updated_at)
    .join(_rc, _rc.c.id == _inv.c.resource_class_id)
    .where(_inv.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(_inv.c.resource_class_id)
)
_DELETE_CLASSES = _inv.delete().where(
    _inv.c.resource_provider_id == sa.bindparam("provider_id"),
    _inv.c.resource_class_id.in_(sa.bindparam("class_ids", expanding=True)),
)
_UPDATE_RECORD = (
    _inv.update()
    .where(
        _inv.c.resource_provider_id == sa.bindparam("provider_id"),
        _inv.c.resource_class_id == sa.bindparam("class_id"),
    )
    .values(**{name: sa.bindparam(name) for name in FIELDS}, updated_at=sa.bindparam("now"))
)
_INSERT_RECORD = _inv.insert().values(
    resource_provider_id=sa.bindparam("provider_id"),
    resource_class_id=sa.bindparam("class_id"),
    **{name: sa.bindparam(name) for name in FIELDS},
    created_at=sa.bindparam("now"),
)


def _records(conn: sa.Connection, provider_id: int) -> dict[str, Record]:
    rows = conn.execute(_RECORDS, {"provider_id": provider_id}).all()
    return {
        row.name: Record(row.name, **{k: v for k, v in row._mapping.items() if k != "name"})
        for row in rows
    }


def _class_ids(conn: sa.Connection, names: list[str]) -> dict[str, int]:
    return ids_by_name(conn, t.resource_classes, names)


def _write(
    conn: sa.Connection,
    provider: sa.Row,
    after: dict[str, Record],
    rules: Rules | None,
    before: dict[str, Record] | None = None,
    baseline: dict[str, Record] | None = None,
    opening: str = "",
    locked_ids: dict[str, int] | None = None,
) -> ProviderInventory:
    """Guard, then turn the provider's inventory from `before` into `after`
    (records of `before` found in `after` are left alone), bump the
    generation and read the result back. The guard compares `after` with
    `baseline` (default: `before`); `rules=None` skips it. `opening` starts the
    last line of a refusal (upstream's sentence for the path). `locked_ids`:
    classes the caller already looked up with `lock_for_inventory`."""
    if before is None:
        before = _records(conn, provider.id)
    over = (
        []
        if rules is None
        else guard(
            conn,
            provider,
            before if baseline is None else baseline,
            after,
            rules.over_capacity == "refuse",
            opening,
        )
    )
    adding = [rc for rc in after if rc not in before]
    known = locked_ids or {}
    ids = {
        **_class_ids(conn, [rc for rc in before if rc not in known]),
        **lock_for_inventory(conn, [rc for rc in adding if rc not in known]),
        **known,
    }
    missing = sorted(rc for rc in adding if rc not in ids)
    if missing:  # deleted by a request that committed while we were checking
        raise BadRequest(
            f"Unknown resource class in inventory for resource provider {provider.uuid}: "
            + ", ".join(missing)
        )
    now = utcnow()
    gone = [ids[rc] for rc in before if rc not in after]
    if gone:
        conn.execute(_DELETE_CLASSES, {"provider_id": provider.id, "class_ids": gone})
    changed, added = [], []
    for rc, record in after.items():
        if record is before.get(rc):
            continue
        values = {"provider_id": provider.id, "class_id": ids[rc], **_amounts(record)}
        if rc in before:
            changed.append({**values, "now": now})
        else:
            added.append({**values, "now": now})
    if changed:
        conn.execute(_UPDATE_RECORD, changed)
    if added:
        conn.execute(_INSERT_RECORD, added)
    generation = bump_generation(conn, provider.id, provider.generation, provider.uuid)
    history.inventory_written(conn, provider, generation, before, after)
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
