"""Compute hosts: adding them, the resource tracker, and the os-services actions.

The resource tracker reports a host's inventory to Placement as nova-compute does on
each periodic run: the provider is created when missing, and the inventory (with
`reserved` from the host's configuration) is written whenever Placement's differs,
so a `reserved` an operator set by hand in Placement is overwritten.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any

from tally.clients.errors import GaveUp, PlacementError
from tally.compute.context import Lab
from tally.compute.errors import BadRequest, Conflict, NotFound
from tally.compute.ops import moves
from tally.compute.store import hosts as store
from tally.compute.store import migrations as migration_store
from tally.compute.store import servers as server_store

log = logging.getLogger("tally.compute")

HOST_DEFAULTS: dict[str, Any] = {
    "vcpus": 16,
    "memory_mb": 65536,
    "disk_gb": 1000,
    "cpu_allocation_ratio": 4.0,
    "ram_allocation_ratio": 1.0,
    "disk_allocation_ratio": 1.0,
    "reserved_vcpus": 0,
    "reserved_memory_mb": 512,
    "reserved_disk_gb": 0,
}
CONFIG_KEYS = tuple(HOST_DEFAULTS)


def inventory_of(host: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The inventory nova-compute would report for this host's configuration."""

    def one(total: int, reserved: int, ratio: float) -> dict[str, Any]:
        return {
            "total": total,
            "reserved": reserved,
            "min_unit": 1,
            "max_unit": total,
            "step_size": 1,
            "allocation_ratio": float(ratio),
        }

    return {
        "VCPU": one(host["vcpus"], host["reserved_vcpus"], host["cpu_allocation_ratio"]),
        "MEMORY_MB": one(
            host["memory_mb"], host["reserved_memory_mb"], host["ram_allocation_ratio"]
        ),
        "DISK_GB": one(host["disk_gb"], host["reserved_disk_gb"], host["disk_allocation_ratio"]),
    }


def _validated(spec: Mapping[str, Any]) -> dict[str, Any]:
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 255:
        raise BadRequest("Each host needs a name of 1 to 255 characters.")
    config = {**HOST_DEFAULTS, **{k: spec[k] for k in CONFIG_KEYS if spec.get(k) is not None}}
    for key in CONFIG_KEYS:
        kind = float if key.endswith("ratio") else int
        try:
            config[key] = kind(config[key])
        except (TypeError, ValueError):
            raise BadRequest(f"Host {name}: {key} must be a number.") from None
        if config[key] < 0 or (key in ("vcpus", "memory_mb", "disk_gb") and config[key] < 1):
            raise BadRequest(f"Host {name}: {key} is out of range.")
    return {"name": name.strip(), **config}


def add_hosts(lab: Lab, specs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Create hosts (service + compute node) and report each to Placement."""
    rows = [_validated(s) for s in specs]
    names = [r["name"] for r in rows]
    if len(set(names)) != len(names):
        raise BadRequest("Host names must be unique.")
    taken = store.existing_names(lab.engine, names)
    if taken:
        raise Conflict(f"Compute host {', '.join(sorted(taken))} already exists.")
    now = lab.now()
    for index, row in enumerate(rows):
        row.update(
            uuid=str(uuidlib.uuid4()),
            provider_uuid=str(uuidlib.uuid4()),
            disabled=False,
            disabled_reason=None,
            forced_down=False,
            host_ip=f"192.0.2.{index % 250 + 1}",
            created_at=now,
            updated_at=now,
        )
    store.create(lab.engine, rows)
    reported = [row["uuid"] for row in rows if _report_new(lab, row)]
    store.mark_reported(lab.engine, reported, lab.now())  # the others: due at once
    uuids = [r["uuid"] for r in rows]
    found = {h["uuid"]: h for h in store.listing(lab.engine, uuids=uuids)}
    return [found.get(u) for u in uuids]


def _report_new(lab: Lab, host: dict[str, Any]) -> bool:
    """First report of a new host: create its provider, then its inventory. False
    (logged) when Placement refused."""
    try:
        lab.placement.client.post(
            "/resource_providers", {"uuid": host["provider_uuid"], "name": host["name"]}
        )
        lab.placement.put_inventories(host["provider_uuid"], 0, inventory_of(host))
    except PlacementError as exc:
        log.error(
            "Failed to report compute node %s (%s): %s", host["name"], host["provider_uuid"], exc
        )
        return False
    return True


def report(lab: Lab, host: Mapping[str, Any]) -> dict[str, Any]:
    """One resource tracker run for a host that is up: provider, inventory, the
    COMPUTE_STATUS_DISABLED trait. Returns what it did; a run that failed (Placement
    refused, or every write lost its generation race) says why in `error` and
    leaves the host due, so the clock's next beat runs it again."""
    result: dict[str, Any] = {
        "host": host["name"],
        "provider": host["provider_uuid"],
        "inventory_written": False,
        "error": None,
    }
    if host["forced_down"]:
        result["error"] = "compute service is down"
        return result
    rp = host["provider_uuid"]
    try:
        lab.placement.ensure_provider(rp, host["name"])
        result["inventory_written"] = lab.placement.update_inventories(rp, inventory_of(host))
        lab.placement.set_disabled_trait(rp, bool(host["disabled"]))
    except (PlacementError, GaveUp) as exc:  # refused, or every race lost
        log.warning(
            "Failed to update inventory for resource provider %s (host %s): %s",
            rp,
            host["name"],
            exc,
        )
        result["error"] = str(exc)
        return result
    store.mark_reported(lab.engine, [host["uuid"]], lab.now())
    return result


def run_tracker(lab: Lab, host: str | None = None) -> list[dict[str, Any]]:
    hosts = store.listing(lab.engine, name=host)
    if host is not None and not hosts:
        raise NotFound(f"Compute host {host} could not be found.")
    return [report(lab, h) for h in hosts]


def configure(lab: Lab, name: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Change a host's configuration (as editing nova.conf and restarting), then run
    its resource tracker."""
    host = _by_name(lab, name)
    unknown = set(changes) - set(CONFIG_KEYS)
    if unknown:
        raise BadRequest(f"Unknown host settings: {', '.join(sorted(unknown))}.")
    values = _validated({**host, **changes})
    values.pop("name")
    host = store.update(lab.engine, host["uuid"], lab.now(), **values)
    report(lab, host)
    return store.get(lab.engine, uuid=host["uuid"])


def _by_name(lab: Lab, name: str) -> dict[str, Any]:
    host = store.get(lab.engine, name=name)
    if host is None:
        raise NotFound(f"Compute host {name} could not be found.")
    return host


def service(lab: Lab, uuid: str) -> dict[str, Any]:
    host = store.get(lab.engine, uuid=uuid)
    if host is None:
        raise NotFound(f"Service {uuid} could not be found.")
    return host


def update_service(
    lab: Lab,
    uuid: str,
    *,
    status: str | None = None,
    disabled_reason: str | None = None,
    forced_down: bool | None = None,
) -> dict[str, Any]:
    """PUT /os-services/{id}: enable/disable (with a reason), force down/up. Coming
    back up is a nova-compute restart: evacuated servers are cleaned off this host."""
    host = service(lab, uuid)
    values: dict[str, Any] = {}
    if status is not None:
        values["disabled"] = status == "disabled"
        values["disabled_reason"] = disabled_reason if status == "disabled" else None
    if forced_down is not None:
        values["forced_down"] = forced_down
    restarted = host["forced_down"] and forced_down is False
    host = store.update(lab.engine, uuid, lab.now(), **values)
    if restarted:
        moves.clean_evacuated(lab, host)
    if not host["forced_down"] and status is not None:
        try:
            lab.placement.set_disabled_trait(host["provider_uuid"], bool(host["disabled"]))
        except (PlacementError, GaveUp) as exc:
            log.warning("Could not update the status trait of %s: %s", host["name"], exc)
    if restarted:
        report(lab, host)
    return store.get(lab.engine, uuid=uuid)


def delete_service(lab: Lab, uuid: str, *, drained_check: bool = True) -> dict[str, Any]:
    """DELETE /os-services/{id}: refused while the host has servers or moves in
    progress; then the service and its compute node go, and the compute node's
    provider is deleted from Placement. If Placement refuses (allocations remain),
    the provider is left behind and the error logged, as Nova does."""
    host = service(lab, uuid)
    if drained_check:
        if server_store.count_on_host(lab.engine, host["name"]):
            raise Conflict(
                "Unable to delete compute service that is hosting instances. "
                "Migrate or delete the instances first."
            )
        if migration_store.in_progress(lab.engine, host=host["name"]):
            raise Conflict(
                "Unable to delete compute service that has in-progress migrations. "
                "Complete the migrations or delete the instances first."
            )
    store.delete(lab.engine, uuid)
    result = {"host": host["name"], "provider": host["provider_uuid"], "provider_deleted": True}
    try:
        lab.placement.delete_provider(host["provider_uuid"])
    except PlacementError as exc:
        if exc.status == 404:
            return result
        log.error(
            "Unable to delete compute node resource provider %s for host %s: %s",
            host["provider_uuid"],
            host["name"],
            exc,
        )
        result.update(provider_deleted=False, error=str(exc))
    return result
