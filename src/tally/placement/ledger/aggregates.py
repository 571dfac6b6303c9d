"""The aggregates a provider belongs to.

An aggregate is only a uuid: the first provider that names it creates its row
(rows are never removed, as upstream). Two writers creating the same aggregate
on PostgreSQL collide on its unique uuid; the loser retries its whole
transaction, where the row is then found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.engine import transaction
from tally.placement.ledger import history
from tally.placement.ledger.common import bump_generation, provider_row, utcnow
from tally.placement.ledger.errors import ConcurrentUpdate, Conflict

RETRIES = 10

agg = t.placement_aggregates
rpa = t.resource_provider_aggregates


@dataclasses.dataclass(frozen=True)
class ProviderAggregates:
    generation: int
    aggregates: list[str]


# What a PUT asks for: (aggregate uuids, the generation the client saw or None).
Wanted = tuple[list[str], int | None]


_AGGREGATES_OF = (
    sa.select(agg.c.uuid, agg.c.id)
    .join(rpa, rpa.c.aggregate_id == agg.c.id)
    .where(rpa.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(agg.c.id)
)
_DELETE_LINKS = (
    rpa.delete()
    .where(rpa.c.resource_provider_id == sa.bindparam("provider_id"))
    .where(rpa.c.aggregate_id.in_(sa.bindparam("aggregate_ids", expanding=True)))
)
_KNOWN = sa.select(agg.c.uuid, agg.c.id).where(
    agg.c.uuid.in_(sa.bindparam("uuids", expanding=True))
)
_INSERT_AGGREGATE = agg.insert()
_INSERT_LINKS = rpa.insert()


def _aggregates_of(conn: sa.Connection, provider_id: int) -> dict[str, int]:
    """uuid -> internal id of the aggregates of a provider, oldest first."""
    rows = conn.execute(_AGGREGATES_OF, {"provider_id": provider_id})
    return {agg_uuid: agg_id for agg_uuid, agg_id in rows}


def provider_aggregates(engine: sa.Engine, uuid: str) -> ProviderAggregates:
    with transaction(engine) as conn:
        provider = provider_row(conn, uuid)
        return ProviderAggregates(provider.generation, list(_aggregates_of(conn, provider.id)))


def set_provider_aggregates(
    engine: sa.Engine, uuid: str, wanted: Callable[[], Wanted], *, bump: bool
) -> ProviderAggregates:
    """Replace the aggregates of a provider.

    `wanted` parses the request body; it is called once the provider is known
    to exist, because upstream answers 404 for an unknown provider whatever the
    body. A seen generation is compared with the provider's (409 when stale);
    `bump` (from 1.19) moves the generation even when nothing changed.
    """
    for _ in range(RETRIES):
        try:
            with transaction(engine, write=True) as conn:
                provider = provider_row(conn, uuid, for_update=True)
                uuids, seen = wanted()
                if seen is not None and seen != provider.generation:
                    raise ConcurrentUpdate(
                        "Resource provider's generation already changed. "
                        "Please update the generation and try again."
                    )
                before = _replace(conn, provider.id, uuids)
                journal.touch(conn, (provider.id,))
                generation = provider.generation
                if bump:
                    generation = bump_generation(conn, provider.id, generation, uuid)
                history.aggregates_set(conn, provider, generation, set(before), set(uuids))
                return ProviderAggregates(generation, list(uuids))
        except sa.exc.IntegrityError:
            continue  # a concurrent writer created one of our aggregates first
    raise Conflict(f"Update conflict: could not set the aggregates of provider {uuid}")


def _replace(conn: sa.Connection, provider_id: int, uuids: list[str]) -> dict[str, int]:
    """Link the provider to exactly the aggregates `uuids`; those it had before."""
    existing = _aggregates_of(conn, provider_id)
    gone = [agg_id for agg_uuid, agg_id in existing.items() if agg_uuid not in set(uuids)]
    if gone:
        conn.execute(_DELETE_LINKS, {"provider_id": provider_id, "aggregate_ids": gone})
    new = [u for u in dict.fromkeys(uuids) if u not in existing]
    if not new:
        return existing
    known = {row.uuid: row.id for row in conn.execute(_KNOWN, {"uuids": new})}
    now = utcnow()
    for agg_uuid in new:
        if agg_uuid not in known:
            result = conn.execute(_INSERT_AGGREGATE, {"uuid": agg_uuid, "created_at": now})
            known[agg_uuid] = result.inserted_primary_key[0]
    conn.execute(
        _INSERT_LINKS,
        [
            {"resource_provider_id": provider_id, "aggregate_id": known[u], "created_at": now}
            for u in new
        ],
    )
    return existing
