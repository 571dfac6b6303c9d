"""Races between two ledger writes on PostgreSQL and MySQL, made to happen every time:
a hook on the engine holds each transaction at the chosen statement until the other
one has reached its own (SQLite needs none of this: `BEGIN IMMEDIATE` runs one writer
at a time).

    re-parents:   T1 locks A ... wants B     T2 locks B ... wants A    -> a deadlock;
                  the aborted one runs again and refuses the loop (400), no 500
    class delete: T1 inserts an inventory of CUSTOM_X (uncommitted), T2 deletes
                  CUSTOM_X: T2 must wait for T1, then refuse (409), never leave an
                  inventory of a class that no longer exists
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.error_types import BadRequest, Conflict
from tally.placement.ledger import providers, resource_classes
from tally.placement.ledger.inventory import Rules, add_inventory
from tally.placement.ledger.inventory_record import Record

SERVERS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


class Hook:
    """Calls `pause(statement)` after a statement of a thread that armed itself,
    until `pause` returns True (then that thread runs on unhooked)."""

    def __init__(self, engine: sa.Engine, pause: Callable[[str], bool]) -> None:
        self.engine, self.pause, self.local = engine, pause, threading.local()

    def arm(self) -> None:
        self.local.armed = True

    def __call__(self, conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        if getattr(self.local, "armed", False) and self.pause(statement):
            self.local.armed = False

    def __enter__(self) -> Hook:
        event.listen(self.engine, "after_cursor_execute", self)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "after_cursor_execute", self)


def run_both(*calls: Callable[[], object]) -> list[object]:
    """Run each call in its own thread; what each returned or raised."""
    results: list[object] = [None] * len(calls)

    def run(i: int, call: Callable[[], object]) -> None:
        try:
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return results


def new_uuid() -> str:
    return str(uuid.uuid4())


@pytest.mark.parametrize("backend", SERVERS)
def test_opposite_reparents_at_once_do_not_deadlock_into_an_error(engine):
    root, a, b = new_uuid(), new_uuid(), new_uuid()
    providers.create_provider(engine, name="root", uuid=root)
    providers.create_provider(engine, name="a", uuid=a, parent_uuid=root)
    providers.create_provider(engine, name="b", uuid=b, parent_uuid=root)
    both_locked = threading.Barrier(2, timeout=20)

    def after_first_lock(statement: str) -> bool:
        if "FOR UPDATE" not in statement.upper():
            return False
        both_locked.wait()  # each holds its own row; next each wants the other's
        return True

    with Hook(engine, after_first_lock) as hook:

        def move(child: str, parent: str, name: str) -> Callable[[], object]:
            def call() -> object:
                hook.arm()
                return providers.update_provider(
                    engine, child, name=name, parent_uuid=parent, allow_reparenting=True
                )

            return call

        results = run_both(move(a, b, "a"), move(b, a, "b"))

    moved = [r for r in results if isinstance(r, providers.Provider)]
    refused = [r for r in results if isinstance(r, BadRequest)]
    assert (len(moved), len(refused)) == (1, 1), results
    assert "creating loop in the provider tree is not allowed" in refused[0].detail
    # the tree as the winner left it: root -> parent -> child
    child = providers.get_provider(engine, moved[0].uuid)
    parent = providers.get_provider(engine, child.parent_provider_uuid)
    assert parent.parent_provider_uuid == root
    assert child.root_provider_uuid == parent.root_provider_uuid == root


@pytest.mark.parametrize("backend", SERVERS)
def test_a_class_delete_waits_for_an_inventory_write_adding_the_class(engine):
    resource_classes.ensure_class(engine, "CUSTOM_RACE", must_be_new=True)
    rp = new_uuid()
    providers.create_provider(engine, name="rp", uuid=rp)
    inserted, delete_done = threading.Event(), threading.Event()

    def after_inventory_insert(statement: str) -> bool:
        if not statement.upper().startswith("INSERT INTO INVENTORIES"):
            return False
        inserted.set()
        delete_done.wait(timeout=2)  # a delete that does not wait for us finishes now
        return True

    with Hook(engine, after_inventory_insert) as hook:

        def write() -> object:
            hook.arm()
            return add_inventory(engine, rp, Record("CUSTOM_RACE", total=4), Rules())

        def delete() -> object:
            assert inserted.wait(timeout=20)
            try:
                return resource_classes.delete_class(engine, "CUSTOM_RACE")
            finally:
                delete_done.set()

        written, deleted = run_both(write, delete)

    assert not isinstance(written, Exception), written
    assert written[1].total == 4
    assert isinstance(deleted, Conflict), deleted
    assert "Class is in use in inventory" in deleted.detail
    with transaction(engine) as conn:
        classes = set(conn.execute(sa.select(t.resource_classes.c.id)).scalars())
        used = set(conn.execute(sa.select(t.inventories.c.resource_class_id)).scalars())
    assert used <= classes  # no inventory of a deleted class
    assert resource_classes.get_class(engine, "CUSTOM_RACE").name == "CUSTOM_RACE"
