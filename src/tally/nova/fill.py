"""How many more of one shape fit: a fill over one `GET /allocation_candidates` answer.

Plain data in (the answer's dicts), dataclasses out; no HTTP, no database, so the
CLI (`tally capacity`), a metrics gauge or a web page can all use it.

Why one answer is enough. The answer (no `limit`) lists every way one instance of
the shape can be placed right now, and its provider summaries give capacity and
used of every inventory involved. min_unit, max_unit, step size, traits,
aggregates and tree shape concern one instance's amounts, the same for every
instance: they decide which candidates exist, not how often one can be used. As
instances are added only `used` grows, so a candidate that stops fitting never
fits again and no new candidate appears.

The fill. A scheduler that always claims the first candidate of a fresh answer
("claim until refused") takes candidate 1 until it no longer fits, then
candidate 2, and so on, provided the server keeps the survivors in the same
relative order as candidates drop out. Tally does: one request group's
candidates come tree by tree (internal id order) and, inside a tree, provider
by provider in id order, filtered by what fits. So the count is a greedy walk
over the list once: candidate i takes min(room // amount) over its
(provider, class) pairs, and the room left goes on to candidate i+1.

When the order matters, and where it is not that order:
- Candidates compete only when the same inventory can serve several of them: a
  sharing provider anchored to several trees, or a class that several
  providers of one tree offer. Otherwise each tree has one candidate, trees are
  disjoint, and the count is the same in any order.
- Upstream Placement builds candidates in Python sets: their order follows
  hashes (seeded per worker process) and is not kept as the set shrinks. With
  competing candidates, claim-until-refused against upstream can give
  different totals from run to run; this fill gives the total for the order of
  the answer it was given.
- `randomize_allocation_candidates` shuffles the answer (Tally and upstream):
  the same caveat. `max_allocation_candidates` cuts it: candidates beyond the
  cut are not seen, so the count can be short.
- Nova's scheduler weighs hosts instead of taking the first candidate; with
  competing candidates its count can differ too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from tally.amounts import held as resources_of

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"

Key = tuple[str, str]  # (provider uuid, resource class)
Allocations = dict[str, dict[str, int]]  # provider uuid -> class -> amount


@dataclasses.dataclass(frozen=True)
class Placed:
    """One candidate of the answer, and how many instances the fill put there."""

    allocations: Allocations
    host: str  # the provider the instances are counted on (see `host_of`)
    count: int
    blocked: tuple[Key, ...]  # after the fill: the inventories too short for one more


@dataclasses.dataclass(frozen=True)
class HostFit:
    """What fits on one host: the sum over its candidates."""

    uuid: str
    fits: int
    limiting: tuple[Key, ...]  # every inventory that stops one of its candidates


@dataclasses.dataclass(frozen=True)
class AggregateFit:
    aggregate: str | None  # None: hosts in no aggregate
    hosts: tuple[str, ...]
    fits: int


@dataclasses.dataclass(frozen=True)
class Fill:
    total: int
    candidates: tuple[Placed, ...]  # in the answer's order
    hosts: tuple[HostFit, ...]  # in the order of each host's first candidate
    room: dict[Key, int]  # capacity - used left after the fill
    root_of: dict[str, str]  # provider -> root, from the summaries


def allocation_requests(answer: Mapping[str, Any]) -> list[Allocations]:
    """The answer's candidates as {provider: {class: amount}}, in its order (the
    list form of microversions before 1.12 too)."""
    found = []
    for request in answer.get("allocation_requests") or []:
        held = request["allocations"]
        if isinstance(held, list):
            held = {a["resource_provider"]["uuid"]: a for a in held}
        found.append(resources_of(held))
    return found


def room_of(answer: Mapping[str, Any]) -> dict[Key, int]:
    """capacity - used of every inventory the provider summaries show."""
    room = {}
    for rp, summary in (answer.get("provider_summaries") or {}).items():
        for rc, record in (summary.get("resources") or {}).items():
            room[(rp, rc)] = int(record["capacity"]) - int(record.get("used") or 0)
    return room


def roots_of(answer: Mapping[str, Any]) -> dict[str, str]:
    """provider -> root provider (1.29+ summaries; before, each provider is its own)."""
    summaries = answer.get("provider_summaries") or {}
    return {rp: s.get("root_provider_uuid") or rp for rp, s in summaries.items()}


def host_of(allocations: Mapping[str, Any], summaries: Mapping[str, Any]) -> str:
    """Where an instance of this candidate is counted: the root of the first
    provider that is not a sharing provider (the compute host, whose tree may
    give the classes from several providers); a candidate served by sharing
    providers alone is counted on the first of them."""
    providers = list(allocations)
    for rp in providers:
        summary = summaries.get(rp) or {}
        if SHARING_TRAIT not in (summary.get("traits") or ()):
            return summary.get("root_provider_uuid") or rp
    first = summaries.get(providers[0]) or {}
    return first.get("root_provider_uuid") or providers[0]


def fill(answer: Mapping[str, Any]) -> Fill:
    """Fill the room the answer reports, candidate after candidate in its order."""
    summaries = answer.get("provider_summaries") or {}
    room = room_of(answer)
    requests = allocation_requests(answer)
    counts = []
    for allocations in requests:
        amounts = _amounts(allocations)
        if not amounts:  # nothing asked: nothing to count
            counts.append(0)
            continue
        n = max(0, min(room.get(key, 0) // amount for key, amount in amounts))
        for key, amount in amounts:
            room[key] = room.get(key, 0) - n * amount
        counts.append(n)
    placed = tuple(
        Placed(
            allocations=allocations,
            host=host_of(allocations, summaries),
            count=n,
            blocked=tuple(k for k, amount in _amounts(allocations) if room.get(k, 0) < amount),
        )
        for allocations, n in zip(requests, counts, strict=True)
    )
    return Fill(
        total=sum(counts),
        candidates=placed,
        hosts=_by_host(placed),
        room=room,
        root_of=roots_of(answer),
    )


def by_aggregate(
    hosts: Iterable[HostFit], aggregates_of: Mapping[str, Iterable[str]]
) -> list[AggregateFit]:
    """The hosts' counts summed per aggregate of each host (a host in two
    aggregates counts in both; hosts in none under None), in aggregate order."""
    members: dict[str | None, list[HostFit]] = {}
    for host in hosts:
        for aggregate in sorted(aggregates_of.get(host.uuid) or [None]):  # type: ignore[list-item]
            members.setdefault(aggregate, []).append(host)
    order = sorted(members, key=lambda a: (a is None, a or ""))
    return [
        AggregateFit(a, tuple(h.uuid for h in members[a]), sum(h.fits for h in members[a]))
        for a in order
    ]


def _amounts(allocations: Allocations) -> list[tuple[Key, int]]:
    return [
        ((rp, rc), int(amount))
        for rp, resources in allocations.items()
        for rc, amount in resources.items()
        if int(amount) > 0
    ]


def _by_host(placed: Iterable[Placed]) -> tuple[HostFit, ...]:
    fits: dict[str, int] = {}
    limiting: dict[str, dict[Key, None]] = {}
    for p in placed:
        fits[p.host] = fits.get(p.host, 0) + p.count
        limiting.setdefault(p.host, {}).update(dict.fromkeys(p.blocked))
    return tuple(HostFit(host, fits[host], tuple(limiting[host])) for host in fits)
