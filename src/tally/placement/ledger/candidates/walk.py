"""A search that stops early: with `limit`, over the in-memory index, take the
trees one by one in anchor order and stop once there are enough candidates.

The bulk search works out each group's parts for every tree before combining
them, which costs the whole cloud even when the answer is the first 50. Here
each tree is searched alone with the same functions (each group's parts at that
one anchor, then the same combination), so the first `limit` candidates are the
ones the bulk search would have returned first, in the same order, at a cost
that grows with the answer. When the walk has gone through many trees without
filling the answer (a query few trees match), it gives up and the bulk search,
cheaper per tree, runs instead.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from tally.placement.ledger.candidates import groups as g
from tally.placement.ledger.candidates.snapshot import Candidate, Part, Stock, fitting

MIN_TREES = 200  # trees the walk may always look at
TREES_PER_CANDIDATE = 20  # and this many more per candidate asked

Combine = Callable[[int, list[list[Part]]], Iterator[Candidate]]


def first(
    ctx: g.Context,
    groups: list[g.GroupIds],
    roots: Iterable[int],
    stop: int,
    combine: Combine,
    until: Callable[[Candidate], bool] | None = None,
    walked: list[int] | None = None,
) -> list[Candidate] | None:
    """The first `stop` distinct candidates over `roots` (in the order given),
    or None when the walk gave up (too many trees without a candidate). With
    `until`, the first ones up to the first `until` accepts, when it comes
    before `stop`; `walked` gets each root the walk came to, in order."""
    into = sharing_into(ctx)
    budget = MIN_TREES + TREES_PER_CANDIDATE * stop
    found: dict[Candidate, None] = {}
    for seen, root in enumerate(roots):
        if seen >= budget:
            return None
        if walked is not None:
            walked.append(root)
        parts = parts_at(ctx, groups, root, into[root])
        if parts is None:
            continue
        for candidate in combine(root, parts):
            if candidate not in found:
                found[candidate] = None
                if len(found) >= stop or (until is not None and until(candidate)):
                    return list(found)
    return list(found)


def candidates_at(
    ctx: g.Context,
    groups: list[g.GroupIds],
    root: int,
    sharing: list[int],
    combine: Combine,
) -> list[Candidate]:
    """Every candidate anchored at one tree, distinct, in the bulk search's order."""
    parts = parts_at(ctx, groups, root, sharing)
    return [] if parts is None else list(dict.fromkeys(combine(root, parts)))


def parts_at(
    ctx: g.Context, groups: list[g.GroupIds], root: int, sharing: list[int]
) -> list[list[Part]] | None:
    """Each group's parts at the tree of `root` (with the sharing providers
    sharing into it); None when it cannot anchor or some group has none there."""
    if not ctx.anchor_ok(root):
        return None
    snap = ctx.snap
    tree = snap.tree_members((root,))
    ctx.at = root
    try:
        found = []
        for ids in groups:
            stock = _stock_at(snap.class_stock, tree, sharing, ids)
            part = _parts_at(ctx, ids, stock, root) if stock is not None else []
            if not part:
                return None
            found.append(part)
        return found
    finally:
        ctx.at = None


def sharing_into(ctx: g.Context) -> Mapping[int, list[int]]:
    """Anchor -> the sharing providers that share into its tree (from another
    tree), in provider order: worked out for each anchor as it is asked for (a
    walk asks for a few trees), or for all at once when that costs less."""
    return _Into(ctx)


class _Into(dict):
    """`sharing_into`'s map, filled as asked (see there)."""

    def __init__(self, ctx: g.Context) -> None:
        super().__init__()
        self.ctx, self.sharing = ctx, sorted(ctx.sharing)
        self.asked, self.whole = 0, not self.sharing

    def __missing__(self, anchor: int) -> list[int]:
        if self.whole:
            return []
        ctx, sharing = self.ctx, self.sharing
        self.asked += 1
        if self.asked * len(sharing) > sum(len(ctx.anchors_of(sp)) for sp in sharing):
            self._fill()
            return self.get(anchor, [])
        found = self[anchor] = [
            sp for sp in sharing if ctx.root_of[sp] != anchor and anchor in ctx.anchors_of(sp)
        ]
        return found

    def _fill(self) -> None:
        into: defaultdict[int, list[int]] = defaultdict(list)
        ctx = self.ctx
        for sp in self.sharing:
            own = ctx.root_of[sp]
            for anchor in ctx.anchors_of(sp):
                if anchor != own:
                    into[anchor].append(sp)
        self.clear()
        self.update(into)
        self.whole = True


def _stock_at(
    class_stock: Callable[[int], Mapping[int, Stock]],
    tree: Collection[int],
    sharing: list[int],
    ids: g.GroupIds,
) -> dict[int, list[Stock]] | None:
    """What `stock_for` gives for one group, limited to one tree and the sharing
    providers sharing into it; None when some class has nothing there."""
    members = sorted(tree)
    found = {}
    for rc, amount in ids.amounts:
        rows = class_stock(rc)
        here = [rows[rp] for rp in members if rp in rows]
        here += [rows[sp] for sp in sharing if sp in rows]
        here = fitting(here, amount)
        if ids.tree is not None:
            here = [s for s in here if s[1] == ids.tree]
        if not here:
            return None
        found[rc] = here
    return found


def _parts_at(
    ctx: g.Context, ids: g.GroupIds, stock: dict[int, list[Stock]], root: int
) -> list[Part]:
    if ids.group.use_same_provider:
        by_anchor = g.same_provider_parts(ctx, ids, stock)
    else:
        by_anchor = g.tree_parts(ctx, ids, stock)
    return by_anchor.get(root) or []
