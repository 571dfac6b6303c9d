"""The lab as a whole: its clock (the periodic tick), a summary, its clouds.yaml."""

from __future__ import annotations

import collections
import datetime as dt
import logging
from typing import Any

import yaml

from tally.compute.context import Lab
from tally.compute.ops import hosts, moves
from tally.compute.store import hosts as host_store
from tally.compute.store import migrations as migration_store
from tally.compute.store import servers as server_store
from tally.identity.users import parse_users

log = logging.getLogger("tally.compute")
CLOUD_NAME = "tally-lab"


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
