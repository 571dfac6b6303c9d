"""Traits (standard ones synced at start from os-traits, CUSTOM_* added by
operators) and the set of traits of each provider.

Deleting a trait and giving it to a provider can race on PostgreSQL; the
delete locks the trait row and a provider write share-locks the rows of the
traits it sets, so one of them always sees the other's committed result.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.retry import retrying
from tally.db.transaction import at_commit, insert_at_commit, transaction
from tally.placement.error_types import BadRequest, ConcurrentUpdate, Conflict, NotFound
from tally.placement.ledger import history_records
from tally.placement.ledger.common import named_or_linked, provider_row, row_by_name, utcnow
from tally.placement.ledger.provider_bumps import bump_generation

CUSTOM_PREFIX = "CUSTOM_"

tr = t.traits
rpt = t.resource_provider_traits


@dataclasses.dataclass(frozen=True)
class Trait:
    id: int
    name: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


@dataclasses.dataclass(frozen=True)
class ProviderTraits:
    generation: int
    traits: list[Trait]


def _from_row(row: sa.Row) -> Trait:
    return Trait(row.id, row.name, row.created_at, row.updated_at)


def _find(conn: sa.Connection, name: str, *, for_update: bool = False) -> Trait | None:
    row = row_by_name(conn, tr, name, for_update=for_update)
    return _from_row(row) if row is not None else None


def _get(conn: sa.Connection, name: str, *, for_update: bool = False) -> Trait:
    found = _find(conn, name, for_update=for_update)
    if found is None:
        raise NotFound(f"No such trait(s): {name}.")
    return found


def list_traits(
    engine: sa.Engine,
    *,
    names: list[str] | None = None,
    prefix: str | None = None,
    associated: bool | None = None,
) -> list[Trait]:
    """Traits by name (`names`, `prefix`) and by whether a provider has them."""
    query = sa.select(tr).order_by(tr.c.name)
    if names is not None:
        query = query.where(tr.c.name.in_(names))
    if prefix is not None:
        query = query.where(tr.c.name.startswith(prefix, autoescape=True))
    if associated is not None:
        used = sa.exists().where(rpt.c.trait_id == tr.c.id)
        query = query.where(used if associated else ~used)
    with transaction(engine) as conn:
        return [_from_row(row) for row in conn.execute(query)]


def get_trait(engine: sa.Engine, name: str) -> Trait:
    with transaction(engine) as conn:
        return _get(conn, name)


@retrying
def ensure_trait(engine: sa.Engine, name: str) -> tuple[Trait, bool]:
    """Create the custom trait `name` unless it exists; `(trait, created)`."""
    try:
        with transaction(engine, write=True) as conn:
            existing = _find(conn, name)
            if existing is not None:
                return existing, False
            now = utcnow()
            new_id = conn.execute(
                tr.insert().values(name=name, created_at=now)
            ).inserted_primary_key[0]
            return Trait(new_id, name, now, None), True
    except sa.exc.IntegrityError:
        # Someone created it between our look and our insert: it exists now.
        return get_trait(engine, name), False


@retrying
def delete_trait(engine: sa.Engine, name: str) -> None:
    """Delete a custom trait no provider has: standard -> 400, in use -> 409."""
    with transaction(engine, write=True) as conn:
        trait = _get(conn, name, for_update=True)
        if not name.startswith(CUSTOM_PREFIX):
            raise BadRequest(f"Cannot delete standard trait {name}.")
        in_use = conn.execute(sa.select(rpt.c.trait_id).where(rpt.c.trait_id == trait.id).limit(1))
        if in_use.first() is not None:
            raise Conflict(f"The trait {name} is in use by a resource provider.")
        conn.execute(tr.delete().where(tr.c.id == trait.id))


_TRAITS_OF = (
    sa.select(tr)
    .join(rpt, rpt.c.trait_id == tr.c.id)
    .where(rpt.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(tr.c.name)
)
_WANTED = sa.select(tr).where(in_bound_list(tr.c.name, "names")).order_by(tr.c.name)
_WANTED_LOCKED = _WANTED.with_for_update(read=True)
# A write reads, in one statement, the traits it names and those the provider has
# (`held`); on PostgreSQL their rows share-locked (see the module docstring).
_NAMED_OR_HELD = named_or_linked(tr, tr.c.name, rpt.c.trait_id, "held", *tr.c).order_by(tr.c.name)
_NAMED_OR_HELD_LOCKED = _NAMED_OR_HELD.with_for_update(read=True, of=tr)
_DELETE_TRAIT = (
    rpt.delete()
    .where(rpt.c.resource_provider_id == sa.bindparam("provider_id"))
    .where(rpt.c.trait_id == sa.bindparam("trait_id"))
)


def _traits_of(conn: sa.Connection, provider_id: int) -> list[Trait]:
    return [_from_row(row) for row in conn.execute(_TRAITS_OF, {"provider_id": provider_id})]


def _named_and_held(
    conn: sa.Connection, provider_id: int, names: set[str]
) -> tuple[list[Trait], list[Trait]]:
    """The traits of `names` that exist, and those the provider has (by name),
    read in one statement; the first share-locked (in it on PostgreSQL, just
    before on MySQL, whose MariaDB cannot lock one table of a join)."""
    dialect = conn.dialect.name
    if dialect == "mysql":
        conn.execute(_WANTED_LOCKED, {"names": sorted(names)}).all()
    query = _NAMED_OR_HELD_LOCKED if dialect == "postgresql" else _NAMED_OR_HELD
    rows = conn.execute(query, {"provider_id": provider_id, "names": sorted(names)}).all()
    named = [_from_row(row) for row in rows if row.name in names]
    held = [_from_row(row) for row in rows if row.held]
    return named, held


def provider_traits(engine: sa.Engine, uuid: str) -> ProviderTraits:
    with transaction(engine) as conn:
        provider = provider_row(conn, uuid)
        return ProviderTraits(provider.generation, _traits_of(conn, provider.id))


@retrying
def set_provider_traits(
    engine: sa.Engine, uuid: str, names: list[str], generation: int | None
) -> ProviderTraits:
    """Replace the traits of a provider. `generation` is what the client last
    saw (None: take the current one, as DELETE does). The generation moves
    only when the set changes."""
    with transaction(engine, write=True) as conn:
        return set_provider_traits_in(conn, uuid, names, generation, last=True)


def set_provider_traits_in(
    conn: sa.Connection,
    uuid: str,
    names: list[str],
    generation: int | None,
    *,
    last: bool = False,
) -> ProviderTraits:
    """The body of `set_provider_traits`, inside a write transaction the caller
    opened (`last`: nothing later in it reads the provider, its writes may go with
    the COMMIT)."""
    provider = provider_row(conn, uuid, for_update=True)
    if generation is not None and generation != provider.generation:
        raise ConcurrentUpdate(
            "Resource provider's generation already changed. "
            "Please update the generation and try again."
        )
    wanted, current = _named_and_held(conn, provider.id, set(names))
    missing = set(names) - {trait.name for trait in wanted}
    if missing:
        raise BadRequest(f"No such trait {', '.join(sorted(missing))}")
    have = {trait.id for trait in current}
    want = {trait.id for trait in wanted}
    if have == want:
        return ProviderTraits(provider.generation, wanted)
    # the provider is locked: when nothing reads on, the changes go with the COMMIT
    for trait_id in sorted(have - want):
        params = {"provider_id": provider.id, "trait_id": trait_id}
        at_commit(conn, _DELETE_TRAIT, params, defer=last)
    now = utcnow()
    insert_at_commit(
        conn,
        rpt,
        [
            {"resource_provider_id": provider.id, "trait_id": trait_id, "created_at": now}
            for trait_id in sorted(want - have)
        ],
        defer=last,
    )
    new_generation = bump_generation(conn, provider.id, provider.generation, uuid, last=last)
    history_records.traits_set(
        conn,
        provider,
        new_generation,
        {trait.name for trait in current},
        {trait.name for trait in wanted},
    )
    return ProviderTraits(new_generation, wanted)
