"""What a drain needs, checked before anything is written: the host's nova-compute up
(a live migration is refused while it is down), each server in a state that can be
live-migrated, each one a host with room for what it holds here, and nothing held
on the host that no migration takes away.

The room is read from Placement as Nova's scheduler reads it: one `GET
/allocation_candidates` per shape held (limit 1000, as `max_placement_results`),
hosts whose service is disabled (`!COMPUTE_STATUS_DISABLED`) or down left out, the
host with the most free MEMORY_MB taken first (the RAM weigher, which spreads), the
servers placed one after another on the room the ones before leave. The host named
is where the check found room; the scheduler picks its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor.fill import DISABLED
from tally.nova import fill
from tally.nova.shapes import query_value
from tally.progress import Progress, quiet

MOVABLE = ("ACTIVE", "PAUSED")  # the states Nova live-migrates from
LIMIT = 1000  # Nova's [scheduler] max_placement_results

Allocations = dict[str, dict[str, int]]  # consumer or provider -> class -> amount


@dataclasses.dataclass(frozen=True)
class Planned:
    """One server of the host, as the check sees it."""

    server: str
    label: str  # `name (uuid)`, or the uuid
    held: dict[str, int]  # what it holds on the host's tree, by class
    target: str | None = None  # a host with room for it (its name), when one was found
    blocker: str | None = None  # why it cannot be live-migrated now


@dataclasses.dataclass(frozen=True)
class Plan:
    service: dict[str, Any]
    provider: str | None
    servers: tuple[Planned, ...]
    left: Allocations  # what would stay on the host: held by no server of it
    blockers: tuple[str, ...]  # the host's own, then each server's


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
    if servers and _down(service):
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
        one = _plan_one(server, holdings.get(server["id"], {}))
        if one.blocker is None and _down(service):  # said once for all, above
            one = dataclasses.replace(one, blocker=down)
        elif one.blocker is None and one.held:
            rooms = rooms or _Rooms(placement, compute, set(tree), host)
            one = rooms.place(one)
        if one.blocker and one.blocker != down:
            blockers.append(one.blocker)
        planned.append(one)
    progress("check the plan", len(servers), len(servers))
    return Plan(service, provider, tuple(planned), left, tuple(blockers))


def _down(service: Mapping[str, Any]) -> bool:
    return service.get("state") == "down" or bool(service.get("forced_down"))


def _plan_one(server: Mapping[str, Any], held: dict[str, int]) -> Planned:
    label = f"{server['name']} ({server['id']})" if server.get("name") else server["id"]
    status, task = server.get("status") or "", server.get("OS-EXT-STS:task_state")
    if status not in MOVABLE or task:
        state = status + (f", task {task}" if task else "")
        why = (
            f"server {label} is {state}: a live migration needs it ACTIVE or PAUSED with no "
            f"task under way"
        )
        return Planned(server["id"], label, held, blocker=why)
    return Planned(server["id"], label, held)


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
    """The room of the other hosts, as the servers placed so far leave it."""

    def __init__(
        self, placement: PlacementClient, compute: ComputeClient, source: set[str], host: str
    ) -> None:
        self.placement = placement
        self.excluded = source | _unusable(placement, compute, host)
        self.room: dict[fill.Key, int] = {}
        self.answers: dict[tuple, tuple[list[fill.Allocations], dict[str, str]]] = {}
        self.names: dict[str, str] = {}

    def place(self, one: Planned) -> Planned:
        if not self.placement.at_least("1.10"):
            self.placement.note("allocation candidates need placement 1.10: targets not checked")
            return one
        requests, roots = self._candidates(one.held)
        best, best_free = None, -1
        for allocations in requests:
            if any(roots.get(rp, rp) in self.excluded for rp in allocations):
                continue
            amounts = [((rp, rc), n) for rp, held in allocations.items() for rc, n in held.items()]
            if any(self.room.get(key, 0) < n for key, n in amounts):
                continue
            free = max(self.room.get((rp, "MEMORY_MB"), 0) for rp in allocations)
            if free > best_free:
                best, best_free = allocations, free
        if best is None:
            shape = query_value(one.held)
            why = (
                f"no other enabled host has room for server {one.label} ({shape}) once the "
                f"servers before it are placed: see tally capacity --resource {shape}"
            )
            return dataclasses.replace(one, blocker=why)
        for rp, held in best.items():
            for rc, n in held.items():
                self.room[(rp, rc)] -= n
        root = roots.get(next(iter(best)), next(iter(best)))
        return dataclasses.replace(one, target=self._name(root))

    def _candidates(self, held: dict[str, int]) -> tuple[list[fill.Allocations], dict[str, str]]:
        key = tuple(sorted(held.items()))
        if key not in self.answers:
            params: dict[str, Any] = {
                "resources": query_value(held),
                "limit": LIMIT,
            }
            if self.placement.at_least("1.22"):
                params["required"] = f"!{DISABLED}"
            answer = self.placement.get("/allocation_candidates", params)
            for room_key, room in fill.room_of(answer).items():
                self.room.setdefault(room_key, room)  # nothing is written meanwhile
            self.answers[key] = (fill.allocation_requests(answer), fill.roots_of(answer))
        return self.answers[key]

    def _name(self, rp: str) -> str:
        if rp not in self.names:
            self.names[rp] = self.placement.get(f"/resource_providers/{rp}").get("name") or rp
        return self.names[rp]


def _unusable(placement: PlacementClient, compute: ComputeClient, host: str) -> set[str]:
    """The providers of the other hosts whose nova-compute is down or disabled (by
    name: a compute node's provider is named after it)."""
    services = compute.get("/os-services", {"binary": "nova-compute"})["services"]
    names = {
        s["host"] for s in services if s["host"] != host and (_down(s) or s["status"] != "enabled")
    }
    found = set()
    for name in sorted(names):
        named = placement.get("/resource_providers", {"name": name})["resource_providers"]
        found |= {p["uuid"] for p in named}
    return found
