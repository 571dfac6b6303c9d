"""Committing a sandbox: its applied steps replayed through the ledger's own writes
in one write transaction, only when every provider and consumer generation the
steps read is unchanged (the consumers, then the providers, locked first, in the
ledger's lock order) and no provider joined a tree a search compared (read after
the locks: a provider made there meanwhile has committed or waits for us);
otherwise 409 naming what moved, and nothing is written."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.engine import is_sqlite
from tally.placement.error_types import ConcurrentUpdate
from tally.placement.ledger import aggregates, allocations, inventory, providers, traits
from tally.placement.ledger import consumers as cons
from tally.placement.ledger.sandbox import store
from tally.placement.ledger.sandbox.overlay import Overlay, records

_rp = t.resource_providers
_GENERATIONS = (
    sa.select(_rp.c.uuid, _rp.c.generation)
    .where(in_bound_list(_rp.c.uuid, "uuids"))
    .order_by(_rp.c.id)
)
_GENERATIONS_LOCKED = _GENERATIONS.with_for_update()
_root = _rp.alias("root")
_MEMBERS = (
    sa.select(_rp.c.uuid, _rp.c.generation)
    .select_from(_rp.join(_root, _root.c.id == _rp.c.root_provider_id))
    .where(in_bound_list(_root.c.uuid, "roots"))
)


def commit(engine: sa.Engine, sandbox: str, rules: inventory.Rules, retries: int) -> int:
    """Apply the sandbox (then gone); the number of steps written."""
    written = [0]

    def body(conn: sa.Connection) -> None:
        row = store.load(conn, sandbox, for_update=True)
        overlay = Overlay(row.revision, row.steps)
        moved = _moved(conn, overlay)
        if moved:
            raise ConcurrentUpdate(
                f"Sandbox {sandbox} was not committed, nothing was written: what it read "
                "has changed since: " + "; ".join(_said(m) for m in moved) + ".",
                moved=moved,
            )
        applied = [step for step in overlay.steps if step["applied"]]
        for step in applied:
            _replay(conn, step["write"], rules)
        store.delete_in(conn, sandbox)
        written[0] = len(applied)

    allocations.run_retrying(engine, body, retries)
    return written[0]


def _moved(conn: sa.Connection, overlay: Overlay) -> list[dict[str, Any]]:
    """What the steps read that is not as they read it (its rows locked)."""
    moved = []
    consumers = cons.lock_consumers(conn, sorted(overlay.consumers_read))
    for uuid, seen in sorted(overlay.consumers_read.items()):
        found = consumers.get(uuid)
        now = None if found is None else found.generation
        if now != seen:
            moved.append({"consumer": uuid, "read": seen, "now": now})
    query = _GENERATIONS if is_sqlite(conn) else _GENERATIONS_LOCKED
    rows = conn.execute(query, {"uuids": sorted(overlay.providers_read)}).all()
    now_of = dict(rows)
    for uuid, seen in sorted(overlay.providers_read.items()):
        if now_of.get(uuid) != seen:
            moved.append({"provider": uuid, "read": seen, "now": now_of.get(uuid)})
    if overlay.trees_read:
        rows = conn.execute(_MEMBERS, {"roots": sorted(overlay.trees_read)}).all()
        for uuid, generation in sorted(rows):
            if uuid not in overlay.providers_read:
                moved.append({"provider": uuid, "read": None, "now": generation})
    return moved


def _said(moved: dict[str, Any]) -> str:
    what = (
        f"consumer {moved['consumer']}" if "consumer" in moved else f"provider {moved['provider']}"
    )
    read = "none" if moved["read"] is None else f"generation {moved['read']}"
    now = "gone" if moved["now"] is None else f"generation {moved['now']}"
    return f"{what} read at {read}, now {now}"


def _replay(conn: sa.Connection, write: dict[str, Any], rules: inventory.Rules) -> None:
    op = write["op"]
    if op == "allocations":
        allocations.replace_in(
            conn,
            [
                allocations.ConsumerWrite(
                    write["consumer"],
                    write["project_id"],
                    write["user_id"],
                    write["allocations"],
                    consumer_type=write["consumer_type"],
                )
            ],
        )
    elif op == "inventories":
        found = list(records(write["inventories"]).values())
        inventory.replace_inventories_in(conn, write["provider"], None, found, rules)
    elif op == "traits":
        traits.set_provider_traits_in(conn, write["provider"], write["traits"], None)
    elif op == "delete":
        providers.delete_provider_in(conn, write["provider"])
    elif op == "add":
        uuid = write["provider"]
        providers.create_provider_in(
            conn, name=write["name"], uuid=uuid, parent_uuid=write["parent"]
        )
        if write["inventories"]:
            found = list(records(write["inventories"]).values())
            inventory.replace_inventories_in(conn, uuid, None, found, rules)
        if write["traits"]:
            traits.set_provider_traits_in(conn, uuid, write["traits"], None)
        if write["aggregates"]:
            aggregates.set_provider_aggregates_in(
                conn, uuid, lambda: (list(write["aggregates"]), None), bump=True
            )
    else:
        raise ValueError(f"unknown sandbox write {op!r}")
