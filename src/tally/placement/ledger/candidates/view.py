"""`View`: the in-memory index (index.py) as a `Source` (source.py), for one
search held under the index's lock. The one module that reads the index's
structures: the search, the summaries and the provider listing ask a `View`."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from tally.placement.ledger.candidates.snapshot import Stock, fitting

if TYPE_CHECKING:
    import sqlalchemy as sa

    from tally.placement.ledger.candidates.answer_cache import KeptAnswers
    from tally.placement.ledger.candidates.index import Index


@contextlib.contextmanager
def of(index: Index, engine: sa.Engine) -> Iterator[View | None]:
    """`index` brought up to date and held for one search, as a `View`; None when
    the index is off (then the caller reads the database)."""
    with index.held(engine) as on:
        yield View(index) if on else None


class View:
    """The index as a `Source`, for one search (under the index's lock)."""

    whole = True  # every provider is at hand

    def __init__(self, index: Index) -> None:
        self.index = index
        self.rows = index.rows

    def kept(self) -> KeptAnswers:
        return self.index.kept

    def sorted_roots(self) -> list[int]:
        return self.index.sorted_roots()

    def root_of(self) -> dict[int, int]:
        """(The index's own map: a search only adds the same to it.)"""
        return self.index.root_of

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        return self.index.by_class.get(rc, _NOTHING)

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        trees = self.index.trees
        return set().union(*[trees.get(root, _NO_PROVIDERS) for root in roots])

    # -- for the provider listing (provider_listing.py) -----------------------

    def lists_every_provider(self) -> bool:
        """Whether the index holds every provider row (none left out as misplaced
        in its tree: a listing still shows those)."""
        return not self.index.left_out

    def providers(self) -> Collection[int]:
        """Every provider (the index's own keys, not to be changed)."""
        return self.index.rows.keys()

    def tree_of(self, uuid: str) -> Collection[int]:
        """Every provider of the tree of provider `uuid` (none when it is unknown)."""
        index = self.index
        rp = index.by_uuid.get(uuid)
        return () if rp is None else index.trees.get(index.root_of[rp], ())

    def holders_of(self, trait: int) -> Collection[int]:
        """The providers with trait `trait` (the index's own set, not to be changed)."""
        return self.index.holders.get(trait, _NO_PROVIDERS)

    def in_aggregate(self, uuid: str) -> Collection[int]:
        """The providers in aggregate `uuid` (the index's own set, not to be changed)."""
        index = self.index
        agg = index.aggregate_ids.get(uuid)
        return _NO_PROVIDERS if agg is None else index.members.get(agg, _NO_PROVIDERS)

    def fitting_providers(self, rc: int, amount: int) -> set[int]:
        """The providers one allocation of `amount` of class `rc` fits in."""
        return {stock[0] for stock in self.index.fitting(rc, amount)}

    def fresh(self) -> View:
        return self

    def class_ids(self, names: Iterable[str]) -> dict[str, int]:
        return _pick(self.index.class_ids, names)

    def trait_ids(self, names: Iterable[str]) -> dict[str, int]:
        return _pick(self.index.trait_ids, names)

    def aggregate_ids(self, uuids: Iterable[str]) -> dict[str, int]:
        return _pick(self.index.aggregate_ids, uuids)

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        by_uuid, rows = self.index.by_uuid, self.rows
        return {u: rows[by_uuid[u]][2] for u in uuids if u in by_uuid}

    def class_names(self, ids: Iterable[int]) -> dict[int, str]:
        return _pick(self.index.class_names, ids)

    def has_trees(self) -> bool:
        return len(self.index.roots) != len(self.rows)

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]:
        holders = self.index.holders
        found = set(self.index.roots)
        for trait in required:
            found &= holders.get(trait, set())
        for trait in forbidden:
            found -= holders.get(trait, set())
        return found

    def trait_holders(self, trait_ids: Iterable[int]) -> dict[int, set[int]]:
        holders = self.index.holders
        return {tr: set(holders[tr]) for tr in trait_ids if holders.get(tr)}

    def aggregate_members(self, agg_ids: Iterable[int]) -> dict[int, set[int]]:
        members = self.index.members
        return {agg: set(members[agg]) for agg in agg_ids if members.get(agg)}

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        index, rows = self.index, self.rows
        found: dict[int, set[int]] = {}
        for sp in providers:
            roots = {rows[m][2] for agg in index.aggregates.get(sp, ()) for m in index.members[agg]}
            if roots:
                found[sp] = roots
        return found

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        index = self.index
        found: dict[int, list[Stock]] = {}
        for rc in sorted(set(class_ids)):
            every = index.stock_list(rc)
            if roots is None:
                found[rc] = every
            elif len(roots) * 4 < len(every):  # few trees: walk them
                by_rp = index.by_class.get(rc, {})
                in_trees = [rp for root in roots for rp in index.trees.get(root, ()) if rp in by_rp]
                found[rc] = [by_rp[rp] for rp in sorted(in_trees)]
            else:
                found[rc] = [s for s in every if s[1] in roots]
        return found

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        """`fitting(rows, amount)`; kept by the index when `rows` is the whole class."""
        index = self.index
        if rows is index.stock_list(rc):
            return index.fitting(rc, amount)
        return fitting(rows, amount)

    def load_providers(self, ids: Collection[int]) -> None:
        """Everything is loaded."""

    def load_trees(self, roots: Collection[int]) -> None:
        """Everything is loaded."""

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]:
        index = self.index
        found = []
        for root in roots:
            for rp in index.trees.get(root, ()):
                used = index.used.get(rp, {})
                for rc, inv in index.inventories.get(rp, {}).items():
                    if rc not in skip_classes:
                        found.append((rp, rc, inv[0], used.get(rc, 0)))
        return found

    def trait_names(self, providers: Collection[int]) -> dict[int, list[str]]:
        index = self.index
        names = index.trait_names
        return {
            rp: [names[tr] for tr in sorted(index.traits[rp])]
            for rp in providers
            if index.traits.get(rp)
        }


_NOTHING: Mapping[int, Stock] = {}
_NO_PROVIDERS: frozenset[int] = frozenset()


def _pick(mapping: dict, keys: Iterable) -> dict:
    return {k: mapping[k] for k in set(keys) if k in mapping}
