"""Which host Nova's scheduler takes among Placement's candidates, as the lab's
scheduler takes it (`tally.compute.ops.scheduler`): one `GET /allocation_candidates`
(at most `LIMIT`, `required=!COMPUTE_STATUS_DISABLED`), the hosts that may take it
(a compute service up and enabled, not the server's own host: the ComputeFilter),
then the most free MEMORY_MB as the provider summaries count it (spreading, as
the RAMWeigher does), ties by host name. A host is one provider, as in the lab.

The lab places with it, and `tally drain HOST --what-if` predicts with it, so the
prediction takes the host the real drain's migrations get.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LIMIT = 1000  # candidates asked for one placement
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"  # on a disabled compute service's provider

Free = dict[str, int]  # resource class -> capacity - used


def free_room(summary: Mapping[str, Any]) -> Free:
    """What a provider summary says is free, per class."""
    return {
        rc: int(v["capacity"]) - int(v["used"]) for rc, v in summary.get("resources", {}).items()
    }


def weight(free: Mapping[str, int], name: str) -> tuple[int, str]:
    """The order hosts are taken in: the most free MEMORY_MB first, then by name."""
    return -free.get("MEMORY_MB", 0), name


def fits(free: Mapping[str, int], resources: Mapping[str, int]) -> bool:
    return all(free.get(rc, 0) >= n for rc, n in resources.items())


def host_rooms(
    answer: Mapping[str, Any], hosts: Mapping[str, str], exclude: frozenset[str] = frozenset()
) -> dict[str, Free]:
    """Provider uuid -> free room, of each candidate on one provider that is a host
    the scheduler may use (`hosts`: provider uuid -> host name), but `exclude`."""
    summaries = answer.get("provider_summaries", {})
    found: dict[str, Free] = {}
    for request in answer.get("allocation_requests", []):
        allocations = request["allocations"]
        if len(allocations) != 1:
            continue  # a host is one provider
        rp = next(iter(allocations))
        if rp in hosts and rp not in exclude:
            found[rp] = free_room(summaries.get(rp, {}))
    return found


def choose(
    answer: Mapping[str, Any],
    hosts: Mapping[str, str],
    resources: Mapping[str, int],
    exclude: frozenset[str] = frozenset(),
) -> str | None:
    """The provider one server of `resources` goes to, or None (no valid host)."""
    rooms = host_rooms(answer, hosts, exclude)
    fitting = [rp for rp, free in rooms.items() if fits(free, resources)]
    return min(fitting, key=lambda rp: weight(rooms[rp], hosts[rp]), default=None)
