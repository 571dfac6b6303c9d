"""Step 4: from candidates (ids) to the answer (uuids and names): drop what old
microversions cannot express, apply `limit`, and summarize every provider of
the trees the remaining candidates touch (capacity and usage per class,
traits, parent and root).

The answer is built directly in the newest response shape (plain dicts, since
it can hold tens of thousands of entries); the handler strips what older
microversions do not show.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import random
from typing import Any

from tally.placement.ledger.candidates.groups import Context
from tally.placement.ledger.candidates.options import Options
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.candidates.snapshot import Candidate


@dataclasses.dataclass
class Result:
    # [{"allocations": {rp_uuid: {"resources": {class: n}}}, "mappings": {suffix: [rp_uuid]}}]
    allocation_requests: list[dict[str, Any]]
    # {rp_uuid: {"resources": {class: {"capacity", "used"}}, "traits": [...],
    #            "parent_provider_uuid", "root_provider_uuid"}}
    provider_summaries: dict[str, dict[str, Any]]


_FIRST = operator.itemgetter(0)  # a candidate's allocations, an allocation's provider

# What an answer shows: the candidates (after `limit`), the providers to
# summarize and their roots; None when there is nothing to show.
Chosen = tuple[list[Candidate], set[int], set[int]] | None


def build(
    ctx: Context, request: CandidateRequest, found: list[Candidate], options: Options
) -> Result:
    chosen = choose(ctx, request, found, options)
    if chosen is None:
        return Result([], {})
    found, members, roots = chosen
    return Result(_requests(ctx, request, found), summaries_of(ctx, request, members, roots))


def choose(
    ctx: Context, request: CandidateRequest, found: list[Candidate], options: Options
) -> Chosen:
    """Drop what old microversions cannot express, apply `limit`, and find the
    providers to summarize (every one of the trees the candidates touch)."""
    if not found:
        return None
    snap = ctx.snap
    root_of = ctx.root_of
    scope: set[int] | None = None  # providers to summarize; None: whole trees
    if not request.nested_aware and snap.has_trees():
        # Before 1.29 a candidate may take from one provider per tree only.
        found = [c for c in found if _one_per_tree(c, root_of)]
        scope = {rp for allocs, _ in found for rp, _, _ in allocs}
    if request.limit and request.limit < len(found):
        if options.randomize:
            found = random.sample(found, request.limit)
        else:
            found = found[: request.limit]
    elif options.randomize:
        random.shuffle(found)
    if not found:
        return None
    allocations = itertools.chain.from_iterable(map(_FIRST, found))
    roots = set(map(root_of.__getitem__, map(_FIRST, allocations)))
    members = snap.tree_members(roots)
    if scope is not None:
        members &= scope
    if not snap.whole:  # (a whole source holds every provider the answer names)
        mapped = {rp for _, mappings in found for providers in mappings for rp in providers}
        snap.load_providers(mapped)
    return found, members, roots


def _one_per_tree(candidate: Candidate, root_of: dict[int, int]) -> bool:
    providers = {rp for rp, _, _ in candidate[0]}
    return len(providers) == len({root_of[rp] for rp in providers})


def _requests(
    ctx: Context, request: CandidateRequest, found: list[Candidate]
) -> list[dict[str, Any]]:
    rows = ctx.snap.rows
    names = ctx.class_names
    suffixes = [group.suffix for group in request.groups]
    single = len(suffixes) == 1
    if single:  # one provider gives the whole group: always the same resources
        ids = {name: rc for rc, name in names.items()}
        amounts = sorted((ids[name], n) for name, n in request.groups[0].resources.items())
        whole = {"resources": {names[rc]: n for rc, n in amounts}}  # shared, read-only
        only = suffixes[0]
    out = []
    append = out.append
    for allocs, mappings in found:
        if single:
            providers = mappings[0]
            if len(providers) == 1:  # one group, one provider: the usual case
                uuid = rows[providers[0]][0]
                append({"allocations": {uuid: whole}, "mappings": {only: [uuid]}})
                continue
            mapped = {only: [rows[rp][0] for rp in providers]}
        else:
            mapped = {
                suffix: [rows[rp][0] for rp in providers]
                for suffix, providers in zip(suffixes, mappings, strict=True)
            }
        allocations: dict[str, dict[str, dict[str, int]]] = {}
        for rp, rc, amount in allocs:
            uuid = rows[rp][0]
            entry = allocations.get(uuid)
            if entry is None:
                allocations[uuid] = {"resources": {names[rc]: amount}}
            else:
                entry["resources"][names[rc]] = amount
        append({"allocations": allocations, "mappings": mapped})
    return out


def summaries_of(
    ctx: Context, request: CandidateRequest, members: set[int], roots: set[int]
) -> dict[str, dict[str, Any]]:
    snap = ctx.snap
    kept = snap.kept()
    if request.all_summary_classes and kept is not None:  # kept whole per provider
        return kept.summaries(sorted(members))
    resources: dict[int, dict[str, dict[str, int]]] = {rp: {} for rp in members}
    names = ctx.class_names
    for rc, rows in ctx.stock.items():
        name = names[rc]
        for rp, _, capacity, used, *_ in rows:
            if rp in resources:
                resources[rp][name] = {"capacity": capacity, "used": used}
    if request.all_summary_classes:
        extra = snap.stock_of_trees(roots, skip_classes=ctx.stock.keys())
        names.update(snap.class_names({rc for _, rc, _, _ in extra} - names.keys()))
        for rp, rc, capacity, used in extra:
            if rp in resources:
                resources[rp][names[rc]] = {"capacity": capacity, "used": used}
    traits = snap.trait_names(members)
    rows = snap.rows
    out = {}
    for rp in sorted(members):
        uuid, parent, root = rows[rp]
        out[uuid] = {
            "resources": resources[rp],
            "traits": traits.get(rp, []),
            "parent_provider_uuid": rows[parent][0] if parent is not None else None,
            "root_provider_uuid": rows[root][0],
        }
    return out
