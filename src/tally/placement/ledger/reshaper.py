"""The reshaper: replace the inventories of several providers and the
allocations of several consumers in one transaction (POST /reshaper), typically
to move a class of inventory, and what is allocated from it, from a root
provider to a new child.

All or nothing, in one write transaction (run again from the start when it
loses a race the server resolves alone, as allocation writes are):

1. each provider named in the inventories exists (400) and is at the
   generation the client read (409); the new records make sense (400);
2. locks, in the order every writer takes them: the consumers (by uuid,
   refusing a stale consumer generation), then every provider involved (by
   id): those named anywhere and those the consumers hold allocations on now;
3. interim inventories: a provider with a non-empty new inventory gets the
   union of its old and new classes (the new amounts win), unguarded, so that
   allocations can land on new classes while the old ones still exist;
4. the allocations are replaced (`allocations.replace_in`), checked against
   the interim inventories (inventory present, min/max/step, capacity);
5. final inventories: exactly what was sent. Here the capacity guard runs on
   the END state: it judges each provider's change from its inventory before
   the reshape against the allocations after it. A class may end below its
   old capacity only if what is now allocated fits (under
   `over_capacity = refuse`; `allow` writes it with a warning, as upstream),
   and a class allocations still hold cannot be removed (both modes).

As upstream, a provider's generation moves once for each step that writes it
(interim inventory, allocations, final inventory), so clients see the same
generations after a reshape on either server.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from tally.db import schema as t
from tally.placement import errors as codes
from tally.placement.error_types import BadRequest, ConcurrentUpdate
from tally.placement.ledger import allocations
from tally.placement.ledger import inventory as inv
from tally.placement.ledger.common import lock_providers


@dataclasses.dataclass(frozen=True)
class InventoryChange:
    """The complete new inventory of one provider, and the generation the client read."""

    uuid: str
    generation: int
    records: list[inv.Record]


def reshape(
    engine: sa.Engine,
    changes: list[InventoryChange],
    writes: list[allocations.ConsumerWrite],
    rules: inv.Rules,
    retries: int = 10,
) -> None:
    """Apply `changes` and `writes` together, or nothing (see the module docstring)."""
    allocations.run_retrying(engine, lambda conn: _reshape(conn, changes, writes, rules), retries)


def _reshape(
    conn: sa.Connection,
    changes: list[InventoryChange],
    writes: list[allocations.ConsumerWrite],
    rules: inv.Rules,
) -> None:
    providers = _providers(conn, changes)
    for change in changes:
        for record in change.records:
            inv.check_record(change.uuid, record, rules, "reshape")

    allocations.check_consumers(conn, writes)
    lock_providers(conn, _involved(conn, providers, writes))
    providers = _providers(conn, changes)  # generations as they are under the locks
    _check_classes(conn, changes)

    before = {c.uuid: inv.records_in(conn, providers[c.uuid].id) for c in changes}
    for change in changes:
        if change.records:
            union = {**before[change.uuid], **_by_class(change)}
            inv.write_in(conn, providers[change.uuid], union, None)

    if writes:
        allocations.replace_in(conn, writes)

    providers = _providers(conn, changes, check=False)
    for change in changes:
        inv.write_in(
            conn, providers[change.uuid], _by_class(change), rules, baseline=before[change.uuid]
        )


def _by_class(change: InventoryChange) -> dict[str, inv.Record]:
    return {record.resource_class: record for record in change.records}


def _providers(
    conn: sa.Connection, changes: list[InventoryChange], check: bool = True
) -> dict[str, sa.Row]:
    """The rows of the providers whose inventories change, by uuid: 400 for one
    that does not exist, 409 for one the client read at another generation."""
    rp = t.resource_providers
    uuids = [c.uuid for c in changes]
    rows = {row.uuid: row for row in conn.execute(sa.select(rp).where(rp.c.uuid.in_(uuids)))}
    for change in changes if check else ():
        row = rows.get(change.uuid)
        if row is None:
            raise BadRequest(
                f"Resource provider {change.uuid} in inventories not found: "
                "no provider has that uuid",
                code=codes.RESOURCE_PROVIDER_NOT_FOUND,
            )
        if row.generation != change.generation:
            raise ConcurrentUpdate(
                f"resource provider generation conflict for provider {change.uuid}: "
                f"actual: {row.generation}, given: {change.generation}"
            )
    return rows


def _involved(
    conn: sa.Connection, providers: dict[str, sa.Row], writes: list[allocations.ConsumerWrite]
) -> list[int]:
    """Ids of every provider the reshape may write: those whose inventories
    change, those the new allocations name (400 for one that does not exist)
    and those the consumers hold allocations on now."""
    ids = {row.id for row in providers.values()}
    named = {rp_uuid for w in writes for rp_uuid in w.allocations}
    if named:
        rp = t.resource_providers
        found = dict(conn.execute(sa.select(rp.c.uuid, rp.c.id).where(rp.c.uuid.in_(named))).all())
        for w in writes:
            for rp_uuid in w.allocations:
                if rp_uuid not in found:
                    raise BadRequest(
                        f"Allocation for resource provider '{rp_uuid}' that does not exist."
                    )
        ids.update(found.values())
    if writes:
        a = t.allocations
        consumers = [w.uuid for w in writes]
        ids.update(
            conn.execute(
                sa.select(a.c.resource_provider_id).where(a.c.consumer_id.in_(consumers)).distinct()
            ).scalars()
        )
    return sorted(ids)


def _check_classes(conn: sa.Connection, changes: list[InventoryChange]) -> None:
    """400 naming the first resource class of the new inventories that does not exist."""
    wanted = {r.resource_class for c in changes for r in c.records}
    if not wanted:
        return
    rc = t.resource_classes
    known = set(conn.execute(sa.select(rc.c.name).where(rc.c.name.in_(wanted))).scalars())
    for change in changes:
        for record in change.records:
            if record.resource_class not in known:
                raise BadRequest(
                    f"Unable to reshape the inventory of resource provider {change.uuid}: "
                    f"No such resource class {record.resource_class}."
                )
