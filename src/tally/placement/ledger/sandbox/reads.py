"""What a sandbox reads of the live database (in short read transactions): the
generations of providers and consumers, inventory records, and who holds what on
some providers. The usage, traits and trees it reads from the index (patch.py)."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.transaction import transaction
from tally.placement.ledger.inventory_record import FIELDS, Record

_rp, _inv, _rc, _a, _c, _ct = (
    t.resource_providers,
    t.inventories,
    t.resource_classes,
    t.allocations,
    t.consumers,
    t.consumer_types,
)


def generations(engine: sa.Engine, uuids: Collection[str]) -> dict[str, int]:
    """The generation of each of these providers that exists."""
    if not uuids:
        return {}
    with transaction(engine) as conn:
        query = sa.select(_rp.c.uuid, _rp.c.generation)
        rows = conn.execute(
            query.where(in_bound_list(_rp.c.uuid, "uuids")), {"uuids": sorted(uuids)}
        )
        return dict(rows.all())


def consumer_generations(engine: sa.Engine, uuids: Collection[str]) -> dict[str, int]:
    """The generation of each of these consumers that exists."""
    if not uuids:
        return {}
    with transaction(engine) as conn:
        query = sa.select(_c.c.uuid, _c.c.generation)
        rows = conn.execute(
            query.where(in_bound_list(_c.c.uuid, "uuids")), {"uuids": sorted(uuids)}
        )
        return dict(rows.all())


def inventories(engine: sa.Engine, uuids: Collection[str]) -> dict[str, dict[str, Record]]:
    """The inventory records of these providers, by class name (in class id order)."""
    if not uuids:
        return {}
    found: dict[str, dict[str, Record]] = {}
    query = (
        sa.select(_rp.c.uuid, _rc.c.name, *(_inv.c[f] for f in FIELDS))
        .select_from(
            _inv.join(_rp, _rp.c.id == _inv.c.resource_provider_id).join(
                _rc, _rc.c.id == _inv.c.resource_class_id
            )
        )
        .order_by(_inv.c.resource_class_id)
    )
    with transaction(engine) as conn:
        rows = conn.execute(
            query.where(in_bound_list(_rp.c.uuid, "uuids")), {"uuids": sorted(uuids)}
        )
        for uuid, name, *amounts in rows:
            found.setdefault(uuid, {})[name] = Record(
                name, **dict(zip(FIELDS, amounts, strict=True))
            )
    return found


def holdings(engine: sa.Engine, uuids: Collection[str]) -> dict[str, dict[str, dict[str, int]]]:
    """Who holds what on these providers: consumer -> provider uuid -> class -> amount."""
    if not uuids:
        return {}
    found: dict[str, dict[str, dict[str, int]]] = {}
    query = sa.select(_a.c.consumer_id, _rp.c.uuid, _rc.c.name, _a.c.used).select_from(
        _a.join(_rp, _rp.c.id == _a.c.resource_provider_id).join(
            _rc, _rc.c.id == _a.c.resource_class_id
        )
    )
    with transaction(engine) as conn:
        rows = conn.execute(
            query.where(in_bound_list(_rp.c.uuid, "uuids")), {"uuids": sorted(uuids)}
        )
        for consumer, rp, rc, used in rows:
            held = found.setdefault(consumer, {}).setdefault(rp, {})
            held[rc] = held.get(rc, 0) + int(used)
    return found


def owners(engine: sa.Engine, uuids: Collection[str]) -> dict[str, tuple[str | None, str | None]]:
    """(consumer type name or None, project) of each of these consumers that exists."""
    if not uuids:
        return {}
    query = sa.select(_c.c.uuid, _ct.c.name, _c.c.project_id).select_from(
        _c.outerjoin(_ct, _ct.c.id == _c.c.consumer_type_id)
    )
    with transaction(engine) as conn:
        rows = conn.execute(
            query.where(in_bound_list(_c.c.uuid, "uuids")), {"uuids": sorted(uuids)}
        )
        return {uuid: (kind, project) for uuid, kind, project in rows}
