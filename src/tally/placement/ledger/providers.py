"""Resource providers: create, read, rename, re-parent, delete, and the
provider list (its filters are in `provider_filters`).

Trees: every provider row carries `root_provider_id` (its own id for a root)
and `parent_provider_id`, so a whole tree is one indexed lookup. Re-parenting
moves a subtree and rewrites the root of each provider in it.

A rename or re-parent does not change the provider generation (as upstream:
the generation guards inventories, allocations, traits and aggregates).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable
from operator import itemgetter
from typing import NamedTuple, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tally.db import schema as t
from tally.db import tree_rules
from tally.db.bound_lists import IN_LIST_MAX, among
from tally.db.engine import is_sqlite
from tally.db.retry import retrying, run_retrying
from tally.db.transaction import transaction
from tally.placement.error_types import (
    BadRequest,
    CannotDeleteParent,
    ConcurrentUpdate,
    DuplicateName,
    NotFound,
    ParentLoopFound,
    ProviderInUse,
)
from tally.placement.ledger import history_records, provider_listing
from tally.placement.ledger.candidates import view as views
from tally.placement.ledger.candidates.answer_cache import ListingParts
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.common import (
    has_rows,
    locking,
    newest_stamp,
    provider_row,
    utcnow,
)
from tally.placement.ledger.provider_filters import ProviderFilter, filter_conditions

_rp = t.resource_providers
RETRIES = 10  # runs of a provider update the database aborted to break a deadlock


class Provider(NamedTuple):
    """One provider as the API shows it (a tuple: listings build thousands)."""

    id: int
    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


class _Unset:
    """Marks "parent_provider_uuid was not in the request" (None means un-parent)."""


UNSET = _Unset()


# --- reading ---------------------------------------------------------------


# Built once: an alias of a table costs more to set up than a small query
# costs to run (its columns are copied), and the statements stay immutable.
_RP, _PARENT, _ROOT = (_rp.alias(name) for name in ("rp", "parent", "root"))
_WITH_PARENT_AND_ROOT = _RP.outerjoin(_PARENT, _RP.c.parent_provider_id == _PARENT.c.id).outerjoin(
    _ROOT, _RP.c.root_provider_id == _ROOT.c.id
)
_LISTING = sa.select(
    _RP.c.id,
    _RP.c.uuid,
    _RP.c.name,
    _RP.c.generation,
    _PARENT.c.uuid,
    sa.func.coalesce(_ROOT.c.uuid, _RP.c.uuid),
    sa.func.coalesce(_RP.c.updated_at, _RP.c.created_at, type_=sa.DateTime),  # as PROVIDER_STAMP
).select_from(_WITH_PARENT_AND_ROOT)


def _provider_select() -> tuple[sa.Select, sa.Alias]:
    rp, parent, root = _RP, _PARENT, _ROOT
    query = sa.select(
        rp.c.id,
        rp.c.uuid,
        rp.c.name,
        rp.c.generation,
        parent.c.uuid.label("parent_provider_uuid"),
        root.c.uuid.label("root_provider_uuid"),
        rp.c.created_at,
        rp.c.updated_at,
    ).select_from(_WITH_PARENT_AND_ROOT)
    return query, rp


def _to_provider(row: sa.Row) -> Provider:
    rp_id, uuid, name, generation, parent, root, created_at, updated_at = row
    return Provider(rp_id, uuid, name, generation, parent, root or uuid, created_at, updated_at)


def _load(conn: sa.Connection, uuid: str, missing: str | None = None) -> Provider:
    query, rp = _provider_select()
    row = conn.execute(query.where(rp.c.uuid == uuid)).first()
    if row is None:
        raise NotFound(missing or f"No resource provider with uuid {uuid} found")
    return _to_provider(row)


def get_provider(engine: sa.Engine, uuid: str) -> Provider:
    with transaction(engine) as conn:
        return _load(conn, uuid)


def list_providers(engine: sa.Engine, filters: ProviderFilter) -> list[Provider]:
    with transaction(engine) as conn:
        query, rp = _provider_select()
        conditions = filter_conditions(conn, rp.c, filters)
        if conditions is None:
            return []
        rows = conn.execute(query.where(*conditions).order_by(rp.c.id)).all()
    return [_to_provider(row) for row in rows]


class Listing(NamedTuple):
    """The body parts of `GET /resource_providers`: each provider's JSON as
    written by a `PartWriter`, in id order, and the newest of their
    last-modified times."""

    parts: list[bytes]
    last_modified: dt.datetime | None


class PartWriter(Protocol):
    """Writes one provider of a listing as JSON, from a row `(id, uuid, name,
    generation, parent uuid or None, root uuid, stamp)` (`stamp` is the driver's
    raw value); `key` names what else the part depends on (the request's
    microversion and base URL): parts are kept per key."""

    key: Hashable

    def __call__(self, row: tuple) -> bytes: ...


def list_provider_parts(
    engine: sa.Engine, filters: ProviderFilter, write: PartWriter, index: Index | None = None
) -> Listing:
    """The providers matching the filters as listing parts. With an index that
    holds every provider, the matching ones are worked out on it
    (`provider_listing`) and each one's part is the one kept since it last
    changed, written from its row (read by id) when none is; else one query
    (the same filters and joins), each part written anew."""
    if index is not None and provider_listing.served(filters):
        chosen = None
        with views.of(index, engine) as view:
            if view is not None and view.lists_every_provider():
                chosen = view.kept().listings, provider_listing.matching(view, filters)
        if chosen is not None:
            return _from_kept(engine, *chosen, write)
    with transaction(engine) as conn:
        conditions = filter_conditions(conn, _RP.c, filters)
        rows = [] if conditions is None else _listing_rows(conn, conditions)
    return Listing([write(row) for row in rows], newest_stamp(engine, map(itemgetter(6), rows)))


def _from_kept(engine: sa.Engine, kept: ListingParts, ids: list[int], write: PartWriter) -> Listing:
    """The parts of providers `ids`: those kept, the others written from their
    rows and kept (a provider deleted since the index chose it is left out)."""
    parts, stamps, epoch = kept.lookup(write.key, ids)
    if None not in parts:
        return Listing(parts, newest_stamp(engine, stamps))  # type: ignore[arg-type]
    missing = [rp for rp, part in zip(ids, parts, strict=True) if part is None]
    with transaction(engine) as conn:
        rows = _rows_by_id(conn, missing)
    found = {row[0]: (write(row), row[6]) for row in rows}
    kept.keep(write.key, epoch, found)
    for i, rp in enumerate(ids):
        if parts[i] is None and rp in found:
            parts[i] = found[rp][0]
    stamps += [stamp for _, stamp in found.values()]
    return Listing([part for part in parts if part is not None], newest_stamp(engine, stamps))


def _rows_by_id(conn: sa.Connection, ids: list[int]) -> list[tuple]:
    picked = among(_RP.c.id, ids, conn.dialect.name)
    if picked is None:  # (MySQL, a list longer than it takes: in pieces)
        pieces = [ids[start : start + IN_LIST_MAX] for start in range(0, len(ids), IN_LIST_MAX)]
        return [row for piece in pieces for row in _rows_by_id(conn, piece)]
    return _listing_rows(conn, [picked])


def _listing_rows(conn: sa.Connection, conditions: list) -> list[tuple]:
    """Listing rows in id order, as the driver's tuples (a listing reads thousands)."""
    result = conn.execute(_LISTING.where(*conditions).order_by(_RP.c.id))
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


# --- writing -----------------------------------------------------------------


@retrying
def create_provider(
    engine: sa.Engine, *, name: str, uuid: str, parent_uuid: str | None = None
) -> Provider:
    """A new provider; a root unless `parent_uuid` names an existing provider."""
    with transaction(engine, write=True) as conn:
        return create_provider_in(conn, name=name, uuid=uuid, parent_uuid=parent_uuid)


def create_provider_in(
    conn: sa.Connection, *, name: str, uuid: str, parent_uuid: str | None = None
) -> Provider:
    """The body of `create_provider`, inside a write transaction the caller opened."""
    failed = f'Unable to create resource provider "{name}", {uuid}'
    if not name:
        raise BadRequest(f"{failed}: a name is required.")
    parent_id = root_id = None
    root_uuid, parent_shown = uuid, None
    if parent_uuid is not None:
        if parent_uuid == uuid:
            raise BadRequest(
                f"{failed}: parent provider UUID cannot be same as UUID. "
                "Leave parent_provider_uuid out or null for a root provider."
            )
        parent = _parent_row(conn, parent_uuid, failed)
        parent_id, root_id = parent.id, parent.root_provider_id
        parent_shown = parent.uuid
        if root_id == parent.id:
            root_uuid = parent.uuid
        else:
            root_uuid = conn.execute(_UUID_OF, {"provider_id": root_id}).scalar_one()
    now = utcnow()
    values = {
        "uuid": uuid,
        "name": name,
        "generation": 0,
        "parent_provider_id": parent_id,
        "root_provider_id": root_id,
        "created_at": now,
    }
    new_id = _insert(conn, values)
    if new_id is None:  # its uuid or name is taken (as upstream: after the parent)
        _refuse_duplicates(conn, uuid=uuid, name=name)
        new_id = _insert(conn, values, last_try=True)  # it went away again
    history_records.provider_created(conn, new_id, uuid, name, parent_uuid)
    return Provider(new_id, uuid, name, 0, parent_shown, root_uuid, now, None)


def _insert(conn: sa.Connection, values: dict, last_try: bool = False) -> int | None:
    """Insert a provider (a root: its own root); its id, or None when its uuid or
    name is taken (`last_try`: the IntegrityError is raised). PostgreSQL does it
    in one statement (ON CONFLICT: the transaction stays usable without a
    savepoint); SQLite is the only writer (BEGIN IMMEDIATE) and a failed
    statement leaves its transaction usable; MySQL needs the savepoint."""
    if conn.dialect.name == "postgresql" and not last_try:
        return conn.execute(_INSERT_PROVIDER_PG, values).scalar()
    try:
        if is_sqlite(conn):
            new_id = conn.execute(_INSERT_PROVIDER, values).inserted_primary_key[0]
        else:
            with conn.begin_nested():
                new_id = conn.execute(_INSERT_PROVIDER, values).inserted_primary_key[0]
    except sa.exc.IntegrityError:
        if last_try:
            raise
        return None
    if values["root_provider_id"] is None:
        conn.execute(_SET_ROOT, {"provider_id": new_id})
    return new_id


def update_provider(
    engine: sa.Engine,
    uuid: str,
    *,
    name: str,
    parent_uuid: str | None | _Unset = UNSET,
    allow_reparenting: bool = False,
) -> Provider:
    """Rename and/or (re-, un-)parent a provider. Giving a root its first parent
    is always allowed; moving or un-parenting a child needs `allow_reparenting`
    (microversion 1.37).

    Two re-parents that lock the same rows in opposite orders (A under B while B
    goes under A) can deadlock on PostgreSQL and MySQL: the database aborts one, and
    it runs again from the start, as allocation writes do (then it sees the other's
    result, e.g. a loop, and answers for that)."""
    return run_retrying(
        engine,
        lambda conn: _update(conn, uuid, name, parent_uuid, allow_reparenting),
        retries=RETRIES,
        gave_up=lambda: ConcurrentUpdate(
            f"Unable to save resource provider {uuid}: other requests kept changing "
            "the same provider tree, please retry"
        ),
    )


def _update(
    conn: sa.Connection,
    uuid: str,
    name: str,
    parent_uuid: str | None | _Unset,
    allow_reparenting: bool,
) -> Provider:
    row = provider_row(conn, uuid, for_update=True)
    values: dict = {"name": name, "updated_at": utcnow()}
    new_root: int | None = None
    subtree: list[int] = []
    failed = f"Unable to save resource provider {uuid}"
    if parent_uuid is None and row.parent_provider_id is not None:
        if not allow_reparenting:
            raise BadRequest(f"{failed}: un-parenting a provider is not currently allowed.")
        subtree = _subtree_ids(conn, row)
        new_root = row.id
        values.update(parent_provider_id=None, root_provider_id=row.id)
    elif isinstance(parent_uuid, str):
        parent = _parent_row(conn, parent_uuid, failed)
        moving = row.parent_provider_id is not None and row.parent_provider_id != parent.id
        if moving and not allow_reparenting:
            raise BadRequest(f"{failed}: re-parenting a provider is not currently allowed.")
        subtree = _subtree_ids(conn, row)
        if parent.id in subtree:
            raise BadRequest(f"{failed}: creating loop in the provider tree is not allowed.")
        new_root = parent.root_provider_id
        values.update(parent_provider_id=parent.id, root_provider_id=new_root)
    taken = DuplicateName(f"Conflicting resource provider {name} already exists.")
    if name != row.name and _name_taken(conn, name):
        raise taken
    try:
        with conn.begin_nested():
            conn.execute(_rp.update().where(_rp.c.id == row.id).values(**values))
    except sa.exc.IntegrityError:  # a concurrent rename took the name first
        raise taken from None
    if new_root is not None and subtree:
        conn.execute(_rp.update().where(_rp.c.id.in_(subtree)).values(root_provider_id=new_root))
    found = _load(conn, uuid)
    history_records.provider_updated(conn, row, found, subtree)
    return found


@retrying
def delete_provider(engine: sa.Engine, uuid: str) -> None:
    """Delete a provider with its inventories, traits and aggregate links;
    409 while it has children or allocations."""
    with transaction(engine, write=True) as conn:
        delete_provider_in(conn, uuid)


def delete_provider_in(conn: sa.Connection, uuid: str) -> None:
    """The body of `delete_provider`, inside a write transaction the caller opened."""
    row = provider_row(
        conn,
        uuid,
        for_update=True,
        missing=f"No resource provider with uuid {uuid} found for delete",
    )
    if has_rows(conn, _rp, _rp.c.parent_provider_id == row.id):
        raise CannotDeleteParent(
            f"Unable to delete parent resource provider {uuid}: It has child resource providers."
        )
    if has_rows(conn, t.allocations, t.allocations.c.resource_provider_id == row.id):
        raise ProviderInUse(
            f"Unable to delete resource provider {uuid}: Resource provider has allocations."
        )
    history_records.provider_deleting(conn, row)
    for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates):
        conn.execute(table.delete().where(table.c.resource_provider_id == row.id))
    conn.execute(_rp.delete().where(_rp.c.id == row.id))


# --- helpers of the writers --------------------------------------------------


_INSERT_PROVIDER = _rp.insert()
_NEW_ID = sa.select(
    sa.func.nextval(sa.func.pg_get_serial_sequence(_rp.name, "id")).label("id")
).subquery("new_id")
_NEW_COLUMNS = ("uuid", "name", "generation", "parent_provider_id", "created_at")
_INSERT_PROVIDER_PG = (
    postgresql.insert(_rp)
    .from_select(
        ["id", *_NEW_COLUMNS, "root_provider_id"],
        sa.select(
            _NEW_ID.c.id,
            *(sa.bindparam(name, type_=_rp.c[name].type) for name in _NEW_COLUMNS),
            sa.func.coalesce(
                sa.bindparam("root_provider_id", type_=_rp.c.root_provider_id.type),
                _NEW_ID.c.id,
            ),
        ),
    )
    .on_conflict_do_nothing()
    .returning(_rp.c.id)
)
_SET_ROOT = (
    _rp.update()
    .where(_rp.c.id == sa.bindparam("provider_id"))
    .values(root_provider_id=sa.bindparam("provider_id"))
)
_UUID_OF = sa.select(_rp.c.uuid).where(_rp.c.id == sa.bindparam("provider_id"))
_PARENT_ROW = sa.select(_rp).where(_rp.c.uuid == sa.bindparam("uuid"))
_PARENT_ROW_LOCKED = _PARENT_ROW.with_for_update()
_NAME_TAKEN = sa.select(_rp.c.id).where(_rp.c.name == sa.bindparam("name"))
# Compared by the database, in its collation (case-insensitive on MySQL).
_CLASHES = sa.select(
    (_rp.c.uuid == sa.bindparam("uuid")).label("same_uuid"),
    (_rp.c.name == sa.bindparam("name")).label("same_name"),
).where(sa.or_(_rp.c.uuid == sa.bindparam("uuid"), _rp.c.name == sa.bindparam("name")))


def _parent_row(conn: sa.Connection, parent_uuid: str, failed: str) -> sa.Row:
    """The would-be parent, locked (and read after the lock) so that it cannot
    vanish or change trees before we commit."""
    query = _PARENT_ROW if is_sqlite(conn) else _PARENT_ROW_LOCKED
    row = conn.execute(query, {"uuid": parent_uuid}).first()
    if row is None:
        raise BadRequest(f"{failed}: parent provider UUID does not exist.")
    return row


def _subtree_ids(conn: sa.Connection, row: sa.Row) -> list[int]:
    """Ids of `row` and all its descendants. The whole tree is locked first and
    read after, so a child created meanwhile is either seen or waits for us."""
    query = sa.select(_rp.c.id, _rp.c.parent_provider_id, _rp.c.uuid).where(
        _rp.c.root_provider_id == row.root_provider_id
    )
    if not is_sqlite(conn):
        conn.execute(locking(conn, query.order_by(_rp.c.id))).all()
    tree = conn.execute(query).all()
    children: dict[int, list[int]] = {}
    for member in tree:
        if member.parent_provider_id is not None:
            children.setdefault(member.parent_provider_id, []).append(member.id)
    found, todo = {row.id: None}, list(children.get(row.id, []))
    while todo:
        current = todo.pop()
        if current in found:  # met again going down: the parents come round
            _refuse_loop(tree)
        found[current] = None
        todo.extend(children.get(current, []))
    return list(found)


def _refuse_loop(tree: list[sa.Row]) -> None:
    """ParentLoopFound naming the providers of the tree's parent loop(s)."""
    uuids = {member.id: member.uuid for member in tree}
    found = tree_rules.loops({member.id: member.parent_provider_id for member in tree})
    raise ParentLoopFound([uuids[rp] for loop in found for rp in loop])


def _name_taken(conn: sa.Connection, name: str) -> bool:
    return conn.execute(_NAME_TAKEN, {"name": name}).first() is not None


def _refuse_duplicates(conn: sa.Connection, *, uuid: str, name: str) -> None:
    rows = conn.execute(_CLASHES, {"uuid": uuid, "name": name}).all()
    clashes = []
    if any(row.same_uuid for row in rows):
        clashes.append(f"uuid: {uuid}")
    if any(row.same_name for row in rows):
        clashes.append(f"name: {name}")
    if clashes:
        raise DuplicateName(f"Conflicting resource provider {', '.join(clashes)} already exists.")
