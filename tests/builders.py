"""Builders that put rows straight into a database, for tests that need state
without going through the endpoints under test."""

from __future__ import annotations

import uuid as uuidlib

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger.common import provider_row, utcnow


def make_provider(engine: sa.Engine, name: str | None = None) -> str:
    """A root provider at generation 0; its uuid."""
    uuid = str(uuidlib.uuid4())
    with transaction(engine, write=True) as conn:
        rp = t.resource_providers
        new_id = conn.execute(
            rp.insert().values(uuid=uuid, name=name or uuid, generation=0, created_at=utcnow())
        ).inserted_primary_key[0]
        conn.execute(rp.update().where(rp.c.id == new_id).values(root_provider_id=new_id))
    return uuid


def provider_with_inventory(engine: sa.Engine, **inventory: int | dict) -> str:
    """A root provider with inventory: `VCPU=8` or `DISK_GB={"total": 100, "step_size": 10}`."""
    rp_uuid = make_provider(engine)
    with transaction(engine, write=True) as conn:
        rp_id = provider_row(conn, rp_uuid).id
        for rc, spec in inventory.items():
            spec = spec if isinstance(spec, dict) else {"total": spec}
            rc_id = conn.execute(
                sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == rc)
            ).scalar_one()
            row = {"reserved": 0, "min_unit": 1, "step_size": 1, "allocation_ratio": 1.0}
            row.update(spec)
            row.setdefault("max_unit", row["total"])
            conn.execute(
                t.inventories.insert().values(
                    resource_provider_id=rp_id, resource_class_id=rc_id, **row
                )
            )
    return rp_uuid


def allocate(
    conn: sa.Connection,
    provider: str,
    resources: dict[str, int],
    consumer: str | None = None,
    project: str | None = "proj-a",
    consumer_type: str | None = "INSTANCE",
) -> str:
    """Allocations of one consumer on one provider, written directly (no capacity
    checks); `project=None` leaves no consumers row, as for consumers older than
    the consumers table."""
    consumer = consumer or str(uuidlib.uuid4())
    rp_id = provider_row(conn, provider).id
    if project is not None:
        type_id = None
        if consumer_type:
            ct = t.consumer_types
            type_id = conn.execute(
                sa.select(ct.c.id).where(ct.c.name == consumer_type)
            ).scalar_one_or_none()
            if type_id is None:
                inserted = conn.execute(ct.insert().values(name=consumer_type))
                type_id = inserted.inserted_primary_key[0]
        conn.execute(
            t.consumers.insert().values(
                uuid=consumer,
                project_id=project,
                user_id="user",
                generation=1,
                consumer_type_id=type_id,
            )
        )
    names = {row.name: row.id for row in conn.execute(sa.select(t.resource_classes))}
    for rc, used in resources.items():
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=rp_id,
                consumer_id=consumer,
                resource_class_id=names[rc],
                used=used,
            )
        )
    return consumer
