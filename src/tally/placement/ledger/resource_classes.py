"""Resource classes: the standard ones (synced at start, ids below
`CUSTOM_RC_START_ID`) and the CUSTOM_* ones operators add.

Custom ids are `max(id) + 1`, starting at `CUSTOM_RC_START_ID`. Two writers on
PostgreSQL may pick the same id; the loser's insert fails on the primary key and
the whole transaction is retried, so ids stay dense and never collide.

A class is deleted only while no inventory uses it. On PostgreSQL and MySQL the
delete locks the class row (`FOR UPDATE`) and an inventory write that adds a class
share-locks it (`lock_for_inventory`) until it commits, so the two are ordered: a
delete waits for the inventory write and then finds its inventory (409), or an
inventory write waits for the delete and then finds no class (400). On SQLite
`BEGIN IMMEDIATE` orders every writer already.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.engine import is_sqlite
from tally.db.retry import retried, retrying
from tally.db.transaction import transaction
from tally.placement.error_types import BadRequest, Conflict, NotFound
from tally.placement.ledger.common import has_rows, row_by_name, utcnow

RETRIES = 10  # runs of a create whose new id another writer took, in all

rc = t.resource_classes


@dataclasses.dataclass(frozen=True)
class ResourceClass:
    id: int
    name: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def is_standard(self) -> bool:
        return self.id < t.CUSTOM_RC_START_ID

    @property
    def modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


def _from_row(row: sa.Row) -> ResourceClass:
    return ResourceClass(row.id, row.name, row.created_at, row.updated_at)


def _find(conn: sa.Connection, name: str, *, for_update: bool = False) -> ResourceClass | None:
    row = row_by_name(conn, rc, name, for_update=for_update)
    return _from_row(row) if row is not None else None


def _get(conn: sa.Connection, name: str, *, for_update: bool = False) -> ResourceClass:
    found = _find(conn, name, for_update=for_update)
    if found is None:
        raise NotFound(f"No such resource class {name}.")
    return found


def list_classes(engine: sa.Engine) -> list[ResourceClass]:
    with transaction(engine) as conn:
        return [_from_row(row) for row in conn.execute(sa.select(rc).order_by(rc.c.id))]


def get_class(engine: sa.Engine, name: str) -> ResourceClass:
    with transaction(engine) as conn:
        return _get(conn, name)


_FOR_INVENTORY = (
    sa.select(rc.c.name, rc.c.id).where(in_bound_list(rc.c.name, "names")).order_by(rc.c.id)
)
_FOR_INVENTORY_LOCKED = _FOR_INVENTORY.with_for_update(read=True, key_share=True)


def lock_for_inventory(conn: sa.Connection, names: list[str] | set[str]) -> dict[str, int]:
    """`{name: id}` of the classes an inventory write is about to use, share-locked
    until commit so `delete_class` cannot remove them meanwhile (absent names are
    missing from the result: no such class, or deleted before we locked)."""
    names = set(names)
    if not names:
        return {}
    query = _FOR_INVENTORY if is_sqlite(conn) else _FOR_INVENTORY_LOCKED
    return {row.name: row.id for row in conn.execute(query, {"names": sorted(names)})}


def _insert(conn: sa.Connection, name: str) -> ResourceClass:
    top = conn.execute(sa.select(sa.func.max(rc.c.id))).scalar()
    new_id = max(t.CUSTOM_RC_START_ID, (top or 0) + 1)
    now = utcnow()
    conn.execute(rc.insert().values(id=new_id, name=name, created_at=now))
    return ResourceClass(new_id, name, now, None)


def _lookup(engine: sa.Engine, name: str) -> ResourceClass | None:
    with transaction(engine) as conn:
        return _find(conn, name)


class _IdTaken(Exception):  # noqa: N818 (a race to run again, not an error)
    """A concurrent writer inserted the id we picked (not our name): run again."""


def ensure_class(engine: sa.Engine, name: str, *, must_be_new: bool) -> tuple[ResourceClass, bool]:
    """Create the custom class `name`; `(class, created)`.

    With `must_be_new` an existing class is a 409; otherwise it is returned
    as it is (the create-or-confirm PUT of 1.7).
    """

    def attempt() -> tuple[ResourceClass, bool]:
        try:
            with transaction(engine, write=True) as conn:
                existing = _find(conn, name)
                if existing is None:
                    return _insert(conn, name), True
        except sa.exc.IntegrityError:
            # A concurrent writer took our id (run again) or created the same name.
            existing = _lookup(engine, name)
            if existing is None:
                raise _IdTaken() from None
        if must_be_new:
            raise Conflict(f"Conflicting resource class already exists: {name}")
        return existing, False

    return retried(
        attempt,
        retries=RETRIES,
        also=(_IdTaken,),
        gave_up=lambda: Conflict(
            "Max retries of DB transaction exceeded attempting to create resource class: "
            f"{name}, please try again."
        ),
    )


@retrying
def rename_class(engine: sa.Engine, name: str, new_name: str) -> ResourceClass:
    """The PUT of 1.2 - 1.6: rename a custom class (standard ones are fixed)."""
    try:
        with transaction(engine, write=True) as conn:
            current = _get(conn, name, for_update=True)
            if current.is_standard:
                raise BadRequest(f"Cannot update standard resource class {name}")
            if new_name != name and _find(conn, new_name) is not None:
                raise Conflict(f"Resource class already exists: {new_name}")
            now = utcnow()
            conn.execute(
                rc.update().where(rc.c.id == current.id).values(name=new_name, updated_at=now)
            )
            return dataclasses.replace(current, name=new_name, updated_at=now)
    except sa.exc.IntegrityError:
        raise Conflict(f"Resource class already exists: {new_name}") from None


@retrying
def delete_class(engine: sa.Engine, name: str) -> None:
    """Delete a custom class nobody uses: standard -> 400, in use -> 409."""
    with transaction(engine, write=True) as conn:
        current = _get(conn, name, for_update=True)
        if current.is_standard:
            raise BadRequest(
                f"Error in delete resource class: Cannot delete standard resource class {name}."
            )
        for table, where in ((t.inventories, "inventory"), (t.allocations, "allocations")):
            if has_rows(conn, table, table.c.resource_class_id == current.id):
                raise Conflict(
                    f"Error in delete resource class: {name} cannot be deleted. "
                    f"Class is in use in {where}."
                )
        conn.execute(rc.delete().where(rc.c.id == current.id))
