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
from tally.db.engine import is_sqlite
from tally.placement.ledger.common import utcnow
from tally.placement.ledger.errors import ConcurrentUpdate

# Owner recorded for consumers written before microversion 1.8, which could
# not name one (upstream's incomplete_consumer_project_id/_user_id default).
INCOMPLETE_ID = "00000000-0000-0000-0000-000000000000"
# How a consumer without a type is shown and filtered (1.38).
UNKNOWN_TYPE = "unknown"


@dataclasses.dataclass
class Consumer:
    id: int
    uuid: str
    project_id: str
    user_id: str
    generation: int
    consumer_type_id: int | None
    created: bool = False  # made by the current transaction


def lock_consumers(conn: sa.Connection, uuids: list[str]) -> dict[str, Consumer]:
    """The existing consumers among `uuids`, row-locked until commit (PostgreSQL)."""
    if not uuids:
        return {}
    c = t.consumers
    query = (
        sa.select(
            c.c.id, c.c.uuid, c.c.project_id, c.c.user_id, c.c.generation, c.c.consumer_type_id
        )
        .where(c.c.uuid.in_(sorted(set(uuids))))
        .order_by(c.c.uuid)
    )
    if not is_sqlite(conn):
        query = query.with_for_update()
    return {row.uuid: Consumer(**row._mapping) for row in conn.execute(query)}


def create_consumer(
    conn: sa.Connection,
    uuid: str,
    project_id: str,
    user_id: str,
    consumer_type_id: int | None,
) -> Consumer:
    """Insert a consumer at generation 0. A concurrent creator of the same uuid
    makes this raise IntegrityError (the caller retries the whole write)."""
    result = conn.execute(
        t.consumers.insert().values(
            uuid=uuid,
            project_id=project_id,
            user_id=user_id,
            generation=0,
            consumer_type_id=consumer_type_id,
            created_at=utcnow(),
        )
    )
    return Consumer(
        id=result.inserted_primary_key[0],
        uuid=uuid,
        project_id=project_id,
        user_id=user_id,
        generation=0,
        consumer_type_id=consumer_type_id,
        created=True,
    )


def save_consumer(conn: sa.Connection, consumer: Consumer) -> None:
    """Write owner and type, and bump the generation (compare-and-swap)."""
    c = t.consumers
    result = conn.execute(
        c.update()
        .where(c.c.id == consumer.id)
        .where(c.c.generation == consumer.generation)
        .values(
            project_id=consumer.project_id,
            user_id=consumer.user_id,
            consumer_type_id=consumer.consumer_type_id,
            generation=consumer.generation + 1,
            updated_at=utcnow(),
        )
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            f"consumer generation conflict for {consumer.uuid}: "
            "another request changed it, please retry"
        )
    consumer.generation += 1


def delete_if_unused(conn: sa.Connection, uuids: list[str] | set[str]) -> None:
    """Delete those of `uuids` that hold no allocations."""
    if not uuids:
        return
    c, a = t.consumers, t.allocations
    held = sa.select(a.c.consumer_id).where(a.c.consumer_id == c.c.uuid).exists()
    conn.execute(c.delete().where(c.c.uuid.in_(sorted(set(uuids)))).where(~held))


def consumer_type_id(conn: sa.Connection, name: str) -> int:
    """The id of consumer type `name`, created on first use. A concurrent
    creation raises IntegrityError; the caller retries the whole write."""
    ct = t.consumer_types
    found = conn.execute(sa.select(ct.c.id).where(ct.c.name == name)).scalar()
    if found is not None:
        return found
    result = conn.execute(ct.insert().values(name=name, created_at=utcnow()))
    return result.inserted_primary_key[0]


def consumer_type_names(conn: sa.Connection) -> dict[int | None, str]:
    """Every consumer type name by id; None (no type) reads as 'unknown'."""
    ct = t.consumer_types
    names: dict[int | None, str] = {
        row.id: row.name for row in conn.execute(sa.select(ct.c.id, ct.c.name))
    }
    names[None] = UNKNOWN_TYPE
    return names
