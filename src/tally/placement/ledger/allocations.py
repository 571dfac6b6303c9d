"""Allocations: reading them, and the one write path that replaces the
allocations of one or more consumers atomically (PUT /allocations/{uuid},
POST /allocations, and the reshaper via `replace_in`).

The capacity guard and the write happen in one transaction. On PostgreSQL the
consumer rows and then the provider rows are locked (`SELECT ... FOR UPDATE`,
sorted) before usage is read; on SQLite `BEGIN IMMEDIATE` makes the write the
only writer. So no two concurrent claims can both pass the guard on stale
usage. A write may end above capacity on a (provider, class) only when it does
not increase usage there (shrinking an existing overage), as upstream allows.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import sqlalchemy as sa

from tally.amounts import capacity
from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.retry import RunAgain, retrying
from tally.db.retry import run_retrying as run_retrying_in_engine
from tally.db.row_rules import stored_fault
from tally.db.transaction import at_commit, insert_at_commit, transaction
from tally.placement.error_types import BadRequest, ConcurrentUpdate, Conflict, NotFound
from tally.placement.ledger import consumers as cons
from tally.placement.ledger import history_records, provider_bumps
from tally.placement.ledger.common import (
    provider_row,
    utcnow,
)

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class ConsumerWrite:
    """The complete new allocations of one consumer (empty: remove them all)."""

    uuid: str
    project_id: str
    user_id: str
    allocations: dict[str, dict[str, int]]  # provider uuid -> {resource class: amount}
    check_generation: bool = False  # microversion >= 1.28
    generation: int | None = None  # what the client believes (None: a new consumer)
    consumer_type: str | None = None  # None leaves the type as it is (< 1.38)


@dataclasses.dataclass
class ConsumerAllocations:
    allocations: dict[str, dict]  # provider uuid -> {"generation", "resources"}
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str | None = None
    last_modified: dt.datetime | None = None


@dataclasses.dataclass
class ProviderAllocations:
    generation: int
    allocations: dict[str, dict]  # consumer uuid -> {"resources", "consumer_generation"}
    last_modified: dt.datetime | None = None


_a = t.allocations
_DELETE_ALLOCATIONS = _a.delete().where(_a.c.consumer_id == sa.bindparam("uuid"))
_CURRENT = sa.select(
    _a.c.consumer_id, _a.c.resource_provider_id, _a.c.resource_class_id, _a.c.used
).where(in_bound_list(_a.c.consumer_id, "uuids"))
# The inventories of the providers, each with what is allocated from it (one
# round trip; the allocations' (provider, class, used) index answers each sum).
_USED_OF_INVENTORY = (
    sa.select(sa.func.coalesce(sa.func.sum(_a.c.used), 0))
    .where(
        _a.c.resource_provider_id == t.inventories.c.resource_provider_id,
        _a.c.resource_class_id == t.inventories.c.resource_class_id,
    )
    .scalar_subquery()
)
_INVENTORY_OF = sa.select(t.inventories, _USED_OF_INVENTORY.label("used_now")).where(
    in_bound_list(t.inventories.c.resource_provider_id, "ids")
)
# ... and, for a claim that assumed its consumers new, whether any of them has a
# row or holds an allocation after all (the same answer on every row).
_CONSUMERS_KNOWN = sa.or_(
    sa.exists().where(in_bound_list(t.consumers.c.uuid, "uuids")),
    sa.exists().where(in_bound_list(_a.c.consumer_id, "uuids")),
)
_INVENTORY_OF_NEW = _INVENTORY_OF.add_columns(_CONSUMERS_KNOWN.label("consumers_known"))


class _NotNew(RunAgain):
    """A consumer a claim assumed new is known after all, or its 400 must be
    checked with the consumers looked up: run the write the ordinary way."""


# ---------------------------------------------------------------- reads


def for_consumer(engine: sa.Engine, consumer_uuid: str) -> ConsumerAllocations:
    a, rp, rc, c = t.allocations, t.resource_providers, t.resource_classes, t.consumers
    query = (
        sa.select(
            rp.c.uuid.label("rp_uuid"),
            rp.c.generation.label("rp_generation"),
            rc.c.name.label("rc_name"),
            a.c.used,
            a.c.created_at,
            a.c.updated_at,
            c.c.project_id,
            c.c.user_id,
            c.c.generation,
            c.c.consumer_type_id,
        )
        .select_from(
            a.join(rp, rp.c.id == a.c.resource_provider_id)
            .join(rc, rc.c.id == a.c.resource_class_id)
            .join(c, c.c.uuid == a.c.consumer_id)
        )
        .where(a.c.consumer_id == consumer_uuid)
        .order_by(a.c.id)  # as written: the same order on every backend
    )
    with transaction(engine) as conn:
        rows = conn.execute(query).all()
        if not rows:
            return ConsumerAllocations(allocations={})
        type_names = cons.consumer_type_names(conn)
    result = ConsumerAllocations(
        allocations={},
        project_id=rows[0].project_id,
        user_id=rows[0].user_id,
        generation=rows[0].generation,
        consumer_type=type_names.get(rows[0].consumer_type_id, cons.UNKNOWN_TYPE),
        last_modified=_newest(rows),
    )
    for row in rows:
        entry = result.allocations.setdefault(
            row.rp_uuid, {"generation": row.rp_generation, "resources": {}}
        )
        entry["resources"][row.rc_name] = row.used
    return result


def for_provider(engine: sa.Engine, provider_uuid: str) -> ProviderAllocations:
    a, rc, c = t.allocations, t.resource_classes, t.consumers
    with transaction(engine) as conn:
        provider = provider_row(
            conn, provider_uuid, missing=f"Resource provider '{provider_uuid}' not found."
        )
        rows = conn.execute(
            sa.select(
                a.c.consumer_id,
                rc.c.name.label("rc_name"),
                a.c.used,
                a.c.created_at,
                a.c.updated_at,
                c.c.generation,
            )
            .select_from(
                a.join(rc, rc.c.id == a.c.resource_class_id).outerjoin(
                    c, c.c.uuid == a.c.consumer_id
                )
            )
            .where(a.c.resource_provider_id == provider.id)
            .order_by(a.c.id)  # as written: the same order on every backend
        ).all()
    result = ProviderAllocations(
        generation=provider.generation, allocations={}, last_modified=_newest(rows)
    )
    for row in rows:
        entry = result.allocations.setdefault(
            row.consumer_id, {"resources": {}, "consumer_generation": row.generation}
        )
        entry["resources"][row.rc_name] = row.used
    return result


def _newest(rows: list[sa.Row]) -> dt.datetime | None:
    stamps = [row.updated_at or row.created_at for row in rows]
    known = [s for s in stamps if s is not None]
    return max(known) if known else None


# ---------------------------------------------------------------- delete


@retrying
def delete_consumer(engine: sa.Engine, consumer_uuid: str) -> None:
    """DELETE /allocations/{uuid}: remove every allocation of the consumer, and
    the consumer with them. As upstream, provider generations do not move."""
    a = t.allocations
    with transaction(engine, write=True) as conn:
        cons.lock_consumers(conn, [consumer_uuid])
        history_records.consumer_deleting(conn, consumer_uuid)
        deleted = conn.execute(a.delete().where(a.c.consumer_id == consumer_uuid)).rowcount
        if not deleted:
            raise NotFound(f"No allocations for consumer '{consumer_uuid}'")
        cons.delete_if_unused(conn, [consumer_uuid])


# ---------------------------------------------------------------- write


def replace(engine: sa.Engine, writes: list[ConsumerWrite], retries: int = 10) -> None:
    """Replace the allocations of every consumer in `writes`, all or nothing.

    Races the server can resolve alone (two requests creating the same new
    consumer or consumer type, a deadlock, a provider generation moving) run the
    whole transaction again, at most `retries` times; then 409
    `placement.concurrent_update`. The first try takes consumers whose generation
    the client names as null (from 1.28: a scheduler's claim for a new server) for
    new without looking (`replace_in(assume_new=True)`); any doubt runs it again
    the ordinary way.
    """
    first = [True]

    def body(conn: sa.Connection) -> None:
        assume_new, first[0] = first[0], False
        replace_in(conn, writes, last=True, assume_new=assume_new)

    run_retrying(engine, body, retries)


def run_retrying(
    engine: sa.Engine, body: Callable[[sa.Connection], None], retries: int = 10
) -> None:
    """Run `body` in a write transaction, and run it again from the start when it
    loses a race the server resolves alone (see `replace`); at most `retries` times."""
    run_retrying_in_engine(
        engine,
        body,
        retries=retries,
        also=(provider_bumps.GenerationMoved, sa.exc.IntegrityError),
        gave_up=lambda: ConcurrentUpdate(
            "Inventory and/or allocations changed while attempting to allocate: "
            "another request updated the same providers or consumers, please retry"
        ),
    )


def replace_in(
    conn: sa.Connection,
    writes: list[ConsumerWrite],
    *,
    last: bool = False,
    assume_new: bool = False,
) -> None:
    """The body of `replace`, inside a write transaction the caller opened.

    `last`: nothing later in the transaction reads what this writes, so its
    writes may go with the COMMIT (`engine.at_commit`). `assume_new`: when every
    write names its consumer's generation as null, skip locking and reading the
    consumers; the read after the provider locks tells whether any exists or holds
    an allocation after all (and the insert of their rows, should one be made
    meanwhile), and then `_NotNew` runs the write again without the assumption.
    """
    writes = _merge(writes)
    assume_new = assume_new and all(
        w.check_generation and w.generation is None and w.allocations for w in writes
    )
    named = (
        {u for w in writes for u in w.allocations},
        {rc for w in writes for r in w.allocations.values() for rc in r},
        {w.consumer_type for w in writes if w.consumer_type},
    )
    provider_ids, class_ids, type_ids, generations = provider_bumps.look_up(
        conn, *named, bump=assume_new
    )
    consumers, new = _claim_consumers(conn, writes, type_ids, assume_new=assume_new)
    try:
        check_named(writes, provider_ids, class_ids)
    except BadRequest:
        if assume_new:  # an existing consumer's 409 would come first
            raise _NotNew() from None
        raise
    old = [] if assume_new else _current(conn, [w.uuid for w in writes])
    # As upstream: the providers named in the request, and those a consumer
    # being emptied held, get a new generation (all of them locked first).
    emptied = {w.uuid for w in writes if not w.allocations}
    touched = set(provider_ids.values()) | {r.rp_id for r in old if r.consumer in emptied}
    if generations is None:
        lock_ids = touched | {r.rp_id for r in old}
        generations = provider_bumps.lock_and_bump(conn, lock_ids, touched)
    _check(conn, writes, provider_ids, class_ids, old, assume_new)
    for consumer in cons.create_consumers(conn, new, last=last):
        consumers[consumer.uuid] = consumer

    for consumer_uuid in sorted({r.consumer for r in old}):
        at_commit(conn, _DELETE_ALLOCATIONS, {"uuid": consumer_uuid}, defer=last)
    now = utcnow()
    rows = [
        {
            "resource_provider_id": provider_ids[rp_uuid],
            "consumer_id": w.uuid,
            "resource_class_id": class_ids[rc],
            "used": amount,
            "created_at": now,
        }
        for w in writes
        for rp_uuid, resources in w.allocations.items()
        for rc, amount in resources.items()
    ]
    insert_at_commit(conn, _a, rows, defer=last)
    for _, consumer in sorted(consumers.items()):
        cons.save_consumer(conn, consumer, last=last)
    cons.delete_if_unused(conn, emptied, last=last)
    history_records.allocations_replaced(
        conn, writes, consumers, provider_ids, class_ids, old, generations
    )


def check_consumers(conn: sa.Connection, writes: list[ConsumerWrite]) -> None:
    """Lock the consumers of `writes` and refuse (409) a stale generation, writing
    nothing: a caller with more to do (the reshaper) takes the consumer locks first,
    as the lock order wants. `replace_in` later finds them already held."""
    writes = _merge(writes)
    existing = cons.lock_consumers(conn, [w.uuid for w in writes])
    for w in writes:
        _check_generation(w, existing.get(w.uuid))


def _merge(writes: list[ConsumerWrite]) -> list[ConsumerWrite]:
    """One write per consumer (the last wins), without empty resource maps, and
    amounts as ints (JSON's 3.0 is a valid integer)."""
    merged: dict[str, ConsumerWrite] = {}
    for w in writes:
        held = {rp: {rc: int(n) for rc, n in res.items()} for rp, res in w.allocations.items()}
        merged[w.uuid] = dataclasses.replace(
            w, allocations={rp: res for rp, res in held.items() if res}
        )
    return list(merged.values())


def _claim_consumers(
    conn: sa.Connection,
    writes: list[ConsumerWrite],
    type_ids: dict[str, int],
    *,
    assume_new: bool,
) -> tuple[dict[str, cons.Consumer], list[tuple[str, str, str, int | None]]]:
    """Lock existing consumers (none, when `assume_new`; sorted by uuid, so
    writers never deadlock on each other's consumers) and check generations; the
    existing ones with their new owner and type, and the rows of those to create
    (`cons.create_consumers`, once the write is checked). `type_ids`: the consumer
    types that exist; one named for the first time is made."""
    existing = {} if assume_new else cons.lock_consumers(conn, [w.uuid for w in writes])
    for w in writes:
        _check_generation(w, existing.get(w.uuid))
    result: dict[str, cons.Consumer] = {}
    new: list[tuple[str, str, str, int | None]] = []
    type_ids = dict(type_ids)
    for w in sorted(writes, key=lambda w: w.uuid):
        consumer = existing.get(w.uuid)
        if consumer is None and not w.allocations:
            continue  # nothing to remove, nobody to create
        type_id = None
        if w.consumer_type is not None:
            type_id = type_ids.get(w.consumer_type)
            if type_id is None:
                type_id = type_ids[w.consumer_type] = cons.consumer_type_id(conn, w.consumer_type)
        if consumer is None:
            new.append((w.uuid, w.project_id, w.user_id, type_id))
            continue
        consumer.project_id, consumer.user_id = w.project_id, w.user_id
        if type_id is not None:
            consumer.consumer_type_id = type_id
        result[w.uuid] = consumer
    return result, new


def _check_generation(w: ConsumerWrite, consumer: cons.Consumer | None) -> None:
    if not w.check_generation:
        return
    if consumer is None and w.generation is not None:
        raise ConcurrentUpdate(
            f"consumer generation conflict - expected null but got {w.generation}"
        )
    if consumer is not None and consumer.generation != w.generation:
        raise ConcurrentUpdate(
            f"consumer generation conflict - expected {consumer.generation} "
            f"but got {'null' if w.generation is None else w.generation}"
        )


def check_named(
    writes: list[ConsumerWrite], provider_ids: dict[str, int], class_ids: dict[str, int]
) -> None:
    """400 for a provider or a resource class the request names that does not exist."""
    for rp_uuid in (u for w in writes for u in w.allocations):
        if rp_uuid not in provider_ids:
            raise BadRequest(f"Allocation for resource provider '{rp_uuid}' that does not exist.")
    for w in writes:
        for name in (rc for res in w.allocations.values() for rc in res):
            if name not in class_ids:
                raise BadRequest(
                    f"Unable to allocate inventory for consumer {w.uuid}: "
                    f"No such resource class {name}."
                )


class _Held(NamedTuple):
    consumer: str
    rp_id: int
    rc_id: int
    used: int


def _current(conn: sa.Connection, consumer_uuids: list[str]) -> list[_Held]:
    """The allocations the consumers hold now (their rows are locked)."""
    return [_Held(*row) for row in conn.execute(_CURRENT, {"uuids": consumer_uuids})]


def _check(
    conn: sa.Connection,
    writes: list[ConsumerWrite],
    provider_ids: dict[str, int],
    class_ids: dict[str, int],
    old: list[_Held],
    assume_new: bool = False,
) -> None:
    """Inventory exists, min_unit/max_unit/step_size hold, and capacity is not
    exceeded, per (provider, class) of the new allocations. Reads usage after
    the provider rows are locked, in the write transaction (`_NotNew` when the
    consumers assumed new are known after all)."""
    keys = {
        (provider_ids[rp_uuid], class_ids[rc])
        for w in writes
        for rp_uuid, res in w.allocations.items()
        for rc in res
    }
    if not keys:
        return
    ids = sorted({k[0] for k in keys})
    if assume_new:
        uuids = [w.uuid for w in writes]
        found = conn.execute(_INVENTORY_OF_NEW, {"ids": ids, "uuids": uuids}).all()
        if not found or found[0].consumers_known:  # (none: the 409 may be the consumer's)
            raise _NotNew()
    else:
        found = conn.execute(_INVENTORY_OF, {"ids": ids}).all()
    inventory = {(row.resource_provider_id, row.resource_class_id): row for row in found}
    released: collections.Counter = collections.Counter()
    for held in old:
        released[(held.rp_id, held.rc_id)] += held.used
    judge(writes, provider_ids, class_ids, released, inventory)


def judge(
    writes: list[ConsumerWrite],
    provider_ids: dict[str, int],
    class_ids: dict[str, int],
    released: Mapping[tuple[int, int], int],
    inventory: Mapping[tuple[int, int], Any],
) -> None:
    """409 unless every (provider, class) of the new allocations has a sound
    inventory, each amount keeps its min_unit/max_unit/step_size, and capacity is
    not exceeded. `released`: what the consumers' old allocations give back per
    (provider id, class id); `inventory`: per (provider id, class id), an object
    with the inventory's columns and `used_now` (the usage before the write). The
    write path reads them in its transaction; a sandbox (ledger.sandbox) from its
    overlay: one rule for both."""
    wanted: collections.Counter = collections.Counter()
    for w in writes:
        for rp_uuid, res in w.allocations.items():
            for rc, amount in res.items():
                wanted[(provider_ids[rp_uuid], class_ids[rc])] += amount

    checked: set[tuple[int, int]] = set()  # (a batch names each of a few thousand often)
    for w in writes:
        for rp_uuid, res in w.allocations.items():
            for rc, amount in res.items():
                key = (provider_ids[rp_uuid], class_ids[rc])
                row = inventory.get(key)
                first = key not in checked
                if first and (row is None or stored_fault(row) is not None):
                    raise Conflict(  # (a row not written through the API)
                        f"Unable to allocate inventory: Inventory for '{rc}' on "
                        f"resource provider '{rp_uuid}' invalid."
                    )
                if amount < row.min_unit or amount > row.max_unit or amount % row.step_size != 0:
                    raise Conflict(
                        f"Unable to allocate inventory: Unable to create allocation for "
                        f"'{rc}' on resource provider '{rp_uuid}'. The requested amount "
                        f"would violate inventory constraints (min_unit {row.min_unit}, "
                        f"max_unit {row.max_unit}, step_size {row.step_size}; "
                        f"requested {amount})."
                    )
                if first:
                    _check_capacity(row, rc, rp_uuid, released[key], wanted[key])
                    checked.add(key)


def _check_capacity(row: sa.Row, rc: str, rp_uuid: str, released: int, wanted: int) -> None:
    """409 when the class's usage after the write passes its capacity and grows."""
    before = int(row.used_now)
    after = before - released + wanted
    limit = capacity(row.total, row.reserved, row.allocation_ratio)
    if after > limit and after > before:
        raise Conflict(
            f"Unable to allocate inventory: Unable to create allocation for "
            f"'{rc}' on resource provider '{rp_uuid}'. The requested amount "
            f"would exceed the capacity ({after} of {limit} in use after "
            f"this request)."
        )
    if after > limit:
        LOG.warning(
            "%s on provider %s stays over capacity (%d of %d) but the "
            "write reduces or keeps usage (was %d)",
            rc,
            rp_uuid,
            after,
            limit,
            before,
        )
