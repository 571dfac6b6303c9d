"""The lab as a whole: its clock (the periodic tick), a summary, its clouds.yaml, and
reset (back to an empty lab, with its traces in Placement gone)."""

from __future__ import annotations

import collections
import datetime as dt
import logging
from typing import Any

import yaml

from tally.clients.errors import PlacementError
from tally.compute.context import Lab
from tally.compute.errors import Conflict
from tally.compute.ops import hosts, moves
from tally.compute.store import hosts as host_store
from tally.compute.store import lab as lab_store
from tally.compute.store import migrations as migration_store
from tally.compute.store import servers as server_store
from tally.identity.users import parse_users

log = logging.getLogger("tally.compute")
CLOUD_NAME = "tally-lab"
END = ("source", "dest")  # a migration's two ends


def tick(lab: Lab) -> None:
    """One beat of the lab's clock: due migrations advance, due hosts report."""
    moves.step_due(lab)
    seconds = lab.settings.lab_tracker_seconds
    if seconds > 0:
        for host in host_store.due_for_report(
            lab.engine, lab.now() - dt.timedelta(seconds=seconds)
        ):
            hosts.report(lab, host)


def summary(lab: Lab, base_url: str) -> dict[str, Any]:
    all_hosts = host_store.listing(lab.engine)
    servers = server_store.listing(lab.engine, deleted=False)
    statuses = collections.Counter(m["status"] for m in migration_store.listing(lab.engine))
    return {
        "hosts": len(all_hosts),
        "hosts_down": sum(1 for h in all_hosts if h["forced_down"]),
        "hosts_disabled": sum(1 for h in all_hosts if h["disabled"]),
        "servers": len(servers),
        "migrations": dict(statuses),
        "placement": lab.settings.lab_placement_url or "in-process",
        "clouds_yaml": clouds_yaml(lab, base_url),
    }


def clouds_yaml(lab: Lab, base_url: str) -> str:
    """A clouds.yaml for the lab's first admin user (or its first user)."""
    users = list(parse_users(lab.settings.lab_users).values())
    user = next((u for u in users if "admin" in u.roles), users[0])
    cloud = {
        "auth": {
            "auth_url": f"{base_url}/identity/v3",
            "username": user.name,
            "password": user.password,
            "project_name": user.project,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        "region_name": "RegionOne",
        "interface": "public",
        "identity_api_version": 3,
    }
    return yaml.safe_dump({"clouds": {CLOUD_NAME: cloud}}, sort_keys=False)


def reset(lab: Lab) -> dict[str, Any]:
    """Back to an empty lab (no hosts, flavors, servers or migrations; `tally lab up`
    builds it again), and nothing of it left in Placement: the allocations of its
    consumers (servers, deleted ones too, and migrations) and the providers of its
    hosts (those of deleted services too), through Placement's API.

    Refused before anything changes (409) when a consumer the lab did not create holds
    allocations on one of its providers. Then every host goes down (the resource
    tracker stops), Placement is cleaned, and the lab's tables are emptied last, so
    a reset cut short by an error is finished by running it again."""
    servers = server_store.listing(lab.engine, deleted=None)
    migrations = migration_store.listing(lab.engine)
    consumers = {s["uuid"] for s in servers} | {m["uuid"] for m in migrations}
    providers = _providers(lab, servers, migrations)
    holders = {rp: lab.placement.provider_consumers(rp) for rp in providers}
    holders = {rp: found for rp, found in holders.items() if found is not None}
    foreign = {rp: sorted(found - consumers) for rp, found in holders.items() if found - consumers}
    if foreign:
        raise Conflict(
            "Reset refused, nothing was changed: consumers the lab did not create hold "
            "allocations on its providers: "
            + "; ".join(f"{providers[rp]} ({rp}): {', '.join(c)}" for rp, c in foreign.items())
            + ". Free them (tally provider allocation unset CONSUMER --provider UUID), "
            "then reset again."
        )
    host_store.stop_all(lab.engine, lab.now())
    released = sorted(set().union(set(), *holders.values()))
    for consumer in released:
        lab.placement.release(consumer)
    deleted = [rp for rp in sorted(holders) if _delete_provider(lab, rp, providers[rp])]
    cleared = lab_store.clear(lab.engine)
    for rp in holders:  # one the tracker re-created while this ran (it runs no more)
        _delete_provider(lab, rp, providers[rp])
    log.info(
        "Lab reset: %s; %d consumers released and %d providers deleted in Placement",
        ", ".join(f"{n} {name}" for name, n in cleared.items()),
        len(released),
        len(deleted),
    )
    return {**cleared, "consumers_released": released, "providers_deleted": deleted}


def _providers(lab: Lab, servers: list[dict], migrations: list[dict]) -> dict[str, str]:
    """provider uuid -> name of every provider the lab made: its hosts', those its
    migrations name, and those of deleted services (found by the host name that its
    servers and migrations still carry)."""
    found = {h["provider_uuid"]: h["name"] for h in host_store.listing(lab.engine)}
    ends = [(m[f"{end}_provider"], m[f"{end}_compute"]) for m in migrations for end in END]
    for rp, name in ends:
        if rp:
            found.setdefault(rp, name or rp)
    names = {s["host"] for s in servers} | {name for _, name in ends}
    for name in sorted(n for n in names - set(found.values()) if n):
        rp = lab.placement.provider_named(name)
        if rp:
            found.setdefault(rp, name)
    return found


def _delete_provider(lab: Lab, uuid: str, name: str) -> bool:
    """Delete a lab provider; False when it was gone already."""
    try:
        lab.placement.delete_provider(uuid)
    except PlacementError as exc:
        if exc.status == 404:
            return False
        raise Conflict(
            f"Reset stopped: Placement refused to delete resource provider {name} "
            f"({uuid}): {exc.detail}. Run the reset again."
        ) from exc
    return True
