"""When no host fits ("No valid host was found"): which constraint rules out whom.

Each provider tree (a root and its descendants) is judged against the request the
way the scheduler's Placement query does, over the public API: per resource class,
some provider of the tree must have the class with enough free capacity (capacity
minus used), within its min_unit/max_unit/step_size; the required traits must be
on a provider of the tree (`!TRAIT` forbids one); `member_of` asks the root to be
in one of the aggregates. Every constraint is counted separately, so one tree can
be ruled out by several, and the trees missing the least are the closest misses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tally.clients.placement import PlacementClient
from tally.doctor.inventory_check import capacity
from tally.progress import Progress, quiet

CLOSEST = 5


@dataclasses.dataclass(frozen=True)
class Miss:
    root: str
    name: str | None
    reasons: tuple[str, ...]
    shortfall: float  # the fraction of the request missing, summed over classes


@dataclasses.dataclass(frozen=True)
class CandidatesExplanation:
    candidates: int  # what GET /allocation_candidates answered
    trees: int
    ruled_out: dict[str, int]  # constraint -> trees it rules out
    closest: tuple[Miss, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def explain_candidates(
    client: PlacementClient,
    resources: Mapping[str, int],
    required: list[str] = (),  # type: ignore[assignment]
    member_of: list[str] = (),  # type: ignore[assignment]
    progress: Progress = quiet,
) -> CandidatesExplanation:
    params: dict[str, Any] = {"resources": ",".join(f"{k}:{v}" for k, v in resources.items())}
    if required:
        params["required"] = ",".join(required)
    if member_of:
        params["member_of"] = member_of
    answered = client.get("/allocation_candidates", params)["allocation_requests"]
    providers = client.get("/resource_providers")["resource_providers"]
    trees: dict[str, list[dict[str, Any]]] = {}
    for p in providers:
        trees.setdefault(p.get("root_provider_uuid") or p["uuid"], []).append(p)
    ruled: dict[str, int] = {}
    misses = []
    for n, (root, members) in enumerate(sorted(trees.items()), 1):
        progress("judge provider trees", n, len(trees))
        reasons, shortfall = _judge(client, root, members, resources, required, member_of)
        for reason in reasons:
            key = reason.split(":", 1)[0]
            ruled[key] = ruled.get(key, 0) + 1
        if reasons:
            name = next((m.get("name") for m in members if m["uuid"] == root), None)
            misses.append(Miss(root, name, tuple(reasons), shortfall))
    misses.sort(key=lambda m: (len(m.reasons), m.shortfall, m.name or m.root))
    return CandidatesExplanation(len(answered), len(trees), ruled, tuple(misses[:CLOSEST]))


def _judge(
    client: PlacementClient,
    root: str,
    members: list[dict[str, Any]],
    resources: Mapping[str, int],
    required: list[str],
    member_of: list[str],
) -> tuple[list[str], float]:
    free: dict[str, int] = {}
    fits: dict[str, bool] = {}
    for m in members:
        inventories = client.inventories(m["uuid"])["inventories"]
        used = client.usages(m["uuid"]) if inventories else {}
        for rc, record in inventories.items():
            if rc not in resources:
                continue
            left = capacity(record) - int(used.get(rc, 0))
            free[rc] = max(free.get(rc, 0), left)
            fits[rc] = fits.get(rc, False) or _unit_ok(record, resources[rc], left)
    reasons, shortfall = [], 0.0
    for rc, amount in resources.items():
        if rc not in free:
            reasons.append(f"capacity {rc}: no inventory")
            shortfall += 1.0
        elif not fits[rc]:
            reasons.append(f"capacity {rc}: {free[rc]} free of {amount} asked")
            shortfall += max(0, amount - free[rc]) / max(amount, 1)
    if required:
        traits = set()
        for m in members:
            traits |= set(client.get(f"/resource_providers/{m['uuid']}/traits")["traits"])
        missing = [t for t in required if not _trait_ok(t, traits)]
        if missing:
            reasons.append(f"traits: {', '.join(missing)}")
    if member_of:
        aggregates = set(client.get(f"/resource_providers/{root}/aggregates")["aggregates"])
        wanted = [set(group.removeprefix("in:").split(",")) for group in member_of]
        if not all(aggregates & group for group in wanted):
            reasons.append("aggregates: not a member of " + " and ".join(member_of))
    return reasons, shortfall


def _unit_ok(record: Mapping[str, Any], amount: int, left: int) -> bool:
    low, high = int(record.get("min_unit", 1)), int(record.get("max_unit", amount))
    step = int(record.get("step_size", 1)) or 1
    return left >= amount and low <= amount <= high and amount % step == 0


def _trait_ok(trait: str, traits: set[str]) -> bool:
    if trait.startswith("!"):
        return trait[1:] not in traits
    return trait in traits
