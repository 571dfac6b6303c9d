"""Steps 1 and 3 of the search: turn names into ids (refusing unknown classes and
traits in upstream's order), run each group (`groups.py`), then combine one
part of every group per anchor tree into candidates (`combine.py`). The same
candidates come out as upstream's product-then-filter; only the order differs
(anchors in provider id order), which upstream leaves undefined.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable, Iterator, Mapping

from tally.placement.error_types import BadRequest
from tally.placement.ledger.candidates import combine, narrow, walk
from tally.placement.ledger.candidates import groups as g
from tally.placement.ledger.candidates.budget import Budget
from tally.placement.ledger.candidates.options import Options
from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup
from tally.placement.ledger.candidates.snapshot import (
    PROVIDER,
    SHARING_TRAIT,
    Candidate,
    Part,
    Stock,
)
from tally.placement.ledger.candidates.source import Source


@dataclasses.dataclass
class Names:
    """Ids of every name the request mentions (missing names are absent)."""

    classes: dict[str, int]
    traits: dict[str, int]
    aggregates: dict[str, int]
    tree_roots: dict[str, int]
    members: dict[int, set[int]]  # aggregate id -> providers

    @classmethod
    def load(cls, snap: Source, request: CandidateRequest) -> Names:
        trait_names = {SHARING_TRAIT} | request.root_required | request.root_forbidden
        agg_uuids: set[str] = set()
        for group in request.groups:
            trait_names |= set().union(*group.required, group.forbidden)
            agg_uuids |= set().union(*group.member_of, group.forbidden_aggs)
        aggregates = snap.aggregate_ids(agg_uuids)
        return cls(
            classes=snap.class_ids(request.requested_classes()),
            traits=snap.trait_ids(trait_names),
            aggregates=aggregates,
            tree_roots=snap.tree_roots({gr.in_tree for gr in request.groups if gr.in_tree}),
            members=snap.aggregate_members(aggregates.values()),
        )

    def trait_ids(self, names: frozenset[str] | set[str]) -> set[int]:
        missing = sorted(n for n in names if n not in self.traits)
        if missing:
            raise BadRequest(f"No such trait(s): {missing[0]}.")
        return {self.traits[n] for n in names}

    def in_any(self, uuids: frozenset[str]) -> set[int]:
        return set().union(
            *(self.members.get(self.aggregates[u], ()) for u in uuids if u in self.aggregates)
        )

    def resolve(self, group: RequestGroup) -> g.GroupIds | None:
        """The group in ids; None when it can match nothing (unknown aggregate or
        in_tree provider), which makes the whole answer empty as upstream."""
        for name in group.resources:
            if name not in self.classes:
                raise BadRequest(
                    f"Invalid resource class in resources parameter: No such resource class {name}."
                )
        in_aggs = None
        for any_of in group.member_of:
            matching = self.in_any(any_of)
            in_aggs = matching if in_aggs is None else in_aggs & matching
            if not in_aggs:
                return None
        required = [self.trait_ids(any_of) for any_of in group.required]
        forbidden = self.trait_ids(group.forbidden)
        tree = None
        if group.in_tree:
            tree = self.tree_roots.get(group.in_tree)
            if tree is None:
                return None
        amounts = sorted((self.classes[name], n) for name, n in group.resources.items())
        return g.GroupIds(
            group, amounts, required, forbidden, in_aggs, self.in_any(group.forbidden_aggs), tree
        )


# What every search starts from (`read_basics`): the request's names in ids, the
# roots root_required allows (None: any), the holders of its traits, the sharing providers.
Basics = tuple[Names, set[int] | None, dict[int, set[int]], set[int]]


def run(
    snap: Source,
    request: CandidateRequest,
    options: Options,
    narrow: bool = True,
    by_anchor: bool = False,
    budget: Budget | None = None,
    basics: Basics | None = None,
    until: Callable[[Candidate], bool] | None = None,
    walked: list[int] | None = None,
) -> tuple[g.Context | None, list]:
    """The candidates, and the context that holds what was read to find them
    (with `by_anchor`: `(anchors, candidates)`, every candidate without a cut
    and the anchor of each, for kept_answers.py; [] when there is none).

    With `narrow`, only the trees that can anchor a candidate are read (see
    `narrow.py`). If a group then finds nothing, upstream would still have gone
    on to the next groups when the full data had something for this one, and
    refused a later unknown class or trait: then search again, in full.

    `budget` bounds the work (a new one from `options` when None); each try
    (the walk, the bulk search, the search in full) counts afresh under the
    same deadline. `basics`: what `read_basics` found of `request` on `snap`, when
    already read. `until` and `walked`: for the walk tree by tree (`walk.first`),
    when it runs; the bulk search makes every candidate up to the cut.
    """
    if budget is None:
        budget = options.new_budget()
    names, anchor_roots, holders, sharing = basics or read_basics(snap, request)
    if anchor_roots is not None and not anchor_roots:
        return None, []
    anchors: dict[int, set[int]] = {}
    roots = None
    if narrow:
        roots = _allowed_anchors(snap, request, names, holders, sharing, anchors, anchor_roots)
        if roots is not None and sharing:
            snap.load_providers(sharing)  # their trees are read too: they anchor elsewhere
            roots |= {snap.rows[sp][2] for sp in sharing}
    stop = -1 if by_anchor else _stop(request, options)
    if snap.whole and stop > 0 and _walkable(request, options, names):
        trees = Trees(snap, request, names, holders, sharing, anchor_roots, budget)
        if trees.groups is None:
            return trees.ctx, []  # an unknown aggregate or in_tree provider: nothing matches
        order = sorted(roots) if roots is not None else snap.sorted_roots()
        if options.randomize:
            order = random.sample(order, len(order))
        found = walk.first(trees.ctx, trees.groups, order, stop, trees.combine, until, walked)
        if found is not None:
            return trees.ctx, found
        budget = budget.fresh()
    stock = snap.stock(names.classes.values(), roots)
    ctx = g.Context(
        snap=snap,
        stock=stock,
        holders=holders,
        sharing=sharing,
        anchor_roots=anchor_roots,
        class_names={rc: name for name, rc in names.classes.items()},
        root_of=_roots(snap, stock),
        _anchors=anchors,
        budget=budget,
    )
    parts: list[Mapping[int, list[Part]]] = []
    for i, group in enumerate(request.groups):
        ids = names.resolve(group)
        stock = g.stock_for(ctx, ids) if ids is not None else None
        by_group: Mapping[int, list[Part]] = {}
        if stock is not None:
            by_group = (g.same_provider_parts if group.use_same_provider else g.tree_parts)(
                ctx, ids, stock
            )
        if not by_group or (isinstance(by_group, g.LazyParts) and not by_group.any_part()):
            if roots is not None and ids is not None and _any_unknown(names, request, i + 1):
                return run(snap.fresh(), request, options, False, by_anchor, budget.fresh())
            return ctx, []
        parts.append(by_group)
    if by_anchor:
        return ctx, _by_anchor(ctx, request, parts)
    return ctx, _merge(ctx, request, parts, options)


def every_tree(
    snap: Source, request: CandidateRequest, options: Options, budget: Budget
) -> tuple[Trees, g.Context | None, list] | None:
    """For an answer kept per tree (kept_answers.py): the tree-by-tree search of
    `request` (to search stale trees again later) and `run(..., by_anchor=True)`
    of it, from its names read once; None as `Trees.of` (or when an unknown
    aggregate or in_tree provider makes the answer empty)."""
    basics = read_basics(snap, request)
    trees = Trees.of(snap, request, budget, basics)
    if trees is None or trees.groups is None:
        return None
    ctx, grouped = run(snap, request, options, by_anchor=True, budget=budget, basics=basics)
    return trees, ctx, grouped


def read_basics(snap: Source, request: CandidateRequest) -> Basics:
    """What every search starts from: the request's names in ids, the roots
    root_required allows (None: any), the holders of the traits it names, and
    the sharing providers."""
    names = Names.load(snap, request)
    anchor_roots = None
    if request.root_required or request.root_forbidden:
        required = names.trait_ids(request.root_required)
        forbidden = names.trait_ids(request.root_forbidden)
        anchor_roots = snap.roots_with_traits(required, forbidden)
    holders = snap.trait_holders(names.traits.values())
    sharing = holders.get(names.traits.get(SHARING_TRAIT, -1), set())
    return names, anchor_roots, holders, sharing


class Trees:
    """The search one tree at a time, over a whole source (walk.py): for the first
    `limit` candidates, and for the trees whose kept answers went stale
    (kept_answers.py). `groups` is None when an unknown aggregate or in_tree
    provider makes the answer empty."""

    def __init__(
        self,
        snap: Source,
        request: CandidateRequest,
        names: Names,
        holders: dict[int, set[int]],
        sharing: set[int],
        anchor_roots: set[int] | None,
        budget: Budget,
    ) -> None:
        root_of = snap.root_of()
        assert root_of is not None  # (a whole source holds every provider's)
        self.ctx = ctx = g.Context(
            snap=snap,
            stock=snap.stock(names.classes.values()),
            holders=holders,
            sharing=sharing,
            anchor_roots=anchor_roots,
            class_names={rc: name for name, rc in names.classes.items()},
            root_of=root_of,
            budget=budget,
        )
        resolved = [names.resolve(group) for group in request.groups]
        self.groups = None if any(ids is None for ids in resolved) else resolved
        if len(request.groups) == 1:

            def tree(root: int, parts: list[list[Part]]) -> Iterator[Candidate]:
                return ((allocs, (providers,)) for allocs, providers in parts[0])
        else:
            at: list[dict[int, list[Part]]] = [{} for _ in request.groups]
            combiner = combine.Combiner(ctx, request, at, [])

            def tree(root: int, parts: list[list[Part]]) -> Iterator[Candidate]:
                for holder, part in zip(at, parts, strict=True):
                    holder.clear()
                    holder[root] = part
                return combiner.candidates(root)

        self.combine: walk.Combine = tree
        self._into: Mapping[int, list[int]] | None = None

    @classmethod
    def of(
        cls, snap: Source, request: CandidateRequest, budget: Budget, basics: Basics | None = None
    ) -> Trees | None:
        """The tree-by-tree search for `request`; None when it names an unknown
        class or trait (the bulk search reports which) or no root qualifies."""
        names, anchor_roots, holders, sharing = basics or read_basics(snap, request)
        if _any_unknown(names, request, 0) or (anchor_roots is not None and not anchor_roots):
            return None
        return cls(snap, request, names, holders, sharing, anchor_roots, budget)

    def at(self, root: int) -> list[Candidate]:
        """Every candidate anchored at `root`, as the bulk search orders them."""
        assert self.groups is not None
        if self._into is None:
            self._into = walk.sharing_into(self.ctx)
        return walk.candidates_at(self.ctx, self.groups, root, self._into[root], self.combine)


def _stop(request: CandidateRequest, options: Options) -> int:
    """How many candidates to make before stopping; -1: all of them."""
    stop = options.max_candidates
    if request.limit and request.nested_aware:  # (before 1.29 trees are filtered after)
        if not options.randomize:
            # The answer is the first `limit` candidates: no need to make more.
            stop = request.limit if stop < 0 else min(stop, request.limit)
        elif stop < 0:
            # A random `limit`: the first ones of the trees in a random order.
            stop = request.limit
    return stop


def _walkable(request: CandidateRequest, options: Options, names: Names) -> bool:
    """Whether the tree-by-tree walk gives what the bulk search would: trees taken
    in order, every group asking for resources, no unknown name to report."""
    return (
        options.strategy == "depth-first"
        and all(group.resources for group in request.groups)
        and not _any_unknown(names, request, 0)
    )


def _roots(snap: Source, stock: dict[int, list[Stock]]) -> dict[int, int]:
    """Provider -> root, of every provider in `stock` (at least)."""
    held = snap.root_of()
    if held is not None:
        return held  # every provider's (the search only adds the same)
    return {s[0]: s[1] for rows in stock.values() for s in rows}


def _allowed_anchors(
    snap: Source,
    request: CandidateRequest,
    names: Names,
    holders: dict[int, set[int]],
    sharing: set[int],
    anchors: dict[int, set[int]],
    anchor_roots: set[int] | None,
) -> set[int] | None:
    def in_aggregates(group: RequestGroup) -> set[int] | None:
        if not group.member_of:
            return None
        return set.intersection(*(names.in_any(any_of) for any_of in group.member_of))

    def holding(trait_names: frozenset[str]) -> set[int] | None:
        if any(name not in names.traits for name in trait_names):
            return None
        return set().union(*(holders.get(names.traits[name], ()) for name in trait_names))

    def reach(providers: set[int]) -> set[int]:
        snap.load_providers(providers)
        rows = snap.rows
        found = {rows[rp][2] for rp in providers}
        sharers = (providers & sharing) - anchors.keys()
        if sharers:
            by_sharer = snap.sharing_anchors(sharers)
            anchors.update({sp: by_sharer.get(sp, set()) for sp in sharers})
        for sp in providers & sharing:
            found |= anchors[sp]
        return found

    return narrow.allowed_anchors(
        request, anchor_roots, in_aggregates, holding, names.tree_roots.get, reach
    )


def _any_unknown(names: Names, request: CandidateRequest, start: int) -> bool:
    """Whether a group from `start` on names an unknown class or trait."""
    for group in request.groups[start:]:
        if any(rc not in names.classes for rc in group.resources):
            return True
        mentioned = set().union(*group.required, group.forbidden)
        if any(trait not in names.traits for trait in mentioned):
            return True
    return False


def _merge(
    ctx: g.Context,
    request: CandidateRequest,
    parts: list[Mapping[int, list[Part]]],
    options: Options,
) -> list[Candidate]:
    anchors = sorted(set.intersection(*(set(p) for p in parts)))
    stop = _stop(request, options)
    if options.randomize and request.limit and options.max_candidates < 0:
        anchors = random.sample(anchors, len(anchors))
    if len(parts) == 1 and stop < 0:
        # The common case, without a cut: every part is a candidate.
        only = parts[0]
        if isinstance(only, g.LazyParts):
            found = only.every(anchors)
        else:
            found = [part for a in anchors for part in only[a]]
        return _distinct([(allocs, (rps,)) for allocs, rps in found], ctx)
    if len(parts) == 1:
        only = parts[0]

        def generate(anchor: int) -> Iterator[Candidate]:
            for allocs, providers in only[anchor]:
                yield allocs, (providers,)
    else:
        combiner = combine.Combiner(ctx, request, parts, anchors)
        anchors = combiner.worth_walking(anchors)
        generate = combiner.candidates
    streams = [generate(anchor) for anchor in anchors]
    if options.strategy == "breadth-first":
        stream = _round_robin(streams)
    else:
        stream = itertools.chain.from_iterable(streams)
    found: dict[Candidate, None] = {}
    for candidate in stream:
        if candidate in found:
            continue
        found[candidate] = None
        if 0 <= stop <= len(found):
            break
    return list(found)


def _by_anchor(
    ctx: g.Context, request: CandidateRequest, parts: list[Mapping[int, list[Part]]]
) -> tuple[list[int], list[Candidate]]:
    """What `_merge` finds without a cut, with the anchor of each candidate
    (anchors in order; a candidate of sharing providers alone stays at every
    anchor it comes from)."""
    anchors = sorted(set.intersection(*(set(p) for p in parts)))
    owners: list[int] = []
    if len(parts) == 1:
        only = parts[0]
        if isinstance(only, g.LazyParts):
            found = only.every(anchors, owners)
        else:
            owners = [a for a in anchors for _ in only[a]]
            found = [part for a in anchors for part in only[a]]
        return owners, [(allocs, (rps,)) for allocs, rps in found]
    combiner = combine.Combiner(ctx, request, parts, anchors)
    candidates: list[Candidate] = []
    for anchor in combiner.worth_walking(anchors):
        here = list(dict.fromkeys(combiner.candidates(anchor)))
        owners += [anchor] * len(here)
        candidates += here
    return owners, candidates


def _distinct(found: list[Candidate], ctx: g.Context) -> list[Candidate]:
    """`found` without repeats: only a candidate all of whose providers share
    can come again (from each tree they share into), so none can when some
    requested class has no sharing provider."""
    sharing = ctx.sharing
    if not sharing or not all(
        any(map(sharing.__contains__, map(PROVIDER, rows))) for rows in ctx.stock.values()
    ):
        return found
    seen: set[Candidate] = set()
    kept = []
    for candidate in found:
        providers = candidate[1][0]
        if providers[0] in sharing and sharing.issuperset(providers):
            if candidate in seen:
                continue
            seen.add(candidate)
        kept.append(candidate)
    return kept


def _round_robin(streams: list[Iterator[Candidate]]) -> Iterator[Candidate]:
    """One candidate from each anchor in turn, so a cut keeps every tree in play."""
    active = list(streams)
    while active:
        still = []
        for stream in active:
            for candidate in stream:
                yield candidate
                still.append(stream)
                break
        active = still
