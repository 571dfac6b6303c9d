"""Moves as Nova does them since Queens: live migration, cold migration (migrate,
confirm/revert) and evacuation.

A live or cold migration first gives the instance's source allocation to the
migration (consumer type MIGRATION, in one POST /allocations), then claims the
destination for the instance. Completing frees the migration's hold; aborting or
reverting gives it back to the instance. An evacuation claims the destination in
addition to the source; the source part goes when the source compute comes back.

The lab drives the states: each step moves a migration one state on (explicitly,
or when its `next_step_at` comes), so in-between states such as `running` stay
observable. A `stuck` migration never advances (the hung-migration fault).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from tally.compute.context import Identity, Lab
from tally.compute.errors import BadRequest, Conflict, Forbidden, NotFound, NoValidHost
from tally.compute.ops import actions, servers
from tally.compute.ops.scheduler import claim_destination
from tally.compute.store import hosts as host_store
from tally.compute.store import migrations as store
from tally.compute.store import servers as server_store

log = logging.getLogger("tally.compute")

LIVE, COLD, EVACUATION = "live-migration", "migration", "evacuation"
ACTIONS = {LIVE: "os-migrateLive", COLD: "migrate", EVACUATION: "evacuate"}
# kind -> (its instance action, the conductor's event, the destination compute's event)
RECORDED = {
    LIVE: (actions.LIVE_MIGRATION, "conductor_live_migrate_instance", "compute_live_migration"),
    COLD: (actions.MIGRATE, "conductor_migrate_server", "compute_prep_resize"),
    EVACUATION: (actions.EVACUATE, "conductor_rebuild_server", "compute_rebuild_instance"),
}
ABORTABLE = ("accepted", "queued", "preparing", "running")


@dataclasses.dataclass(frozen=True)
class Plan:
    first: str  # the status once the claims are made
    steps: dict[str, str]  # status -> next status
    tasks: dict[str, str]  # status -> the server's task_state meanwhile


PLANS = {
    LIVE: Plan(
        "preparing",
        {"preparing": "running", "running": "completed"},
        {"accepted": "migrating", "preparing": "migrating", "running": "migrating"},
    ),
    COLD: Plan(
        "pre-migrating",
        {"pre-migrating": "migrating", "migrating": "post-migrating", "post-migrating": "finished"},
        {
            "accepted": "resize_prep",
            "pre-migrating": "resize_prep",
            "migrating": "resize_migrating",
            "post-migrating": "resize_finish",
        },
    ),
    EVACUATION: Plan(
        "accepted",
        {"accepted": "pre-migrating", "pre-migrating": "done"},
        {"accepted": "rebuilding", "pre-migrating": "rebuild_spawning"},
    ),
}


def start(
    lab: Lab, who: Identity, server_uuid: str, kind: str, host: str | None = None
) -> dict[str, Any]:
    """Create the migration and make its claims; on NoValidHost the migration ends in
    `error` and the server keeps what it had."""
    if not who.is_admin:
        raise Forbidden(f"Policy doesn't allow os_compute_api:{ACTIONS[kind]} to be performed.")
    server = servers.get(lab, who, server_uuid)
    if server["vm_state"] != "active" or server["task_state"]:
        raise Conflict(
            f"Cannot '{ACTIONS[kind]}' instance {server_uuid} while it is in task_state "
            f"{server['task_state']}, vm_state {server['vm_state']}"
        )
    source = host_store.get(lab.engine, name=server["host"]) if server["host"] else None
    if kind == EVACUATION and source is not None and not source["forced_down"]:
        raise Conflict(f"Compute service of {server['host']} is still in use.")
    if kind != EVACUATION and (source is None or source["forced_down"]):
        raise BadRequest(f"Compute service of {server['host']} is unavailable at this time.")
    dest = _destination(lab, server, host)
    name, conductor, on_destination = RECORDED[kind]
    with actions.recorded(lab, who, name, [server_uuid]) as action:
        held = lab.placement.held(server_uuid)
        source_rp = source["provider_uuid"] if source else next(iter(held), None)
        now = lab.now()
        migration = store.create(
            lab.engine,
            {
                "uuid": str(uuidlib.uuid4()),
                "server_uuid": server_uuid,
                "migration_type": kind,
                "status": "accepted",
                "source_compute": server["host"],
                "source_provider": source_rp,
                "dest_compute": dest["name"] if dest else None,
                "dest_provider": dest["provider_uuid"] if dest else None,
                "project_id": server["project_id"],
                "user_id": server["user_id"],
                "stuck": False,
                "flavor_id": server["flavor"].get("internal_id"),
                "next_step_at": None,
                "created_at": now,
                "updated_at": now,
            },
        )
        plan = PLANS[kind]
        server_store.update(lab.engine, server_uuid, now, task_state=plan.tasks["accepted"])
        try:
            with action.event(conductor, actions.CONDUCTOR):
                rp = _claim(lab, kind, server, migration["uuid"], dest, held, source_rp)
        except NoValidHost as exc:
            log.warning("%s of %s failed: %s", ACTIONS[kind], server_uuid, exc.message)
            server_store.update(lab.engine, server_uuid, lab.now(), task_state=None)
            return store.advance(
                lab.engine, migration["uuid"], "accepted", lab.now(), status="error"
            )
        dest = host_store.get(lab.engine, provider=rp)
        action.add(on_destination, dest["name"] if dest else None)
        return store.advance(
            lab.engine,
            migration["uuid"],
            "accepted",
            lab.now(),
            status=plan.first,
            dest_compute=dest["name"] if dest else None,
            dest_provider=rp,
            next_step_at=lab.next_step_at(),
        )


def _claim(
    lab: Lab,
    kind: str,
    server: Mapping[str, Any],
    migration: str,
    dest: Mapping[str, Any] | None,
    held: Mapping[str, Any],
    source_rp: str | None,
) -> str:
    """The destination's claim for the instance (the provider claimed); a live or cold
    migration first gives the source allocation to the `migration`, and back when no
    destination fits (NoValidHost)."""
    resources = servers.claims_of(server)
    if kind == EVACUATION:
        return claim_destination(
            lab, server, resources, keep=held, forced_host=dest, exclude=[source_rp or ""]
        )
    lab.placement.move(server["uuid"], migration, "MIGRATION")
    try:
        return claim_destination(
            lab, server, resources, forced_host=dest, exclude=[source_rp or ""]
        )
    except NoValidHost:
        lab.placement.move(migration, server["uuid"], "INSTANCE")
        raise


def _destination(lab: Lab, server: Mapping[str, Any], host: str | None) -> dict | None:
    if not host:
        return None
    dest = host_store.get(lab.engine, name=host)
    if dest is None:
        raise BadRequest(f"Compute host {host} could not be found.")
    if dest["name"] == server["host"]:
        raise BadRequest(f"The target host can't be the same one ({host}).")
    return dest


def step_one(lab: Lab, migration: Mapping[str, Any], to: str | None = None) -> dict | None:
    """Advance one state (or straight `to` one); None when it cannot move."""
    plan = PLANS[migration["migration_type"]]
    target = to or plan.steps.get(migration["status"])
    if target is None or migration["stuck"]:
        return None
    final = target not in plan.steps
    moved = store.advance(
        lab.engine,
        migration["uuid"],
        migration["status"],
        lab.now(),
        status=target,
        next_step_at=None if final else lab.next_step_at(),
    )
    if moved is None:
        return None
    server_uuid, now = migration["server_uuid"], lab.now()
    if not final:
        server_store.update(lab.engine, server_uuid, now, task_state=plan.tasks[target])
    elif migration["migration_type"] == LIVE:
        lab.placement.release(migration["uuid"])
        server_store.update(
            lab.engine, server_uuid, now, host=moved["dest_compute"], task_state=None
        )
    elif migration["migration_type"] == COLD:
        server_store.update(
            lab.engine,
            server_uuid,
            now,
            host=moved["dest_compute"],
            vm_state="resized",
            task_state=None,
        )
    else:
        server_store.update(
            lab.engine,
            server_uuid,
            now,
            host=moved["dest_compute"],
            vm_state="active",
            task_state=None,
        )
    return moved


def step(lab: Lab, count: int = 1) -> list[dict[str, Any]]:
    """The lab's explicit step: every unfinished, unstuck migration moves `count` states."""
    changed: dict[str, dict[str, Any]] = {}
    for _ in range(count):
        for migration in reversed(store.in_progress(lab.engine)):
            moved = step_one(lab, migration)
            if moved:
                changed[moved["uuid"]] = moved
    return list(changed.values())


def step_due(lab: Lab) -> list[dict[str, Any]]:
    """The time-driven step: migrations whose `next_step_at` has come."""
    return [m for m in (step_one(lab, d) for d in store.due(lab.engine, lab.now())) if m]


def _migration(lab: Lab, server_uuid: str, ref: str) -> dict[str, Any]:
    migration = store.get(lab.engine, ref)
    if migration is None or migration["server_uuid"] != server_uuid:
        raise NotFound(f"Instance {server_uuid} does not have migration {ref}.")
    return migration


def _finished_resize(lab: Lab, who: Identity, server_uuid: str, action: str) -> tuple[dict, dict]:
    server = servers.get(lab, who, server_uuid)
    if server["vm_state"] != "resized":
        raise Conflict(
            f"Cannot '{action}' instance {server_uuid} while it is in vm_state {server['vm_state']}"
        )
    found = store.listing(lab.engine, server=server_uuid, status=["finished"], migration_type=COLD)
    if not found:
        raise BadRequest(f"Instance {server_uuid} has no resize to {action}.")
    return server, found[0]


def confirm_resize(lab: Lab, who: Identity, server_uuid: str) -> None:
    _, migration = _finished_resize(lab, who, server_uuid, "confirmResize")
    with (
        actions.recorded(lab, who, actions.CONFIRM_RESIZE, [server_uuid]) as action,
        action.event("compute_confirm_resize", migration["source_compute"]),
    ):
        lab.placement.release(migration["uuid"])
        store.advance(lab.engine, migration["uuid"], "finished", lab.now(), status="confirmed")
        server_store.update(lab.engine, server_uuid, lab.now(), vm_state="active")


def revert_resize(lab: Lab, who: Identity, server_uuid: str) -> None:
    _, migration = _finished_resize(lab, who, server_uuid, "revertResize")
    with actions.recorded(lab, who, actions.REVERT_RESIZE, [server_uuid]) as action:
        with action.event("compute_revert_resize", migration["dest_compute"]):
            lab.placement.move(migration["uuid"], server_uuid, "INSTANCE")
            store.advance(lab.engine, migration["uuid"], "finished", lab.now(), status="reverted")
        with action.event("compute_finish_revert_resize", migration["source_compute"]):
            server_store.update(
                lab.engine,
                server_uuid,
                lab.now(),
                vm_state="active",
                host=migration["source_compute"],
            )


def abort(lab: Lab, who: Identity, server_uuid: str, ref: str, queued: bool = True) -> None:
    """Cancel a live migration in progress: the source allocation goes back to the
    instance (the destination claim is dropped). Works on a stuck one too. Only a
    `running` one unless `queued` (compute 2.65: queued and preparing ones too)."""
    servers.get(lab, who, server_uuid)
    migration = _migration(lab, server_uuid, ref)
    abortable = ABORTABLE if queued else ("running",)
    if migration["migration_type"] != LIVE or migration["status"] not in abortable:
        raise BadRequest(
            f"Migration {migration['id']} state of instance {server_uuid} is "
            f"{migration['status']}. Cannot abort live migration while the migration is in "
            "this state."
        )
    with (
        actions.recorded(lab, who, actions.LIVE_MIGRATION_CANCEL, [server_uuid]) as action,
        action.event("compute_live_migration_abort", migration["source_compute"]),
    ):
        lab.placement.move(migration["uuid"], server_uuid, "INSTANCE")
        store.settle(lab.engine, migration, lab.now(), "cancelled", stuck=False)
        server_store.update(lab.engine, server_uuid, lab.now(), task_state=None)


def force_complete(lab: Lab, who: Identity, server_uuid: str, ref: str) -> None:
    """Finish a running live migration now (a stuck one does not answer)."""
    servers.get(lab, who, server_uuid)
    migration = _migration(lab, server_uuid, ref)
    if migration["migration_type"] != LIVE or migration["status"] != "running":
        raise BadRequest(
            f"Migration {migration['id']} state of instance {server_uuid} is "
            f"{migration['status']}. Cannot force complete while the migration is in this state."
        )
    with (
        actions.recorded(lab, who, actions.LIVE_MIGRATION_FORCE_COMPLETE, [server_uuid]) as action,
        action.event("compute_live_migration_force_complete", migration["source_compute"]),
    ):
        step_one(lab, migration, to="completed")


def clean_evacuated(lab: Lab, host: Mapping[str, Any]) -> list[str]:
    """What nova-compute does when it starts again: servers evacuated away from this
    host lose their allocation here, and their migration is `completed`."""
    cleaned = []
    for migration in store.listing(
        lab.engine, migration_type=EVACUATION, status=["accepted", "pre-migrating", "done"]
    ):
        if migration["source_compute"] != host["name"]:
            continue
        held = lab.placement.held(migration["server_uuid"])
        held.pop(migration["source_provider"], None)
        lab.placement.replace(migration["server_uuid"], held, "INSTANCE")
        store.settle(lab.engine, migration, lab.now(), "completed")
        cleaned.append(migration["server_uuid"])
    return cleaned
