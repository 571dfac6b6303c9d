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
from tally.placement.ledger.common import bump_generation, ids_by_name, provider_row, utcnow
from tally.placement.ledger.errors import (
    BadRequest,
    ConcurrentUpdate,
    InventoryInUse,
    NotFound,
)
from tally.placement.ledger.usage_queries import capacity

log = logging.getLogger("tally.placement.inventory")

MAX_INT = 2147483647
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
CONSUMERS_SHOWN = 5  # consumers named per class in an in-use error; the rest are counted


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
        ids = _class_ids(conn, [r.resource_class for r in records])
        unknown = sorted(r.resource_class for r in records if r.resource_class not in ids)
        if unknown:
            raise BadRequest(
                f"Unknown resource class in inventory for resource provider {uuid}: "
                + ", ".join(unknown)
            )
        return _write(conn, provider, {r.resource_class: r for r in records}, rules)


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
        found = _write(conn, provider, after, rules, before)
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
        return _write(conn, provider, after, rules, before).generation


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
    return _write(conn, provider, records, rules, baseline=baseline)


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


def _records(conn: sa.Connection, provider_id: int) -> dict[str, Record]:
    inv, rc = t.inventories, t.resource_classes
    rows = conn.execute(
        sa.select(rc.c.name, *(inv.c[name] for name in FIELDS), inv.c.created_at, inv.c.updated_at)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == provider_id)
        .order_by(inv.c.resource_class_id)
    ).all()
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
) -> ProviderInventory:
    """Guard, then turn the provider's inventory from `before` into `after`
    (records of `before` found in `after` are left alone), bump the
    generation and read the result back. The guard compares `after` with
    `baseline` (default: `before`); `rules=None` skips it."""
    if before is None:
        before = _records(conn, provider.id)
    over = (
        []
        if rules is None
        else _guard(conn, provider, before if baseline is None else baseline, after, rules)
    )
    ids = _class_ids(conn, [*before, *after])
    inv, now = t.inventories, utcnow()
    mine = inv.c.resource_provider_id == provider.id
    gone = [ids[rc] for rc in before if rc not in after]
    if gone:
        conn.execute(inv.delete().where(mine, inv.c.resource_class_id.in_(gone)))
    for rc, record in after.items():
        if record is before.get(rc):
            continue
        if rc in before:
            conn.execute(
                inv.update()
                .where(mine, inv.c.resource_class_id == ids[rc])
                .values(**_amounts(record), updated_at=now)
            )
        else:
            conn.execute(
                inv.insert().values(
                    resource_provider_id=provider.id,
                    resource_class_id=ids[rc],
                    **_amounts(record),
                    created_at=now,
                )
            )
    generation = bump_generation(conn, provider.id, provider.generation, provider.uuid)
    for rc in over:
        log.warning("Resource provider %s is now over-capacity for %s", provider.uuid, rc)
    return ProviderInventory(generation, _records(conn, provider.id))


def _amounts(record: Record) -> dict[str, Any]:
    values = record.amounts()
    for name in FIELDS[:-1]:
        values[name] = int(values[name])
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return values


# ---------------------------------------------------------------- the capacity guard


@dataclasses.dataclass(frozen=True)
class Holder:
    """A consumer holding some of a class on the provider."""

    uuid: str
    amount: int
    consumer_type: str | None
    project_id: str | None

    def line(self) -> str:
        kind = f"type {self.consumer_type}" if self.consumer_type else "unknown type"
        project = f"project {self.project_id}" if self.project_id else "unknown project"
        return f"  {self.amount} by consumer {self.uuid} ({kind}, {project})"


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """A class the write would leave short: `removed`, or lowered below usage."""

    resource_class: str
    used: int
    capacity: int
    removed: bool
    holders: tuple[Holder, ...]
    consumers: int

    def summary(self) -> str:
        if self.removed:
            return f"{self.used} used, the inventory cannot be removed"
        return f"{self.used} used, new capacity {self.capacity}"

    def lines(self) -> list[str]:
        plural = "s" if self.consumers != 1 else ""
        head = f"{self.resource_class} is held by {self.consumers} consumer{plural}"
        lines = [f"{head}, largest first:"]
        lines += [holder.line() for holder in self.holders]
        rest = self.consumers - len(self.holders)
        if rest > 0:
            lines.append(f"  and {rest} more consumer{'s' if rest != 1 else ''}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "resource_class": self.resource_class,
            "used": self.used,
            "capacity": self.capacity,
            "removed": self.removed,
            "consumers": [dataclasses.asdict(h) for h in self.holders],
            "more_consumers": self.consumers - len(self.holders),
        }


def _guard(
    conn: sa.Connection,
    provider: sa.Row,
    before: dict[str, Record],
    after: dict[str, Record],
    rules: Rules,
) -> list[str]:
    """Refuse the write if it takes away what allocations hold; else the
    classes it leaves over capacity (to warn about once written)."""
    usage = _usage(conn, provider.id)  # name -> (class id, used, allocation rows)
    removed = [rc for rc in before if rc not in after and usage.get(rc, (0, 0, 0))[2] > 0]
    over = [
        rc
        for rc, new in after.items()
        if new is not before.get(rc) and usage.get(rc, (0, 0, 0))[1] > new.capacity
    ]
    lowered = [
        rc for rc in over if after[rc].capacity < (before[rc].capacity if rc in before else 0)
    ]
    refused = removed + (lowered if rules.over_capacity == "refuse" else [])
    if not refused:
        return over
    refused.sort(key=lambda rc: usage[rc][0])
    shortfalls = [_shortfall(conn, provider.id, rc, usage[rc], after.get(rc)) for rc in refused]
    error = _in_use(provider.uuid, shortfalls)
    log.warning(
        "Refused inventory change on resource provider %s: %s",
        provider.uuid,
        "; ".join(f"{s.resource_class} {s.summary()}" for s in shortfalls),
    )
    raise error


def _usage(conn: sa.Connection, provider_id: int) -> dict[str, tuple[int, int, int]]:
    a, rc = t.allocations, t.resource_classes
    rows = conn.execute(
        sa.select(rc.c.name, rc.c.id, sa.func.sum(a.c.used), sa.func.count())
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.resource_provider_id == provider_id)
        .group_by(rc.c.name, rc.c.id)
    ).all()
    return {name: (rc_id, int(used or 0), int(n)) for name, rc_id, used, n in rows}


def _shortfall(
    conn: sa.Connection,
    provider_id: int,
    rc: str,
    usage: tuple[int, int, int],
    new: Record | None,
) -> Shortfall:
    a, c, ct = t.allocations, t.consumers, t.consumer_types
    held = (a.c.resource_provider_id == provider_id, a.c.resource_class_id == usage[0])
    amount = sa.func.sum(a.c.used).label("amount")
    rows = conn.execute(
        sa.select(a.c.consumer_id, amount, ct.c.name, c.c.project_id)
        .select_from(
            a.outerjoin(c, c.c.uuid == a.c.consumer_id).outerjoin(
                ct, ct.c.id == c.c.consumer_type_id
            )
        )
        .where(*held)
        .group_by(a.c.consumer_id, ct.c.name, c.c.project_id)
        .order_by(amount.desc(), a.c.consumer_id)
        .limit(CONSUMERS_SHOWN)
    ).all()
    consumers = conn.execute(
        sa.select(sa.func.count(sa.distinct(a.c.consumer_id))).where(*held)
    ).scalar_one()
    return Shortfall(
        resource_class=rc,
        used=usage[1],
        capacity=new.capacity if new is not None else 0,
        removed=new is None,
        holders=tuple(Holder(r[0], int(r[1]), r[2], r[3]) for r in rows),
        consumers=int(consumers),
    )


def _in_use(uuid: str, shortfalls: list[Shortfall]) -> InventoryInUse:
    """409 naming, per class, the usage, the capacity asked for and the
    largest holders; the same facts as data in the error's `usage` member."""
    names = ", ".join(s.resource_class for s in shortfalls)
    if len(shortfalls) == 1:
        summary = shortfalls[0].summary()
    else:
        summary = "; ".join(f"{s.resource_class} {s.summary()}" for s in shortfalls)
    lines = [f"Inventory for '{names}' on resource provider '{uuid}' in use: {summary}"]
    for shortfall in shortfalls:
        lines += shortfall.lines()
    if any(not s.removed for s in shortfalls):
        lines.append(
            "Free those allocations first (or set over_capacity = allow to accept "
            "an over-committed provider)."
        )
    return InventoryInUse("\n".join(lines), usage=[s.as_dict() for s in shortfalls])
