"""Which host Nova's scheduler takes among Placement's candidates: one `GET
/allocation_candidates` (at most `LIMIT`, `required=!COMPUTE_STATUS_DISABLED`), the
hosts that may take it (a compute service up and enabled, not the server's own
host: the ComputeFilter), then the most free MEMORY_MB of the host's own provider
as the provider summaries count it (spreading, as the RAMWeigher does), ties by
host name; of the chosen host, its first candidate that fits. A host is the root of
its candidate's tree (`fill.host_of`).

One rule for everything that places: the lab's scheduler (`tally.compute.ops.
scheduler`) claims where it says, `tally drain HOST` checks its plan with it (one
answer per shape, each server placed on the room the ones before leave: `taken`),
and `tally drain HOST --what-if` tries that plan in a sandbox; so the check, the
prediction and the lab's migrations take the same hosts.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from tally.nova import fill

LIMIT = 1000  # candidates asked for one placement (Nova's max_placement_results)
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"  # on a disabled compute service's provider

Allocations = dict[str, dict[str, int]]  # provider uuid -> class -> amount


@dataclasses.dataclass(frozen=True)
class Pick:
    """Where one server goes: its host's provider, and what it claims by provider."""

    host: str
    allocations: Allocations


def down(service: Mapping[str, Any]) -> bool:
    """A compute service that does not answer (or is forced down): no live
    migration from it, no server scheduled to it."""
    return service.get("state") == "down" or bool(service.get("forced_down"))


def usable_hosts(
    services: Iterable[Mapping[str, Any]], names: Mapping[str, str], source: str
) -> dict[str, str]:
    """Provider uuid -> host name of the hosts the scheduler may use for a server
    of `source` (the ComputeFilter: a compute service up and enabled; a compute
    node's provider is named after its host), from the compute services and every
    provider's name (uuid -> name)."""
    ok = {
        s["host"]
        for s in services
        if s["host"] != source and not down(s) and s["status"] == "enabled"
    }
    return {rp: name for rp, name in names.items() if name in ok}


def place(
    answer: Mapping[str, Any],
    hosts: Mapping[str, str],
    count: int = 1,
    exclude: Iterable[str] = (),
    taken: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Pick]:
    """Where `count` servers of the answer's shape go, one after another, each on
    the room the ones before leave; fewer picks when the room runs out. `hosts`:
    provider uuid -> host name of the hosts it may use, but `exclude`; `taken`:
    provider -> class -> amount placed since the answer was read."""
    summaries = answer.get("provider_summaries") or {}
    free = fill.room_of(answer)
    for rp, held in (taken or {}).items():
        for rc, n in held.items():
            free[(rp, rc)] = free.get((rp, rc), 0) - n
    skip = set(exclude)
    options: dict[str, list[Allocations]] = {}
    for allocations in fill.allocation_requests(answer):
        host = fill.host_of(allocations, summaries)
        if host in hosts and host not in skip:
            options.setdefault(host, []).append(allocations)
    heap = [_weight(free, host, hosts[host]) for host in options]
    heapq.heapify(heap)
    picks: list[Pick] = []
    while len(picks) < count and heap:
        *_, host = heapq.heappop(heap)
        fitting = next((a for a in options[host] if _fits(free, a)), None)
        if fitting is None:
            continue  # full: its room only shrinks from here
        picks.append(Pick(host, fitting))
        for rp, held in fitting.items():
            for rc, n in held.items():
                free[(rp, rc)] -= n
        heapq.heappush(heap, _weight(free, host, hosts[host]))
    return picks


def _weight(free: Mapping[fill.Key, int], host: str, name: str) -> tuple[int, str, str]:
    """The order hosts are taken in: the most free MEMORY_MB first, then by name."""
    return -free.get((host, "MEMORY_MB"), 0), name, host


def _fits(free: Mapping[fill.Key, int], allocations: Allocations) -> bool:
    return all(
        free.get((rp, rc), 0) >= n for rp, held in allocations.items() for rc, n in held.items()
    )
