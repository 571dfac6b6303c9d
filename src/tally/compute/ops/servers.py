"""Servers: create (schedule + claim), list with Nova's filters, delete (release)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from tally.compute.context import Identity, Lab
from tally.compute.errors import BadRequest, Conflict, Forbidden, NotFound, NoValidHost
from tally.compute.ops import actions
from tally.compute.ops.scheduler import claim_new
from tally.compute.states import POWER_NOSTATE, POWER_RUNNING, POWER_SHUTDOWN, status_of
from tally.compute.store import flavors as flavor_store
from tally.compute.store import hosts as host_store
from tally.compute.store import migrations as migration_store
from tally.compute.store import servers as store
from tally.nova.flavors import claimed_resources

log = logging.getLogger("tally.compute")
MAX_COUNT = 10000
# A server booted with no imageRef, and not from a volume, records this image (the
# lab image catalog's "cirros", tally.compute.images), so that its image is never ""
# (what the compute API shows only for a server booted from a volume).
LAB_IMAGE = "00000000-0000-4000-8000-00000000a1b0"


@dataclasses.dataclass(frozen=True)
class ServerRequest:
    name: str
    flavor: str
    image: str = ""
    count: int = 1
    min_count: int = 1
    host: str | None = None  # forced host (admin): availability_zone "nova:HOST" or `host`
    volume_backed: bool = False  # its root disk is a volume: no DISK_GB claimed for it


def flavor_snapshot(flavor: Mapping[str, Any]) -> dict[str, Any]:
    """The flavor as the server keeps it (Nova embeds it in the server from 2.47)."""
    return {
        "id": flavor["flavorid"],
        "name": flavor["name"],
        "vcpus": flavor["vcpus"],
        "ram": flavor["memory_mb"],
        "disk": flavor["root_gb"],
        "ephemeral": flavor["ephemeral_gb"],
        "swap": flavor["swap"],
        "extra_specs": dict(flavor["extra_specs"]),
        "internal_id": flavor["id"],
    }


def create(lab: Lab, who: Identity, request: ServerRequest) -> list[dict[str, Any]]:
    """Boot `request.count` servers: all scheduled and claimed (ACTIVE), or all in
    ERROR with the scheduler's fault, as Nova's multi-create."""
    flavor = flavor_store.get(lab.engine, request.flavor)
    if flavor is None:
        raise BadRequest(f"Flavor {request.flavor} could not be found.")
    if not 1 <= request.min_count <= request.count <= MAX_COUNT:
        raise BadRequest(f"min_count and max_count must be 1..{MAX_COUNT}, min <= max.")
    forced = None
    if request.host:
        if not who.is_admin:
            raise Forbidden("Policy doesn't allow a host to be requested.")
        forced = host_store.get(lab.engine, name=request.host)
        if forced is None:
            raise BadRequest(f"Compute host {request.host} could not be found.")
    snapshot = flavor_snapshot(flavor)
    now = lab.now()
    reservation = f"r-{uuidlib.uuid4().hex[:8]}"
    uuids = [str(uuidlib.uuid4()) for _ in range(request.count)]
    rows = [
        {
            "uuid": u,
            "name": _name(request, i),
            "project_id": who.project_id,
            "user_id": who.user_id,
            "flavor": snapshot,
            "image_ref": "" if request.volume_backed else request.image or LAB_IMAGE,
            "host": None,
            "vm_state": "building",
            "task_state": None,
            "power_state": POWER_NOSTATE,
            "fault": None,
            "reservation_id": reservation,
            "launch_index": i,
            "deleted": False,
            "created_at": now,
            "updated_at": now,
        }
        for i, u in enumerate(uuids)
    ]
    with actions.recorded(lab, who, actions.CREATE, uuids) as action:
        try:
            with action.event("conductor_schedule_and_build_instances", actions.CONDUCTOR):
                placed = claim_new(
                    lab,
                    uuids,
                    claims_of(rows[0]),
                    who.project_id,
                    who.user_id,
                    forced_host=forced,
                )
        except NoValidHost as exc:
            fault = _fault(exc, now)
            for row in rows:
                row.update(vm_state="error", fault=fault)
        else:
            names = {h["provider_uuid"]: h["name"] for h in host_store.listing(lab.engine)}
            for row in rows:
                row.update(
                    host=names[placed[row["uuid"]]],
                    vm_state="active",
                    power_state=POWER_RUNNING,
                    launched_at=now,
                )
                action.add("compute__do_build_and_run_instance", row["host"], server=row["uuid"])
        store.create(lab.engine, rows)
    return rows


def claims_of(server: Mapping[str, Any]) -> dict[str, int]:
    """What the server claims in Placement: its flavor, without the root disk when it
    was booted from a volume (its image is then "")."""
    return claimed_resources(server["flavor"], volume_backed=not server["image_ref"])


def _name(request: ServerRequest, index: int) -> str:
    return request.name if request.count == 1 else f"{request.name}-{index + 1}"


def _fault(exc: NoValidHost, now: Any) -> dict[str, Any]:
    """The server's fault as Nova records a scheduling failure."""
    return {"code": 500, "message": exc.message, "created": _iso(now)}


def _iso(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def get(lab: Lab, who: Identity, uuid: str, *, deleted: bool = False) -> dict[str, Any]:
    server = store.get(lab.engine, uuid, deleted=deleted and who.is_admin)
    if server is None or (server["project_id"] != who.project_id and not who.is_admin):
        raise NotFound(f"Instance {uuid} could not be found.")
    return server


@dataclasses.dataclass(frozen=True)
class ServerFilters:
    all_tenants: bool = False
    project_id: str | None = None
    user_id: str | None = None
    host: str | None = None
    status: str | None = None
    name: str | None = None
    flavor: str | None = None
    reservation_id: str | None = None
    deleted: bool = False
    limit: int | None = None
    marker: str | None = None


def listing(lab: Lab, who: Identity, f: ServerFilters) -> tuple[list[dict[str, Any]], bool]:
    """(servers of the page, whether more follow). Non-admins see their project;
    `all_tenants`, `host` and `deleted` are for admins, as in Nova."""
    if (f.all_tenants or f.host or f.deleted) and not who.is_admin:
        raise Forbidden("Policy doesn't allow os_compute_api:servers:index:get_all_tenants.")
    project = None if f.all_tenants else who.project_id
    if f.all_tenants and f.project_id:
        project = f.project_id
    found = store.listing(
        lab.engine, project_id=project, host=f.host, deleted=True if f.deleted else False
    )
    if f.status:
        wanted = f.status.upper()
        found = [s for s in found if status_of(s) == wanted]
    if f.name:
        try:
            pattern = re.compile(f.name)
        except re.error:
            raise BadRequest(f"Invalid name filter {f.name!r}.") from None
        found = [s for s in found if pattern.search(s["name"])]
    if f.user_id:
        found = [s for s in found if s["user_id"] == f.user_id]
    if f.reservation_id:
        found = [s for s in found if s["reservation_id"] == f.reservation_id]
    if f.flavor:
        found = [s for s in found if s["flavor"]["id"] == f.flavor]
    if f.marker:
        ids = [s["uuid"] for s in found]
        if f.marker not in ids:
            raise BadRequest(f"marker [{f.marker}] not found")
        found = found[ids.index(f.marker) + 1 :]
    if f.limit is not None and len(found) > f.limit:
        return found[: f.limit], True
    return found, False


def shelve(lab: Lab, who: Identity, uuid: str) -> None:
    """Shelve and offload at once (Nova's default `shelved_offload_time = 0`): the
    server leaves its host and releases its allocations until it is unshelved."""
    server = _idle(lab, who, uuid, "shelve", ("active", "stopped"))
    with (
        actions.recorded(lab, who, actions.SHELVE, [uuid]) as action,
        action.event("compute_shelve_instance", server["host"]),
    ):
        lab.placement.release(uuid)
        store.update(
            lab.engine,
            uuid,
            lab.now(),
            vm_state="shelved_offloaded",
            host=None,
            power_state=POWER_SHUTDOWN,
        )
    log.info("Shelved and offloaded server %s (%s) from %s", server["name"], uuid, server["host"])


def unshelve(lab: Lab, who: Identity, uuid: str) -> None:
    """Schedule and claim the shelved server again; where nothing fits it stays
    shelved (Nova records the fault and leaves it SHELVED_OFFLOADED)."""
    server = _idle(lab, who, uuid, "unshelve", ("shelved_offloaded",))
    with actions.recorded(lab, who, actions.UNSHELVE, [uuid]) as action:
        try:
            with action.event("schedule_instances", actions.CONDUCTOR):
                placed = claim_new(
                    lab, [uuid], claims_of(server), server["project_id"], server["user_id"]
                )
        except NoValidHost as exc:
            store.update(lab.engine, uuid, lab.now(), fault=_fault(exc, lab.now()))
            log.warning("Unshelving server %s failed: %s", uuid, exc.message)
            return
        host = host_store.get(lab.engine, provider=placed[uuid])
        store.update(
            lab.engine,
            uuid,
            lab.now(),
            vm_state="active",
            host=host["name"] if host else None,
            power_state=POWER_RUNNING,
        )
        action.add("compute_unshelve_instance", host["name"] if host else None)


def _idle(lab: Lab, who: Identity, uuid: str, action: str, states: tuple[str, ...]) -> dict:
    """The server, when `action` may start: no task running and a vm_state it allows."""
    server = get(lab, who, uuid)
    if server["task_state"] is not None:
        raise Conflict(
            f"Cannot '{action}' instance {uuid} while it is in task_state {server['task_state']}"
        )
    if server["vm_state"] not in states:
        raise Conflict(
            f"Cannot '{action}' instance {uuid} while it is in vm_state {server['vm_state']}"
        )
    return server


def delete(lab: Lab, who: Identity, uuid: str) -> None:
    """Release the server's allocations (and those of its unfinished moves), then
    mark it deleted. A server whose compute is down is deleted locally by the API,
    which releases its allocations too (Nova since Rocky)."""
    server = get(lab, who, uuid)
    with actions.recorded(lab, who, actions.DELETE, [uuid]) as action:
        on_host = server["host"]  # a server on no host: deleted by the API, no compute event
        terminating = action.event("compute_terminate_instance", on_host) if on_host else None
        with terminating or contextlib.nullcontext():
            for migration in migration_store.in_progress(lab.engine, server=uuid):
                lab.placement.release(migration["uuid"])
                ended = "confirmed" if migration["status"] == "finished" else "error"
                migration_store.settle(lab.engine, migration, lab.now(), ended)
            lab.placement.release(uuid)
            store.soft_delete(lab.engine, uuid, lab.now())
    log.info("Deleted server %s (%s) from host %s", server["name"], uuid, server["host"])
