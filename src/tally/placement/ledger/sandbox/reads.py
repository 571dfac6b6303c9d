"""What a sandbox reads of the live database (in short read transactions): the
generations of providers and consumers, inventory records, the providers of
trees, who holds what on some providers. The usage, traits and trees it reads
from the index (patch.py).

`Reader` reads them for the steps of one request, each once and in batches, and
says at which version of the ledger journal it read (`journal.current`): a step
judged over the index at version V may use what was read at V or before (a commit
then finds whatever moved since, in the generations), never after (a generation
read after V could hide a change the step did not see: changes.py checks)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.transaction import transaction
from tally.placement.ledger import consumers as cons
from tally.placement.ledger.inventory_record import FIELDS, Record

_rp, _inv, _rc, _a, _c, _ct = (
    t.resource_providers,
    t.inventories,
    t.resource_classes,
    t.allocations,
    t.consumers,
    t.consumer_types,
)
_root = _rp.alias("root")


@dataclasses.dataclass(frozen=True)
class Held:
    """A live consumer: its allocations (provider uuid -> class -> amount, as
    written), owner, type and generation."""

    allocations: dict[str, dict[str, int]]
    project_id: str
    user_id: str
    consumer_type: str
    generation: int


@dataclasses.dataclass(frozen=True)
class Known:
    """A live provider: its generation and inventory records by class name (in
    class id order), its root's uuid and its name."""

    generation: int
    records: dict[str, Record]
    root: str
    name: str


_PROVIDERS = sa.select(
    _rp.c.uuid, _rp.c.generation, _rp.c.name, _root.c.uuid.label("root")
).select_from(_rp.join(_root, _root.c.id == _rp.c.root_provider_id))
_RECORDS = (
    sa.select(_rp.c.uuid, _rc.c.name, *(_inv.c[f] for f in FIELDS))
    .select_from(
        _inv.join(_rp, _rp.c.id == _inv.c.resource_provider_id).join(
            _rc, _rc.c.id == _inv.c.resource_class_id
        )
    )
    .order_by(_inv.c.resource_class_id)
)
_CONSUMERS = sa.select(
    _c.c.uuid, _c.c.generation, _c.c.project_id, _c.c.user_id, _ct.c.name
).select_from(_c.outerjoin(_ct, _ct.c.id == _c.c.consumer_type_id))
_ALLOCATIONS = (
    sa.select(_a.c.consumer_id, _rp.c.uuid, _rc.c.name, _a.c.used)
    .select_from(
        _a.join(_rp, _rp.c.id == _a.c.resource_provider_id).join(
            _rc, _rc.c.id == _a.c.resource_class_id
        )
    )
    .order_by(_a.c.id)  # as written: the same order on every backend
)


class Reader:
    """The live database as one request's steps read it (each thing once)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.consumers: dict[str, Held | None] = {}  # (None: there is none)
        self.providers: dict[str, Known | None] = {}
        self.trees: dict[str, set[str]] = {}  # root uuid -> its providers' uuids

    def load_consumers(self, uuids: Iterable[str]) -> int | None:
        """Read the consumers not read yet; the journal's version they were read
        at (None: nothing to read)."""
        wanted = sorted(set(uuids) - self.consumers.keys())
        if not wanted:
            return None
        found: dict[str, Held] = {}
        with transaction(self.engine) as conn:
            rows = conn.execute(
                _CONSUMERS.where(in_bound_list(_c.c.uuid, "uuids")), {"uuids": wanted}
            )
            for uuid, generation, project, user, kind in rows:
                found[uuid] = Held({}, project, user, kind or cons.UNKNOWN_TYPE, generation)
            if found:
                rows = conn.execute(
                    _ALLOCATIONS.where(in_bound_list(_a.c.consumer_id, "uuids")),
                    {"uuids": sorted(found)},
                )
                for consumer, rp, rc, used in rows:
                    held = found[consumer].allocations.setdefault(rp, {})
                    held[rc] = held.get(rc, 0) + int(used)
            version = journal.current(conn)
        for uuid in wanted:
            self.consumers[uuid] = found.get(uuid)
        return version

    def load_providers(self, uuids: Iterable[str] = (), roots: Iterable[str] = ()) -> int | None:
        """Read the providers and the trees (by root uuid) not read yet; the
        journal's version they were read at (None: nothing to read)."""
        wanted = sorted(set(uuids) - self.providers.keys())
        trees = sorted(set(roots) - self.trees.keys())
        if not wanted and not trees:
            return None
        found: dict[str, Known] = {}
        with transaction(self.engine) as conn:
            conditions, params = [], {}
            if wanted:
                conditions.append(in_bound_list(_rp.c.uuid, "uuids"))
                params["uuids"] = wanted
            if trees:
                conditions.append(in_bound_list(_root.c.uuid, "roots"))
                params["roots"] = trees
            for uuid, generation, name, root in conn.execute(
                _PROVIDERS.where(sa.or_(*conditions)), params
            ):
                found[uuid] = Known(generation, {}, root, name)
            if found:
                rows = conn.execute(
                    _RECORDS.where(in_bound_list(_rp.c.uuid, "found")), {"found": sorted(found)}
                )
                for uuid, name, *amounts in rows:
                    found[uuid].records[name] = Record(
                        name, **dict(zip(FIELDS, amounts, strict=True))
                    )
            version = journal.current(conn)
        for uuid in wanted:
            self.providers[uuid] = found.get(uuid)
        for root in trees:
            self.trees[root] = set()
        for uuid, known in found.items():
            self.providers[uuid] = known
            if known.root in self.trees and known.root in trees:
                self.trees[known.root].add(uuid)
        return version

    def generation(self, uuid: str) -> int | None:
        known = self.providers.get(uuid)
        return None if known is None else known.generation


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


def name_taken(engine: sa.Engine, name: str) -> str | None:
    """The uuid of the live provider named `name` (compared by the database, in its
    collation, as the write compares it), or None."""
    with transaction(engine) as conn:
        return conn.execute(sa.select(_rp.c.uuid).where(_rp.c.name == name)).scalar()


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
