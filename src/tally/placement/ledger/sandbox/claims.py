"""The steps that claim (changes.py): a move, a resize, a boot, each judged as
`PUT /allocations/{consumer}` would be (`allocations.judge`) over the sandbox.

A move or a boot takes the first candidate of a search (a move: the first of
another root than the consumer's, among the first MOVE_LIMIT); what it compared
before it chose is read (`_compared`): the trees its walk came to, up to and
including the chosen one's, and the sharing providers sharing into them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

from tally.placement.error_types import BadRequest, Conflict
from tally.placement.ledger import allocations
from tally.placement.ledger import candidates as search
from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup
from tally.placement.ledger.candidates.snapshot import Candidate
from tally.placement.ledger.sandbox.overlay import Allocations
from tally.placement.ledger.sandbox.trial import Trial
from tally.placement.ledger.sandbox.view import SandboxView

DISABLED = "COMPUTE_STATUS_DISABLED"
# The code of a step refused because the search found no candidate: a sandbox's
# verdict, never an API error (so not among Placement's codes, errors.py).
NO_HOST = "tally.sandbox.no_host"
MOVE_LIMIT = 16  # candidates a move looks at (the first of another root wins)


class _Row(NamedTuple):
    """An inventory with its usage, as `allocations.judge` reads one."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used_now: int


@dataclasses.dataclass
class _Claim:
    """A consumer's new allocations, with what the index said of them."""

    write: allocations.ConsumerWrite
    before: Allocations
    provider_ids: dict[str, int]
    class_ids: dict[str, int]
    released: collections.Counter
    used: dict[int, dict[int, int]]


def move(trial: Trial, uuid: str, to: str) -> dict:
    held, project, user, generation = trial.consumer(uuid)
    shape: collections.Counter = collections.Counter()
    for resources in held.values():
        shape.update(resources)
    group = RequestGroup("", resources=dict(sorted(shape.items())))
    request = CandidateRequest([group], limit=MOVE_LIMIT)
    if to == "anywhere":  # (a disabled compute host's root carries the trait)
        request.root_forbidden = frozenset({DISABLED})
    else:
        group.in_tree = to
    trial.reader.load_providers(held)  # (read before: the providers it leaves)
    walked: list[int] = []
    with trial.view() as view:
        rows, root_of = view.rows, view.root_of()
        roots = {view.root_uuid(u) for u in held} - {None}

        def elsewhere(candidate: Candidate) -> bool:
            return (
                to != "anywhere" or not {rows[root_of[rp]][0] for rp, _, _ in candidate[0]} & roots
            )

        ctx, found = search.first_over(view, request, trial.options, elsewhere, walked)
        chosen = next((c for c in found if elsewhere(c)), None)
        if chosen is None:
            where = "anywhere" if to == "anywhere" else f"in the tree of {to}"
            raise Conflict(
                f"No allocation candidate for consumer {uuid} ({_shape(shape)}) {where}.",
                code=NO_HOST,
            )
        new = _allocations(view, chosen)
        trees, sharing = _compared(view, ctx, walked, chosen)
        claim = _prepare(trial, view, uuid, project, user, None, generation, held, new)
    trial.fresh(trial.reader.load_providers([*new, *sharing], trees))
    return _claim(trial, claim, trees, sharing)


def resize(trial: Trial, uuid: str, resources: dict[str, int]) -> dict:
    held, project, user, generation = trial.consumer(uuid)
    new = {rp: dict(res) for rp, res in held.items()}
    for rc, amount in resources.items():
        holders = [rp for rp, res in held.items() if rc in res]
        if len(holders) != 1:
            raise BadRequest(
                f"Consumer {uuid} holds {rc} on {len(holders)} providers: a resize "
                "changes a class held on one."
            )
        if amount:
            new[holders[0]][rc] = amount
        else:
            del new[holders[0]][rc]
    new = {rp: res for rp, res in new.items() if res}
    trial.reader.load_providers(held)
    with trial.view() as view:
        claim = _prepare(trial, view, uuid, project, user, None, generation, held, new)
    return _claim(trial, claim)


def boot(trial: Trial, uuid: str, change: Any) -> dict:
    assert change.request is not None
    request = dataclasses.replace(change.request, limit=1)
    trial.reads["consumers"][uuid] = None
    trial.reader.load_consumers([uuid])
    if uuid in trial.overlay.consumers or trial.reader.consumers.get(uuid) is not None:
        raise BadRequest(f"Consumer {uuid} exists: a boot makes a new one.")
    walked: list[int] = []
    with trial.view() as view:
        ctx, found = search.first_over(view, request, trial.options, walked=walked)
        if not found:
            raise Conflict(
                f"No allocation candidate for a new consumer {uuid} "
                f"({_shape(_amounts_of(request))}).",
                code=NO_HOST,
            )
        new = _allocations(view, found[0])
        trees, sharing = _compared(view, ctx, walked, found[0])
        claim = _prepare(
            trial,
            view,
            uuid,
            change.project_id,
            change.user_id,
            change.consumer_type,
            None,
            {},
            new,
        )
    trial.fresh(trial.reader.load_providers([*new, *sharing], trees))
    return _claim(trial, claim, trees, sharing)


def _prepare(
    trial: Trial,
    view: SandboxView,
    uuid: str,
    project: str,
    user: str,
    consumer_type: str | None,
    generation: int | None,
    before: Allocations,
    new: Allocations,
) -> _Claim:
    """What the index says of the consumer's new allocations (its names
    checked as `PUT /allocations/{uuid}` checks them)."""
    write = allocations.ConsumerWrite(uuid, project, user, new, True, generation, consumer_type)
    provider_ids = {u: rp for u in new if (rp := view.provider(u)) is not None}
    class_ids = dict(view.class_ids_by_name())
    allocations.check_named([write], provider_ids, class_ids)
    released: collections.Counter = collections.Counter()
    for rp_uuid, resources in before.items():
        rp = view.provider(rp_uuid)
        for rc, amount in resources.items():
            if rp is not None and rc in class_ids:
                released[(rp, class_ids[rc])] += amount
    used = {provider_ids[u]: view.used_of(provider_ids[u]) for u in new}
    return _Claim(write, before, provider_ids, class_ids, released, used)


def _claim(trial: Trial, claim: _Claim, trees: list[str] = (), sharing: list[str] = ()) -> dict:
    """Judge the consumer's new allocations as `PUT /allocations/{uuid}` would."""
    write, provider_ids, class_ids = claim.write, claim.provider_ids, claim.class_ids
    new = write.allocations
    records = trial.records(list(new))
    rows = {
        (provider_ids[u], class_ids[rc]): _Row(
            **r.amounts(), used_now=claim.used[provider_ids[u]].get(class_ids[rc], 0)
        )
        for u in new
        for rc, r in records.get(u, {}).items()
        if rc in class_ids
    }
    allocations.judge([write], provider_ids, class_ids, claim.released, rows)
    compared = {u for root in trees for u in trial.reader.trees.get(root, ())}
    trial.read_providers({*claim.before, *new, *compared, *sharing})
    trial.reads["trees"] = sorted(trees)
    return {
        "op": "allocations",
        "consumer": write.uuid,
        "project_id": write.project_id,
        "user_id": write.user_id,
        "consumer_type": write.consumer_type,
        "allocations": new,
        "before": claim.before,
    }


def _allocations(view: SandboxView, candidate: Candidate) -> Allocations:
    """A candidate's allocations by provider uuid and class name."""
    rows, names = view.rows, view.class_names_by_id()
    found: Allocations = {}
    for rp, rc, amount in candidate[0]:
        found.setdefault(rows[rp][0], {})[names[rc]] = amount
    return found


def _compared(
    view: SandboxView, ctx: Any, walked: list[int], chosen: Candidate
) -> tuple[list[str], list[str]]:
    """The live trees (root uuids) a search compared before it chose `chosen`:
    those the walk came to (up to the chosen one's), and the chosen one's (a
    search in bulk compared every tree; only these are named); and the sharing
    providers sharing into them."""
    root_of, rows = view.root_of(), view.rows
    roots = set(walked) | {root_of[rp] for rp, _, _ in chosen[0]}
    sharing = set()
    for sp in sorted(ctx.sharing) if ctx is not None else ():
        if roots & ctx.anchors_of(sp):
            sharing.add(sp)
    return (
        sorted(rows[r][0] for r in roots if view.is_live(r)),
        sorted(rows[sp][0] for sp in sharing if view.is_live(sp)),
    )


def _shape(resources: dict[str, int]) -> str:
    return ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


def _amounts_of(request: CandidateRequest) -> dict[str, int]:
    found: collections.Counter = collections.Counter()
    for group in request.groups:
        found.update(group.resources)
    return dict(found)
