"""Faults on demand: each reproduces one cause of stale Placement data and leaves
exactly the traces the real failure leaves.

delete-while-down   the server's compute goes down and the server is deleted without
                    its allocations being released: an orphan consumer.
migration-error     a live migration fails after the destination claim and nothing
                    rolls back: the instance holds the destination, the migration still
                    holds the source, the migration is in `error`.
migration-hang      a live migration stops in `running` (its source compute no longer
                    answers): both claims stay until it is aborted.
service-delete      a compute service is deleted without draining: its provider cannot
                    be deleted (allocations remain), so provider and allocations stay.
evacuation          the server's compute goes down and the server is evacuated; the
                    source never restarts, so the instance holds allocations on both.

Unless a server is named, each picks one no earlier fault touched (`_pick_server`), so
faults injected one after another never pile onto the same server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tally import amounts
from tally.compute.context import LAB_SYSTEM, Lab
from tally.compute.errors import BadRequest, Conflict, NotFound
from tally.compute.ops import hosts, moves
from tally.compute.store import hosts as host_store
from tally.compute.store import migrations as migration_store
from tally.compute.store import servers as server_store

log = logging.getLogger("tally.compute.faults")


# how a move ends when it leaves nothing behind; any other status (in progress, hung,
# `error`, an evacuation `done` whose source never came back) marks its server
CLEAN_ENDS = ("completed", "confirmed", "reverted", "cancelled")


def _pick_server(
    lab: Lab, server: str | None, host: str | None, *, source_up: bool = False
) -> dict[str, Any]:
    """The named server, or the oldest one not involved in any fault (on `host` if
    named): ACTIVE with no task, on a compute host that still exists (and is up when
    `source_up`), every move of it ended cleanly, and holding allocations in
    Placement on its own host's provider only. A Conflict when none is left."""
    if server:
        found = server_store.get(lab.engine, server)
        if found is None:
            raise NotFound(f"Instance {server} could not be found.")
        return found
    hosts = {h["name"]: h for h in host_store.listing(lab.engine)}
    moved = {
        m["server_uuid"]
        for m in migration_store.listing(lab.engine)
        if m["status"] not in CLEAN_ENDS
    }
    on_down_hosts = []
    for candidate in reversed(server_store.listing(lab.engine, host=host)):
        where = hosts.get(candidate["host"])
        if candidate["vm_state"] != "active" or candidate["task_state"] or where is None:
            continue
        if candidate["uuid"] in moved:
            continue
        if source_up and where["forced_down"]:
            on_down_hosts.append(candidate["name"])
            continue
        if set(lab.placement.held(candidate["uuid"])) == {where["provider_uuid"]}:
            return candidate
    if on_down_hosts:
        raise Conflict(
            f"No server left to break this way: the servers not yet involved in a fault "
            f"({', '.join(on_down_hosts)}) are on compute hosts that are down, and a live "
            f"migration needs its source host up."
        )
    raise Conflict(
        "No server left to break: every server"
        + (f" on {host}" if host else "")
        + " is already involved in a fault (a move that did not end cleanly, allocations "
        "not on its own host, its compute host deleted) or is not ACTIVE. Boot another "
        "(tally lab boot NAME), or start over (tally lab reset, then tally lab up)."
    )


def _force_down(lab: Lab, host_name: str) -> dict[str, Any]:
    host = host_store.get(lab.engine, name=host_name)
    if host is None:
        raise Conflict(f"Compute host {host_name} is gone already.")
    return host_store.update(lab.engine, host["uuid"], lab.now(), forced_down=True)


def delete_while_down(lab: Lab, server: str | None, host: str | None, target: str | None):
    victim = _pick_server(lab, server, host)
    down = _force_down(lab, victim["host"])
    server_store.soft_delete(lab.engine, victim["uuid"], lab.now())  # allocations stay
    log.warning(
        "Deleted server %s while compute %s was down; its allocations were not released",
        victim["uuid"],
        down["name"],
    )
    return _report(
        lab,
        "delete-while-down",
        victim,
        None,
        down["provider_uuid"],
        None,
        [victim["uuid"]],
        host=down["name"],
    )


def _live(lab: Lab, server: str | None, host: str | None, target: str | None) -> tuple:
    victim = _pick_server(lab, server, host, source_up=True)
    migration = moves.start(lab, LAB_SYSTEM, victim["uuid"], moves.LIVE, target)
    if migration["status"] == "error":
        raise Conflict(f"No destination could be claimed for {victim['uuid']}.")
    return victim, migration


def migration_error(lab: Lab, server: str | None, host: str | None, target: str | None):
    victim, migration = _live(lab, server, host, target)
    migration = migration_store.settle(lab.engine, migration, lab.now(), "error")
    server_store.update(lab.engine, victim["uuid"], lab.now(), task_state=None)
    log.error(
        "Live migration %s of %s failed after the destination claim; allocations "
        "were not rolled back",
        migration["uuid"],
        victim["uuid"],
    )
    return _report(
        lab,
        "migration-error",
        victim,
        migration,
        migration["source_provider"],
        migration["dest_provider"],
        [victim["uuid"], migration["uuid"]],
    )


def migration_hang(lab: Lab, server: str | None, host: str | None, target: str | None):
    victim, migration = _live(lab, server, host, target)
    migration = migration_store.settle(lab.engine, migration, lab.now(), "running", stuck=True)
    return _report(
        lab,
        "migration-hang",
        victim,
        migration,
        migration["source_provider"],
        migration["dest_provider"],
        [victim["uuid"], migration["uuid"]],
    )


def service_delete(lab: Lab, server: str | None, host: str | None, target: str | None):
    victim = _pick_server(lab, server, None) if host is None else None
    host = victim["host"] if victim else host
    row = host_store.get(lab.engine, name=host)
    if row is None:
        raise NotFound(f"Compute host {host} could not be found.")
    result = hosts.delete_service(lab, row["uuid"], drained_check=False)
    held = list(lab.placement.client.provider_allocations(row["provider_uuid"]))
    if result["provider_deleted"]:
        log.warning("Compute service %s had no allocations: nothing was left behind", host)
    return _report(lab, "service-delete", victim, None, row["provider_uuid"], None, held, host=host)


def evacuation(lab: Lab, server: str | None, host: str | None, target: str | None):
    victim = _pick_server(lab, server, host)
    down = _force_down(lab, victim["host"])
    migration = moves.start(lab, LAB_SYSTEM, victim["uuid"], moves.EVACUATION, target)
    if migration["status"] == "error":
        raise Conflict(f"No destination could be claimed for {victim['uuid']}.")
    while migration["status"] != "done":
        migration = moves.step_one(lab, migration)
    return _report(
        lab,
        "evacuation",
        victim,
        migration,
        down["provider_uuid"],
        migration["dest_provider"],
        [victim["uuid"]],
        host=down["name"],
    )


KINDS: dict[str, Callable[..., dict[str, Any]]] = {
    "delete-while-down": delete_while_down,
    "migration-error": migration_error,
    "migration-hang": migration_hang,
    "service-delete": service_delete,
    "evacuation": evacuation,
}


def inject(
    lab: Lab,
    kind: str,
    *,
    server: str | None = None,
    host: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    if kind not in KINDS:
        raise BadRequest(f"Unknown fault {kind!r}; one of {', '.join(KINDS)}.")
    return KINDS[kind](lab, server, host, target)


def _report(
    lab: Lab,
    kind: str,
    server: dict[str, Any] | None,
    migration: dict[str, Any] | None,
    source: str | None,
    destination: str | None,
    consumers: list[str],
    host: str | None = None,
) -> dict[str, Any]:
    """What was done, and who holds what in Placement now (read back from it)."""
    held = []
    for consumer in consumers:
        found = lab.placement.allocations(consumer)
        held.append(
            {
                "consumer": consumer,
                "consumer_type": found.get("consumer_type"),
                "allocations": amounts.held(found["allocations"]),
            }
        )
    return {
        "kind": kind,
        "server": server["uuid"] if server else None,
        "migration": migration["uuid"] if migration else None,
        "migration_status": migration["status"] if migration else None,
        "host": host or (server["host"] if server else None),
        "providers": {"source": source, "destination": destination},
        "held": held,
    }
