"""Step 2 of the search: what each request group can take, per anchor tree.

A *part* is one group's share of a candidate: the (provider, class, amount)
triples it allocates and the providers it maps to. Parts are kept per
*anchor*, the root of the tree a candidate is built around; a sharing provider
(trait MISC_SHARES_VIA_AGGREGATE) also anchors to every tree that has a
provider in one of its aggregates.

  suffixed group     every class from one provider; member_of and traits apply
                     to that provider
  unsuffixed group   each class from any provider of the anchor tree or from a
                     sharing provider; member_of matches the provider or the
                     anchor; traits apply to the providers chosen together
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping

from tally.placement.ledger.candidates.budget import Budget
from tally.placement.ledger.candidates.request import RequestGroup
from tally.placement.ledger.candidates.snapshot import Part, Stock
from tally.placement.ledger.candidates.source import Source


@dataclasses.dataclass
class GroupIds:
    """A group with its names turned into ids (by `search.Names.resolve`)."""

    group: RequestGroup
    amounts: list[tuple[int, int]]  # (class id, amount), in class id order
    required: list[set[int]]  # trait ids, AND of ORs
    forbidden: set[int]
    in_aggs: set[int] | None  # providers matching every member_of set; None: no filter
    bad_aggs: set[int]  # providers in a forbidden aggregate
    tree: int | None  # root id of in_tree


@dataclasses.dataclass
class Context:
    """What every group's search shares."""

    snap: Source
    stock: dict[int, list[Stock]]  # class id -> inventories of the requested classes
    holders: dict[int, set[int]]  # trait id -> providers with it
    sharing: set[int]  # providers with MISC_SHARES_VIA_AGGREGATE
    anchor_roots: set[int] | None  # roots allowed by root_required; None: any
    class_names: dict[int, str]
    root_of: dict[int, int] = dataclasses.field(default_factory=dict)  # provider -> root
    _anchors: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    at: int | None = None  # searching one anchor only (a walk tree by tree)
    budget: Budget = dataclasses.field(default_factory=Budget)  # what the search may make

    def anchor_ok(self, root: int) -> bool:
        return self.anchor_roots is None or root in self.anchor_roots

    def anchors_of(self, sharing_provider: int) -> set[int]:
        if sharing_provider not in self._anchors:
            # Fetch for every sharing provider with stock at once: the next will ask too.
            wanted = (
                {sharing_provider} | (self.sharing & self.root_of.keys())
            ) - self._anchors.keys()
            found = self.snap.sharing_anchors(wanted)
            for sp in wanted:
                self._anchors[sp] = found.get(sp, set())
        return self._anchors[sharing_provider]

    def shared_into(self, sharing_provider: int) -> Collection[int]:
        """The anchors a sharing provider adds itself to in this search."""
        anchors = self.anchors_of(sharing_provider)
        if self.at is None:
            return anchors
        return (self.at,) if self.at in anchors else ()

    def holding_any(self, trait_ids: set[int]) -> set[int]:
        return set().union(*(self.holders.get(t, set()) for t in trait_ids))


def stock_for(ctx: Context, ids: GroupIds) -> dict[int, list[Stock]] | None:
    """Inventories with room for each class of the group (in its tree), or None
    when some class has none anywhere (upstream: no candidates at all)."""
    found = {}
    for rc, amount in ids.amounts:
        rows = ctx.snap.fitting(rc, ctx.stock[rc], amount)
        if ids.tree is not None:
            rows = [s for s in rows if s[1] == ids.tree]
        if not rows:
            return None
        found[rc] = rows
    return found


def same_provider_parts(
    ctx: Context, ids: GroupIds, stock: dict[int, list[Stock]]
) -> ProviderParts | dict[int, list[Part]]:
    """Parts of a suffixed group: one provider has all of it."""
    chosen: set[int] | None = None
    for rows in stock.values():
        here = {s[0] for s in rows}
        chosen = here if chosen is None else chosen & here
    if ids.required:
        matching = set.intersection(*(ctx.holding_any(any_of) for any_of in ids.required))
        chosen = matching if chosen is None else chosen & matching
    if ids.in_aggs is not None:
        chosen = set(ids.in_aggs) if chosen is None else chosen & ids.in_aggs
    if chosen is None:
        return {}  # a group with neither resources nor a positive filter matches nothing
    chosen -= ids.bad_aggs
    chosen -= ctx.holding_any(ids.forbidden)
    if not stock:  # resourceless group: roots come from the provider table
        missing = [rp for rp in chosen if rp not in ctx.root_of]  # (the index has all)
        ctx.snap.load_providers(missing)
        ctx.root_of.update({rp: ctx.snap.rows[rp][2] for rp in missing})
    root_of, anchor_roots, sharing = ctx.root_of, ctx.anchor_roots, ctx.sharing
    by_anchor: dict[int, list[int]] = defaultdict(list)
    for rp in sorted(chosen):
        root = root_of[rp]
        if anchor_roots is None or root in anchor_roots:
            by_anchor[root].append(rp)
        if rp in sharing:
            for anchor in sorted(ctx.shared_into(rp)):
                if anchor != root and ctx.anchor_ok(anchor):
                    by_anchor[anchor].append(rp)
    return ProviderParts(by_anchor, ids.amounts)


class ProviderParts(Mapping[int, list[Part]]):
    """Parts of a suffixed group per anchor: the providers are found in bulk,
    each anchor's parts made on first use (most anchors of a multi-group
    request are dropped before any part of theirs is looked at)."""

    def __init__(self, providers: dict[int, list[int]], amounts: list[tuple[int, int]]) -> None:
        self.providers = providers  # anchor -> providers that can take the group
        self._amounts = amounts
        self._built: dict[int, list[Part]] = {}

    def __getitem__(self, anchor: int) -> list[Part]:
        found = self._built.get(anchor)
        if found is None:
            amounts = self._amounts
            found = self._built[anchor] = [
                (tuple([(rp, rc, amount) for rc, amount in amounts]), (rp,))
                for rp in self.providers[anchor]
            ]
        return found

    def __iter__(self) -> Iterator[int]:
        return iter(self.providers)

    def __len__(self) -> int:
        return len(self.providers)


def tree_parts(
    ctx: Context, ids: GroupIds, stock: dict[int, list[Stock]]
) -> Mapping[int, list[Part]]:
    """Parts of the unsuffixed group: any mix of the anchor tree's providers
    and sharing providers, one provider per class. Without trait filters every
    anchor found has parts, so they are built only when asked for (a `limit`
    then costs what it returns)."""
    ones: list[dict[int, int]] = []  # per class: anchor -> its only provider
    manys: list[dict[int, list[int]]] = []  # per class: anchor -> 2+ providers
    common: set[int] | None = None
    for rc, _ in ids.amounts:
        one, many = _options(ctx, ids, stock[rc])
        anchors = one.keys() | many.keys()
        common = anchors if common is None else common & anchors
        if not common:
            return {}
        ones.append(one)
        manys.append(many)
    forbidden = ctx.holding_any(ids.forbidden)
    required = [ctx.holding_any(any_of) for any_of in ids.required]
    classes = [rc for rc, _ in ids.amounts]
    amounts = [amount for _, amount in ids.amounts]
    choosy = set().union(*manys)  # anchors where some class has a choice of providers
    budget = ctx.budget

    def build(anchor: int) -> list[Part]:
        if anchor in choosy:
            options = [
                sorted(many[anchor]) if anchor in many else [one[anchor]]
                for one, many in zip(ones, manys, strict=True)
            ]
            budget.spend(math.prod(map(len, options)))
            combos = list(itertools.product(*options))
        else:  # the usual tree: one provider per class, one way
            combos = [tuple([one[anchor] for one in ones])]
        found = []
        for combo in combos:
            if forbidden and not forbidden.isdisjoint(combo):
                continue
            if required and not all([not held.isdisjoint(combo) for held in required]):
                continue
            first = combo[0]
            providers = (first,) if combo.count(first) == len(combo) else tuple(sorted(set(combo)))
            found.append((tuple(zip(combo, classes, amounts, strict=True)), providers))
        return found

    def every(anchors: list[int], owners: list[int] | None = None) -> list[Part]:
        """The parts of all these anchors in one pass (the loop of `build`,
        without a call per anchor for the usual tree); `owners` gets the anchor
        of each part."""
        found = []
        append, n = found.append, len(ones)
        # each anchor's provider per class, column by column (None: a choice)
        columns = [[one.get(anchor) for anchor in anchors] for one in ones]
        for anchor, combo in zip(anchors, zip(*columns, strict=True), strict=True):
            if anchor in choosy:
                built = build(anchor)
                found.extend(built)
                if owners is not None:
                    owners.extend([anchor] * len(built))
                continue
            if forbidden and not forbidden.isdisjoint(combo):
                continue
            if required and not all([not held.isdisjoint(combo) for held in required]):
                continue
            first = combo[0]
            providers = (first,) if combo.count(first) == n else tuple(sorted(set(combo)))
            append((tuple(zip(combo, classes, amounts, strict=True)), providers))
            if owners is not None:
                owners.append(anchor)
        return found

    return LazyParts(common or set(), build, every, filtered=bool(forbidden or required))


class LazyParts(Mapping[int, list[Part]]):
    """Parts per anchor, each list built on first use. `filtered`: a trait filter
    may leave an anchor without parts (then it maps to an empty list)."""

    def __init__(
        self,
        anchors: set[int],
        build: Callable[[int], list[Part]],
        every: Callable[[list[int], list[int] | None], list[Part]],
        filtered: bool = False,
    ) -> None:
        self._anchors = anchors
        self._build = build
        self.every = every
        self.filtered = filtered
        self._built: dict[int, list[Part]] = {}

    def any_part(self) -> bool:
        """Whether some anchor has a part (building until one does)."""
        return not self.filtered or any(self[anchor] for anchor in sorted(self._anchors))

    def __getitem__(self, anchor: int) -> list[Part]:
        if anchor not in self._anchors:
            raise KeyError(anchor)
        found = self._built.get(anchor)
        if found is None:
            found = self._built[anchor] = self._build(anchor)
        return found

    def __iter__(self) -> Iterator[int]:
        return iter(self._anchors)

    def __len__(self) -> int:
        return len(self._anchors)


def _options(
    ctx: Context, ids: GroupIds, rows: list[Stock]
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Who can give one class, per anchor: (anchors with one provider, anchors
    with several). Sharing providers add themselves to the trees they anchor."""
    one = {s[1]: s[0] for s in rows}
    many: dict[int, list[int]] = {}
    if len(one) != len(rows):  # some trees have several providers of the class
        counts = Counter([s[1] for s in rows])
        for s in [s for s in rows if counts[s[1]] > 1]:
            if s[1] in many:
                many[s[1]].append(s[0])
            else:
                many[s[1]] = [s[0]]
        for a in many:
            del one[a]
    sharing = {s[0] for s in rows} & ctx.sharing
    if ids.in_aggs is not None:
        sharing &= ids.in_aggs
    if sharing and ids.tree is None:
        for sp in sorted(sharing):
            own = ctx.root_of[sp]
            for anchor in ctx.shared_into(sp):
                if anchor == own:
                    continue
                if anchor in many:
                    many[anchor].append(sp)
                elif anchor in one:
                    many[anchor] = [one.pop(anchor), sp]
                else:
                    one[anchor] = sp
    if ctx.anchor_roots is not None or ids.in_aggs is not None or ids.bad_aggs:
        one, many = _filter_options(ctx, ids, one, many)
    return one, many


def _filter_options(
    ctx: Context, ids: GroupIds, one: dict[int, int], many: dict[int, list[int]]
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """root_required keeps anchors; member_of keeps a provider in an aggregate or
    anchored to a root in one; a forbidden aggregate drops either."""
    in_aggs, bad = ids.in_aggs, ids.bad_aggs
    roots = ctx.anchor_roots
    if in_aggs is None and not bad and roots is not None:  # root_required alone
        return (
            {a: rp for a, rp in one.items() if a in roots},
            {a: rps for a, rps in many.items() if a in roots},
        )
    kept_one: dict[int, int] = {}
    kept_many: dict[int, list[int]] = {}
    everything = [(a, [rp]) for a, rp in one.items()] + list(many.items())
    for anchor, providers in everything:
        if not ctx.anchor_ok(anchor) or anchor in bad:
            continue
        if in_aggs is not None and anchor not in in_aggs:
            providers = [rp for rp in providers if rp in in_aggs]
        if bad:
            providers = [rp for rp in providers if rp not in bad]
        if len(providers) == 1:
            kept_one[anchor] = providers[0]
        elif providers:
            kept_many[anchor] = providers
    return kept_one, kept_many
