"""What a drain needs, checked before anything is written: the host's nova-compute up
(a live migration is refused while it is down), each server in a state that can be
live-migrated, each one a host with room for what it holds here, and nothing held
on the host that no migration takes away.

Each server's host is the scheduler's choice (`tally.nova.scheduling`, the rule the
lab's scheduler places with): one `GET /allocation_candidates` per shape held (limit
1000, as `max_placement_results`, `!COMPUTE_STATUS_DISABLED`), the hosts whose
compute service is up and enabled, the most free MEMORY_MB first (the RAM weigher,
which spreads), ties by name, the servers placed one after another, in the order
the drain migrates them, on the room the ones before leave. `tally drain HOST
--what-if` tries this plan in a sandbox (`drain_what_if`), so the two cannot
disagree on where a server goes or which one finds no host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.errors import BadInput
from tally.clients.placement import PlacementClient
from tally.doctor.cloud import paged
from tally.nova import scheduling
from tally.nova.shapes import query_value
from tally.progress import Progress, quiet

MOVABLE = ("ACTIVE", "PAUSED")  # the states Nova live-migrates from

Allocations = dict[str, dict[str, int]]  # consumer or provider -> class -> amount


@dataclasses.dataclass(frozen=True)
class Planned:
    """One server of the host, as the check sees it."""

    server: str
    name: str | None
    label: str  # `name (uuid)`, or the uuid
    held: dict[str, int]  # what it holds on the host's tree, by class
    target: str | None = None  # the host the scheduler would take (its name), if any
    target_uuid: str | None = None  # that host's provider
    blocker: str | None = None  # why it cannot be live-migrated now
    no_room: bool = False  # the blocker: no host has room for it


@dataclasses.dataclass(frozen=True)
class Plan:
    service: dict[str, Any]
    provider: str | None
    servers: tuple[Planned, ...]
    left: Allocations  # what would stay on the host: held by no server of it
    blockers: tuple[str, ...]  # the host's own, then each server's
    hosts: dict[str, str]  # provider -> name of the hosts the servers may go to (when asked)


def plan(
    placement: PlacementClient, compute: ComputeClient, host: str, progress: Progress = quiet
) -> Plan:
    """The plan of a drain of `host` as the compute API and Placement show it now;
    BadInput when the compute API has no such host."""
    services = compute.get("/os-services", {"host": host, "binary": "nova-compute"})["services"]
    if not services:
        raise BadInput(f"no compute host {host} in the compute API")
    named = placement.get("/resource_providers", {"name": host})["resource_providers"]
    provider = named[0]["uuid"] if named else None
    found = paged(compute, "/servers/detail", "servers", {"all_tenants": 1, "host": host})
    return check(placement, compute, host, services[0], provider, list(found), progress)


def check(
    placement: PlacementClient,
    compute: ComputeClient,
    host: str,
    service: dict[str, Any],
    provider: str | None,
    servers: list[dict[str, Any]],
    progress: Progress = quiet,
) -> Plan:
    """The plan of a drain of `host`, and whatever would stop it."""
    tree = _tree(placement, provider)
    holdings = _holdings(placement, tree)
    blockers: list[str] = []
    if servers and scheduling.down(service):
        blockers.append(
            f"nova-compute on {host} is down: a live migration needs it up (start it, or "
            f"evacuate its servers: openstack server evacuate SERVER)"
        )
    ids = {s["id"] for s in servers}
    left = {c: held for c, held in holdings.items() if c not in ids}
    for consumer, held in left.items():
        blockers.append(
            f"{consumer} holds {query_value(held)} on {host} and is no server there: no "
            f"migration takes it away (tally audit --provider {provider})"
        )
    rooms: _Rooms | None = None
    down, planned = f"nova-compute on {host} is down", []
    for n, server in enumerate(servers):
        progress("check the plan", n, len(servers))
        one = refusal(server, holdings.get(server["id"], {}))
        if one.blocker is None and scheduling.down(service):  # said once for all, above
            one = dataclasses.replace(one, blocker=down)
        elif one.blocker is None and one.held:
            rooms = rooms or _Rooms(placement, compute, host)
            one = rooms.place(one)
        if one.blocker and one.blocker != down:
            blockers.append(one.blocker)
        planned.append(one)
    progress("check the plan", len(servers), len(servers))
    hosts = rooms.hosts if rooms else {}
    return Plan(service, provider, tuple(planned), left, tuple(blockers), hosts)


def refusal(server: Mapping[str, Any], held: dict[str, int]) -> Planned:
    """The server as the check starts from it: blocked when the compute API would
    not live-migrate it in its state."""
    label = f"{server['name']} ({server['id']})" if server.get("name") else server["id"]
    status, task = server.get("status") or "", server.get("OS-EXT-STS:task_state")
    if status not in MOVABLE or task:
        state = status + (f", task {task}" if task else "")
        why = (
            f"server {label} is {state}: a live migration needs it ACTIVE or PAUSED with no "
            f"task under way"
        )
        return Planned(server["id"], server.get("name"), label, held, blocker=why)
    return Planned(server["id"], server.get("name"), label, held)


def _tree(placement: PlacementClient, provider: str | None) -> list[str]:
    """The host's provider and its children (the servers' devices, say)."""
    if provider is None:
        return []
    if not placement.at_least("1.14"):
        return [provider]
    found = placement.get("/resource_providers", {"in_tree": provider})["resource_providers"]
    return [p["uuid"] for p in found] or [provider]


def _holdings(placement: PlacementClient, tree: Iterable[str]) -> Allocations:
    """consumer -> what it holds on the tree, summed by class."""
    found: Allocations = {}
    for rp in tree:
        for consumer, resources in placement.provider_allocations(rp).items():
            mine = found.setdefault(consumer, {})
            for rc, amount in resources.items():
                mine[rc] = mine.get(rc, 0) + amount
    return found


class _Rooms:
    """The room of the other hosts, as the servers placed so far leave it: one
    answer per shape, read before anything is placed, less what was placed since
    (`tally.nova.scheduling.place`'s `taken`)."""

    def __init__(self, placement: PlacementClient, compute: ComputeClient, host: str) -> None:
        self.placement = placement
        services = compute.get("/os-services", {"binary": "nova-compute"})["services"]
        names = {
            p["uuid"]: p["name"] for p in placement.get("/resource_providers")["resource_providers"]
        }
        self.hosts = scheduling.usable_hosts(services, names, host)
        self.taken: Allocations = {}
        self.answers: dict[tuple, dict[str, Any]] = {}

    def place(self, one: Planned) -> Planned:
        if not self.placement.at_least("1.10"):
            self.placement.note("allocation candidates need placement 1.10: targets not checked")
            return one
        picks = scheduling.place(self._candidates(one.held), self.hosts, taken=self.taken)
        if not picks:
            shape = query_value(one.held)
            why = (
                f"no other enabled host has room for server {one.label} ({shape}) once the "
                f"servers before it are placed: see tally capacity --resource {shape}"
            )
            return dataclasses.replace(one, blocker=why, no_room=True)
        (pick,) = picks
        for rp, held in pick.allocations.items():
            mine = self.taken.setdefault(rp, {})
            for rc, n in held.items():
                mine[rc] = mine.get(rc, 0) + n
        return dataclasses.replace(one, target=self.hosts[pick.host], target_uuid=pick.host)

    def _candidates(self, held: dict[str, int]) -> dict[str, Any]:
        key = tuple(sorted(held.items()))
        if key not in self.answers:
            params: dict[str, Any] = {"resources": query_value(held), "limit": scheduling.LIMIT}
            if self.placement.at_least("1.22"):
                params["required"] = f"!{scheduling.DISABLED_TRAIT}"
            self.answers[key] = self.placement.get("/allocation_candidates", params)
        return self.answers[key]
