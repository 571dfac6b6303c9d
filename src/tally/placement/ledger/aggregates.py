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

from tally.db import schema as t
from tally.db.retry import run_retrying
from tally.db.transaction import at_commit, transaction
from tally.placement.error_types import ConcurrentUpdate, Conflict
from tally.placement.ledger import history_records
from tally.placement.ledger.common import named_or_linked, provider_row, utcnow
from tally.placement.ledger.provider_bumps import bump_generation

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
# The aggregates a write names that exist, and those the provider is in (`linked`).
_NAMED_OR_LINKED = named_or_linked(
    agg, agg.c.uuid, rpa.c.aggregate_id, "linked", agg.c.uuid, agg.c.id
).order_by(agg.c.id)
_DELETE_LINK = (
    rpa.delete()
    .where(rpa.c.resource_provider_id == sa.bindparam("provider_id"))
    .where(rpa.c.aggregate_id == sa.bindparam("aggregate_id"))
)
_INSERT_AGGREGATE = (  # (inline: its id is not fetched back)
    agg.insert().inline().values(uuid=sa.bindparam("uuid"), created_at=sa.bindparam("created_at"))
)
_LINK_BY_UUID = rpa.insert().from_select(
    ["resource_provider_id", "aggregate_id", "created_at"],
    sa.select(
        sa.bindparam("provider_id", type_=sa.Integer),
        agg.c.id,
        sa.bindparam("now", type_=sa.DateTime),
    ).where(agg.c.uuid == sa.bindparam("uuid")),
)


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

    def body(conn: sa.Connection) -> ProviderAggregates:
        return set_provider_aggregates_in(conn, uuid, wanted, bump=bump, last=True)

    # a concurrent writer created one of our aggregates first, or (MySQL) the two
    # deadlocked doing so: run it again
    return run_retrying(
        engine,
        body,
        retries=RETRIES,
        also=(sa.exc.IntegrityError,),
        gave_up=lambda: Conflict(
            f"Update conflict: could not set the aggregates of provider {uuid}"
        ),
    )


def set_provider_aggregates_in(
    conn: sa.Connection,
    uuid: str,
    wanted: Callable[[], Wanted],
    *,
    bump: bool,
    last: bool = False,
) -> ProviderAggregates:
    """The body of `set_provider_aggregates`, inside a write transaction the caller
    opened (`last`: nothing later in it reads the provider)."""
    provider = provider_row(conn, uuid, for_update=True)
    uuids, seen = wanted()
    if seen is not None and seen != provider.generation:
        raise ConcurrentUpdate(
            "Resource provider's generation already changed. "
            "Please update the generation and try again."
        )
    before = _replace(conn, provider.id, uuids, defer=last)
    generation = provider.generation
    if bump:
        generation = bump_generation(conn, provider.id, generation, uuid, last=last)
    history_records.aggregates_set(conn, provider, generation, set(before), set(uuids))
    return ProviderAggregates(generation, list(uuids))


def _replace(
    conn: sa.Connection, provider_id: int, uuids: list[str], *, defer: bool = True
) -> dict[str, int]:
    """Link the provider to exactly the aggregates `uuids`; those it had before.
    The provider is locked and (`defer`) nothing reads on: the changes go with the
    COMMIT (`engine.at_commit`), a new aggregate's row first, the links by uuid."""
    rows = conn.execute(_NAMED_OR_LINKED, {"provider_id": provider_id, "names": uuids}).all()
    existing = {row.uuid: row.id for row in rows if row.linked}
    known = {row.uuid for row in rows}
    for agg_uuid, agg_id in existing.items():
        if agg_uuid not in set(uuids):
            at_commit(
                conn,
                _DELETE_LINK,
                {"provider_id": provider_id, "aggregate_id": agg_id},
                defer=defer,
            )
    now = utcnow()
    for agg_uuid in dict.fromkeys(uuids):
        if agg_uuid in existing:
            continue
        if agg_uuid not in known:
            at_commit(conn, _INSERT_AGGREGATE, {"uuid": agg_uuid, "created_at": now}, defer=defer)
        at_commit(
            conn,
            _LINK_BY_UUID,
            {"provider_id": provider_id, "uuid": agg_uuid, "now": now},
            defer=defer,
        )
    return existing
