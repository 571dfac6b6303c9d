"""Consumers: the owners of allocations.

A consumer row exists exactly while the consumer holds allocations: the
allocation write that gives it its first allocation creates it, and the write
(or DELETE) that removes its last one deletes it. Its generation guards
concurrent rewrites of its allocations (checked from microversion 1.28).

Lock order, shared by every writer that touches consumers: consumer rows
first (sorted by uuid), then provider rows (sorted by id).
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.engine import is_sqlite
from tally.db.transaction import at_commit, insert_at_commit
from tally.placement.ledger.common import swap_generation, utcnow

# Owner recorded for consumers written before microversion 1.8, which could
# not name one (upstream's incomplete_consumer_project_id/_user_id default).
INCOMPLETE_ID = "00000000-0000-0000-0000-000000000000"
# How a consumer without a type is shown and filtered (1.38).
UNKNOWN_TYPE = "unknown"


@dataclasses.dataclass
class Consumer:
    id: int | None  # (None: inserted by this transaction, its id not read)
    uuid: str
    project_id: str
    user_id: str
    generation: int
    consumer_type_id: int | None
    created: bool = False  # made by the current transaction
    saved: bool = False  # its row already holds what `save_consumer` would write


_c = t.consumers
_CONSUMERS = (
    sa.select(
        _c.c.id, _c.c.uuid, _c.c.project_id, _c.c.user_id, _c.c.generation, _c.c.consumer_type_id
    )
    .where(in_bound_list(_c.c.uuid, "uuids"))
    .order_by(_c.c.uuid)
)
_CONSUMERS_LOCKED = _CONSUMERS.with_for_update()
_SAVE_CONSUMER = (
    _c.update()
    .where(_c.c.id == sa.bindparam("consumer_id"))
    .where(_c.c.generation == sa.bindparam("seen"))
    .values(
        project_id=sa.bindparam("project_id"),
        user_id=sa.bindparam("user_id"),
        consumer_type_id=sa.bindparam("consumer_type_id"),
        generation=sa.bindparam("new_generation"),
        updated_at=sa.bindparam("now"),
    )
)
_held = sa.select(t.allocations.c.consumer_id).where(t.allocations.c.consumer_id == _c.c.uuid)
_DELETE_UNUSED = _c.delete().where(_c.c.uuid == sa.bindparam("uuid")).where(~_held.exists())
_TYPE_ID = sa.select(t.consumer_types.c.id).where(t.consumer_types.c.name == sa.bindparam("name"))
_INSERT_TYPE = t.consumer_types.insert()
_TYPE_NAMES = sa.select(t.consumer_types.c.id, t.consumer_types.c.name)


def lock_consumers(conn: sa.Connection, uuids: list[str]) -> dict[str, Consumer]:
    """The existing consumers among `uuids`, row-locked until commit (PostgreSQL)."""
    if not uuids:
        return {}
    query = _CONSUMERS if is_sqlite(conn) else _CONSUMERS_LOCKED
    return {row[1]: Consumer(*row) for row in conn.execute(query, {"uuids": sorted(set(uuids))})}


def create_consumers(
    conn: sa.Connection, new: list[tuple[str, str, str, int | None]], *, last: bool = False
) -> list[Consumer]:
    """Insert consumers `(uuid, project_id, user_id, consumer_type_id)`, in that
    order, as `save_consumer` would leave them (generation 1): each comes back at
    generation 0, and its `save_consumer` then only counts. With `last` (nothing
    later in the transaction reads them) they are written as it commits
    (`engine.insert_at_commit`). A concurrent creator of the same uuid makes the
    insert, or the commit, raise IntegrityError (the caller retries the whole write)."""
    now = utcnow()
    rows = [
        {
            "uuid": uuid,
            "project_id": project_id,
            "user_id": user_id,
            "generation": 1,
            "consumer_type_id": type_id,
            "created_at": now,
            "updated_at": now,
        }
        for uuid, project_id, user_id, type_id in new
    ]
    insert_at_commit(conn, _c, rows, defer=last)
    return [
        Consumer(
            id=None,
            uuid=uuid,
            project_id=project_id,
            user_id=user_id,
            generation=0,
            consumer_type_id=type_id,
            created=True,
            saved=True,
        )
        for uuid, project_id, user_id, type_id in new
    ]


def save_consumer(conn: sa.Connection, consumer: Consumer, *, last: bool = False) -> None:
    """Write owner and type, and bump the generation (compare-and-swap; with
    `last`, as the transaction commits: the row is locked, so the swap holds)."""
    if consumer.saved:  # just inserted as this would leave it
        consumer.saved = False
        consumer.generation += 1
        return
    params = {
        "consumer_id": consumer.id,
        "seen": consumer.generation,
        "project_id": consumer.project_id,
        "user_id": consumer.user_id,
        "consumer_type_id": consumer.consumer_type_id,
        "new_generation": consumer.generation + 1,
        "now": utcnow(),
    }
    conflict = (
        f"consumer generation conflict for {consumer.uuid}: "
        "another request changed it, please retry"
    )
    swap_generation(conn, _SAVE_CONSUMER, params, last, conflict)
    consumer.generation += 1


def delete_if_unused(
    conn: sa.Connection, uuids: list[str] | set[str], *, last: bool = False
) -> None:
    """Delete those of `uuids` that hold no allocations (with `last`, as the
    transaction commits)."""
    for uuid in sorted(set(uuids)):
        at_commit(conn, _DELETE_UNUSED, {"uuid": uuid}, defer=last)


def consumer_type_id(conn: sa.Connection, name: str) -> int:
    """The id of consumer type `name`, created on first use. A concurrent
    creation raises IntegrityError; the caller retries the whole write."""
    found = conn.execute(_TYPE_ID, {"name": name}).scalar()
    if found is not None:
        return found
    result = conn.execute(_INSERT_TYPE, {"name": name, "created_at": utcnow()})
    return result.inserted_primary_key[0]


def consumer_type_names(conn: sa.Connection) -> dict[int | None, str]:
    """Every consumer type name by id; None (no type) reads as 'unknown'."""
    names: dict[int | None, str] = {row.id: row.name for row in conn.execute(_TYPE_NAMES)}
    names[None] = UNKNOWN_TYPE
    return names
