"""Step 3 of the search: one part of every group per anchor tree, combined
into candidates.

Combining walks the groups depth-first and prunes as soon as a partial choice
breaks `group_policy=isolate` or the capacity of a class requested by more than
one group, so wide trees cost what they return, not the full product; an anchor
with few combinations has each tested in turn (less overhead than the walk).

Every combination tested and every partial one the walk tries counts against
the search's budget (budget.py): a walk that finds nothing can still try
factorially many. Before walking, an anchor where the groups' asks of a class
cannot fit the room of all its providers together is dropped (`_short`): the
usual case of more groups than devices, answered at once and exactly.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence

from tally.db import tree_rules
from tally.placement.error_types import ParentLoopFound
from tally.placement.ledger.candidates import groups as g
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.candidates.snapshot import Alloc, Candidate, Part, Stock, room

FEW_COMBINATIONS = 64  # per anchor: test every combination of parts, not walk them


def providers_of(parts: Mapping[int, list[Part]]) -> Mapping[int, list[int]]:
    """The providers of a suffixed group's parts, per anchor."""
    if isinstance(parts, g.ProviderParts):
        return parts.providers
    return {anchor: [part[1][0] for part in found] for anchor, found in parts.items()}


def providers_at(parts: Mapping[int, list[Part]], anchor: int) -> list[int]:
    """The providers of a suffixed group's parts at one anchor."""
    if isinstance(parts, g.ProviderParts):
        return parts.providers[anchor]
    return [part[1][0] for part in parts[anchor]]


class Room(dict):
    """(provider, class) -> the most one request may take of it, for the classes
    several groups ask for; worked out on first use (most are never asked)."""

    def __init__(
        self,
        stock: dict[int, list[Stock]],
        classes: set[int],
        class_stock: Callable[[int], Mapping[int, Stock]] | None = None,
    ) -> None:
        super().__init__()
        self.stock, self.classes = stock, classes
        self.class_stock = class_stock  # a whole source's own rows by provider
        self.rows: dict[int, Mapping[int, Stock]] = {}

    def __missing__(self, key: tuple[int, int]) -> int:
        rp, rc = key
        rows = self.rows.get(rc)
        if rows is None:
            if self.class_stock is not None:
                rows = self.rows[rc] = self.class_stock(rc)
            else:
                rows = self.rows[rc] = {s[0]: s for s in self.stock.get(rc, ())}
        found = self[key] = room(rows[rp])
        return found


class Combiner:
    """One part per group at one anchor: the depth-first walk."""

    def __init__(
        self,
        ctx: g.Context,
        request: CandidateRequest,
        parts: list[Mapping[int, list[Part]]],
        anchors: list[int],
    ) -> None:
        self.parts = parts
        self.granular = [group.use_same_provider for group in request.groups]
        self.isolate = request.isolate
        index = {group.suffix: i for i, group in enumerate(request.groups)}
        self.subtrees = [sorted(index[s] for s in tie) for tie in request.same_subtrees]
        # Only classes asked by several groups can overflow once the groups combine.
        class_ids = {name: rc for rc, name in ctx.class_names.items()}
        counts = Counter(class_ids[name] for group in request.groups for name in group.resources)
        shared = {rc for rc, n in counts.items() if n > 1}
        whole = ctx.snap.class_stock if ctx.snap.whole else None  # (else: from the stock read)
        self.room = Room(ctx.stock, shared, whole)
        self.ancestors: dict[int, frozenset[int]] = {}
        if self.subtrees:  # ancestry: providers come from the anchor trees or share
            snap = ctx.snap
            snap.load_providers(ctx.sharing)
            snap.load_trees(set(anchors) | {snap.rows[sp][2] for sp in ctx.sharing})
        self.rows = ctx.snap.rows
        self.budget = ctx.budget

    def candidates(self, anchor: int) -> Iterator[Candidate]:
        """The candidates anchored at `anchor`. Against the budget count every
        combination tested or tried on the way, and each candidate as the parts
        it joins (one per group: a candidate of 200 groups is 200 times the work
        and the memory of one of a single group)."""
        spend, joined = self.budget.spend, len(self.parts)
        for candidate in self._candidates(anchor):
            spend(joined)
            yield candidate

    def _candidates(self, anchor: int) -> Iterator[Candidate]:
        if self.isolate and not self._enoughproviders_of(anchor):
            return
        lists = [group[anchor] for group in self.parts]
        product = math.prod(map(len, lists))
        if product <= FEW_COMBINATIONS:  # test each: less overhead
            self.budget.spend(product)
            for chosen in itertools.product(*lists):
                providers = [rp for _, rps in chosen for rp in rps]
                if len(set(providers)) == len(providers):  # no provider in two parts:
                    if self._same_subtree_ok(chosen):  # isolated, and nothing to add up
                        allocs = itertools.chain.from_iterable([allocs for allocs, _ in chosen])
                        yield tuple(sorted(allocs)), tuple([rps for _, rps in chosen])
                elif self._fits(chosen) and self._same_subtree_ok(chosen):
                    yield self._consolidate(chosen)
            return
        if not self._short(lists):
            yield from self._walk(lists, 0, [], {}, set())

    def _fits(self, chosen: tuple[Part, ...]) -> bool:
        """Whether one part per group holds together: isolated groups on distinct
        providers, and classes asked by several groups within the room left."""
        if self.isolate:
            singles = [
                part[1][0] for part, granular in zip(chosen, self.granular, strict=True) if granular
            ]
            if len(set(singles)) != len(singles):
                return False
        limits = self.room
        if limits.classes:
            taken: dict[tuple[int, int], int] = {}
            for allocs, _ in chosen:
                for rp, rc, amount in allocs:
                    if rc in limits.classes:
                        key = (rp, rc)
                        total = taken[key] = taken.get(key, 0) + amount
                        if total > limits[key]:
                            return False
        return True

    def _walk(
        self,
        lists: list[list[Part]],
        i: int,
        chosen: list[Part],
        taken: dict[tuple[int, int], int],
        isolated: set[int],
    ) -> Iterator[Candidate]:
        """Choose a part of group i onwards. (A method, not a nested function: a
        recursive closure is a reference cycle that would keep the whole search
        alive until the cyclic collector runs.)"""
        if i == len(lists):
            if self._same_subtree_ok(chosen):
                yield self._consolidate(chosen)
            return
        limits = self.room
        self.budget.spend(len(lists[i]))  # each a partial combination tried
        for part in lists[i]:
            allocs, providers = part
            single = providers[0] if self.isolate and self.granular[i] else None
            if single is not None and single in isolated:
                continue
            added = []
            for rp, rc, amount in allocs:
                if rc in limits.classes:
                    key = (rp, rc)
                    total = taken.get(key, 0) + amount
                    if total > limits[key]:
                        break
                    added.append((key, amount))
                    taken[key] = total
            else:
                chosen.append(part)
                if single is not None:
                    isolated.add(single)
                yield from self._walk(lists, i + 1, chosen, taken, isolated)
                chosen.pop()
                isolated.discard(single)
            for key, amount in added:
                taken[key] -= amount

    def _short(self, lists: list[list[Part]]) -> bool:
        """Whether some class asked by several groups cannot fit at this anchor,
        whatever the choice: more asked in all than the room of every provider
        any group could take it from, or more asks of at least `a` than places
        for `a` in those providers. Exact: each group's ask of a class comes whole
        from one provider, and the walk takes no more from a provider than its
        room. (Groups may share a provider: only room counts, not providers.)"""
        limits = self.room
        if not limits.classes:
            return False
        asks: dict[int, list[int]] = {}  # class -> each group's amount of it
        givers: dict[int, set[int]] = {}  # class -> providers some group may take it from
        for parts in lists:
            for _rp, rc, amount in parts[0][0]:  # a group asks the same in every part
                if rc in limits.classes:
                    asks.setdefault(rc, []).append(amount)
            for allocs, _ in parts:
                for rp, rc, _amount in allocs:
                    if rc in limits.classes:
                        givers.setdefault(rc, set()).add(rp)
        for rc, amounts in asks.items():
            if len(amounts) < 2:
                continue
            rooms = [limits[rp, rc] for rp in givers[rc]]
            if sum(amounts) > sum(rooms):
                return True
            for least in set(amounts):
                places = sum([r // least for r in rooms])
                if sum([1 for amount in amounts if amount >= least]) > places:
                    return True
        return False

    def worth_walking(self, anchors: list[int]) -> list[int]:
        """`anchors` without those where isolated groups all sit on one and the
        same provider (a flat tree: the usual case, dropped here in bulk)."""
        need = sum(self.granular) if self.isolate else 0
        if need < 2:
            return anchors
        groups = [
            providers_of(p)
            for p, granular in zip(self.parts, self.granular, strict=True)
            if granular
        ]
        first = groups[0]
        lone = {a for a, found in first.items() if len(found) == 1}  # one provider each...
        for other in groups[1:]:
            lone = {a for a in lone if other.get(a) == first[a]}  # ...and the same one
        return [a for a in anchors if a not in lone] if lone else anchors

    def _enoughproviders_of(self, anchor: int) -> bool:
        """Isolated groups need as many providers as there are suffixed groups
        (a cheap first test: a flat tree fails it at once)."""
        need = sum(self.granular)
        seen: set[int] = set()
        for i, parts in enumerate(self.parts):
            if self.granular[i]:
                seen.update(providers_at(parts, anchor))
                if len(seen) >= need:
                    return True
        return False

    @staticmethod
    def _consolidate(chosen: Sequence[Part]) -> Candidate:
        """One allocation per (provider, class), amounts added, in that order."""
        merged: list[Alloc] = []
        for alloc in sorted(itertools.chain.from_iterable([allocs for allocs, _ in chosen])):
            if merged and merged[-1][:2] == alloc[:2]:
                merged[-1] = (alloc[0], alloc[1], merged[-1][2] + alloc[2])
            else:
                merged.append(alloc)
        return tuple(merged), tuple([providers for _, providers in chosen])

    def _same_subtree_ok(self, chosen: Sequence[Part]) -> bool:
        """Each same_subtree set: one of its providers is an ancestor of (or is)
        all the others."""
        for tie in self.subtrees:
            providers = {rp for i in tie for rp in chosen[i][1]}
            if len(providers) == 1:
                continue
            common = frozenset.intersection(*(self._ancestors(rp) for rp in providers))
            if common.isdisjoint(providers):
                return False
        return True

    def _ancestors(self, rp: int) -> frozenset[int]:
        """`rp` and its ancestors; ParentLoopFound where the stored parents come round."""
        if rp not in self.ancestors:
            rows = self.rows
            try:
                line = tree_rules.walk_up(rp, lambda node: rows[node][1])
            except tree_rules.ParentLoop as loop:
                raise ParentLoopFound([rows[node][0] for node in loop.loop]) from None
            self.ancestors[rp] = frozenset(line)
        return self.ancestors[rp]
