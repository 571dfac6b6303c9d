"""Where every provider change is named: the generation bumps (the one
compare-and-swap that guards a provider write, `bump_generation`, and the bumps of a
claim) note the providers they bump in the ledger journal, so a write that bumps a
provider cannot forget to tell the candidates index; the few changes that move no
generation (a provider created, re-parented or deleted, aggregates before 1.19,
usage released) are named by the history call of their write path, which comes here
(`changed`). Nothing else calls `journal.touch` (the architecture test); what a write
leaves unnamed the write helper derives as it commits (`journal._derive`).

The providers a claim touches are locked (in id order, so writers never deadlock)
and given their new generations before the claim reads usage (noted in the journal
as changes of usage only).

On PostgreSQL one statement locks and bumps (`UPDATE ... FROM (SELECT ... ORDER BY
id FOR UPDATE)`), and for a claim whose consumers are assumed new (no consumer lock
comes first) the same statement looks up the resource classes and consumer types
too. SQLite needs no lock (`BEGIN IMMEDIATE`); MySQL locks, then bumps each
provider by compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.placement.ledger.common import ids_by_names, lock_providers, swap_generation, utcnow


def changed(conn: sa.Connection, provider_ids: Iterable[int], *, usage_only: bool = False) -> None:
    """Name providers this write changed without bumping their generation (see
    the module docstring); `usage_only`: only their usage."""
    journal.touch(conn, provider_ids, usage_only=usage_only)


_BUMP_GENERATION = (
    t.resource_providers.update()
    .where(t.resource_providers.c.id == sa.bindparam("provider_id"))
    .where(t.resource_providers.c.generation == sa.bindparam("seen"))
    .values(generation=sa.bindparam("new_generation"), updated_at=sa.bindparam("now"))
)


def bump_generation(
    conn: sa.Connection, provider_id: int, seen: int, uuid: str, *, last: bool = False
) -> int:
    """Compare-and-swap the provider generation; the new generation, or 409
    `placement.concurrent_update` when someone else changed it since `seen`.
    `last`: the caller locked the provider row (so the swap holds) and nothing
    later in the transaction reads it: the bump goes with the COMMIT. The provider
    is noted in the journal as changed (more than its usage)."""
    params = {"provider_id": provider_id, "seen": seen, "new_generation": seen + 1, "now": utcnow()}
    conflict = (
        f"resource provider generation conflict for {uuid}: another thread updated it, please retry"
    )
    swap_generation(conn, _BUMP_GENERATION, params, last, conflict)
    journal.touch(conn, (provider_id,))
    return seen + 1


class GenerationMoved(Exception):
    """A provider's generation moved under a lock (the lock discipline broke): the
    caller runs the whole write again."""


_BUMP_LOCKED = (
    t.resource_providers.update()
    .where(in_bound_list(t.resource_providers.c.id, "ids"))
    .values(generation=t.resource_providers.c.generation + 1, updated_at=sa.bindparam("now"))
    .returning(t.resource_providers.c.id, t.resource_providers.c.generation)
)
_rp = t.resource_providers


def _locking_bump(key: sa.Column, param: str) -> sa.Update:
    """PostgreSQL: lock the providers whose `key` is in `param` (in id order, so
    writers never deadlock) and bump them, one statement."""
    locked = (
        sa.select(_rp.c.id)
        .where(in_bound_list(key, param))
        .order_by(_rp.c.id)
        .with_for_update()
        .subquery("locked")
    )
    return (
        _rp.update()
        .where(_rp.c.id == locked.c.id)
        .values(generation=_rp.c.generation + 1, updated_at=sa.bindparam("now"))
        .returning(_rp.c.id, _rp.c.uuid, _rp.c.generation)
    )


_LOCK_AND_BUMP = _locking_bump(_rp.c.id, "ids")
# Consumers assumed new (no consumer lock comes first): the providers named locked
# and bumped, with the classes and consumer types looked up, in one statement.
_bumped = _locking_bump(_rp.c.uuid, "uuids").cte("bumped")
_NAMED_AND_BUMPED = sa.union_all(
    sa.select(
        sa.literal_column("0").label("part"),
        _bumped.c.uuid.label("key"),
        _bumped.c.id,
        _bumped.c.generation,
    ),
    sa.select(
        sa.literal_column("1"), t.resource_classes.c.name, t.resource_classes.c.id, sa.null()
    ).where(in_bound_list(t.resource_classes.c.name, "classes")),
    sa.select(
        sa.literal_column("2"), t.consumer_types.c.name, t.consumer_types.c.id, sa.null()
    ).where(in_bound_list(t.consumer_types.c.name, "types")),
)
_GENERATIONS = (
    sa.select(t.resource_providers.c.id, t.resource_providers.c.generation)
    .where(in_bound_list(t.resource_providers.c.id, "ids"))
    .order_by(t.resource_providers.c.id)
)
_BUMP_LOCKED_PLAIN = (
    t.resource_providers.update()
    .where(in_bound_list(t.resource_providers.c.id, "ids"))
    .values(generation=t.resource_providers.c.generation + 1, updated_at=sa.bindparam("now"))
)


def look_up(
    conn: sa.Connection, providers: set[str], classes: set[str], types: set[str], *, bump: bool
) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[int, int] | None]:
    """`{uuid: id}` of the providers, `{name: id}` of the classes and of the consumer
    types; with `bump` on PostgreSQL the providers are locked and bumped by the
    same statement, and their new generations come fourth (else None)."""
    if bump and conn.dialect.name == "postgresql":
        return named_and_bumped(conn, providers, classes, types)
    found = ids_by_names(
        conn,
        (t.resource_providers, "uuid", providers),
        (t.resource_classes, "name", classes),
        (t.consumer_types, "name", types),
    )
    return found[0], found[1], found[2], None


def named_and_bumped(
    conn: sa.Connection, providers: set[str], classes: set[str], types: set[str]
) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[int, int]]:
    """`{uuid: id}` of the providers (locked, in id order, and bumped), `{name: id}`
    of the classes and of the consumer types, and the providers' new generations:
    one statement (PostgreSQL)."""
    params = {
        "uuids": sorted(providers),
        "classes": sorted(classes),
        "types": sorted(types),
        "now": utcnow(),
    }
    found: list[dict[str, int]] = [{}, {}, {}]
    generations: dict[int, int] = {}
    for part, key, row_id, generation in conn.execute(_NAMED_AND_BUMPED, params):
        found[int(part)][key] = row_id
        if generation is not None:
            generations[row_id] = generation
    journal.touch(conn, generations, usage_only=True)
    return found[0], found[1], found[2], generations


def lock_and_bump(conn: sa.Connection, lock_ids: set[int], bump_ids: set[int]) -> dict[int, int]:
    """Lock `lock_ids` (in id order) and bump `bump_ids`, a part of them; their new
    generations. On PostgreSQL one statement when they are the same providers."""
    if bump_ids and lock_ids == bump_ids and conn.dialect.name == "postgresql":
        rows = conn.execute(_LOCK_AND_BUMP, {"ids": sorted(bump_ids), "now": utcnow()})
        bumped = {row.id: row.generation for row in rows}
        journal.touch(conn, bumped, usage_only=True)
        return bumped
    lock_providers(conn, sorted(lock_ids))
    return _bump(conn, bump_ids)


def _bump(conn: sa.Connection, provider_ids: set[int]) -> dict[int, int]:
    """Bump the generation of each provider; their new generations. They are locked
    (or we are the only SQLite writer), so the compare-and-swap can only fail if
    something broke the lock discipline: then the whole write runs again."""
    bumped: dict[int, int] = {}
    if not provider_ids:
        return bumped
    if conn.dialect.update_returning:  # locked: one statement bumps them all
        rows = conn.execute(_BUMP_LOCKED, {"ids": sorted(provider_ids), "now": utcnow()})
        bumped = {row.id: row.generation for row in rows}
        journal.touch(conn, bumped, usage_only=True)
        return bumped
    # MySQL: read the generations, then one UPDATE for them all (whatever their number)
    seen = dict(conn.execute(_GENERATIONS, {"ids": sorted(provider_ids)}).all())
    moved = conn.execute(_BUMP_LOCKED_PLAIN, {"ids": sorted(seen), "now": utcnow()}).rowcount
    if moved != len(seen):
        raise GenerationMoved()
    bumped = {rp: generation + 1 for rp, generation in seen.items()}
    journal.touch(conn, bumped, usage_only=True)
    return bumped
