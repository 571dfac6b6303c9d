"""`SandboxView`: a `Source` (candidates/source.py) that reads the live `View`
through a sandbox's patch (patch.py), so the search, the "why" verdict, usages and
amounts answer inside a sandbox with the same code as outside."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from tally.placement.ledger.candidates.snapshot import Stock, fitting
from tally.placement.ledger.candidates.view import View
from tally.placement.ledger.sandbox.answers import SandboxAnswers

if TYPE_CHECKING:
    from tally.placement.ledger.candidates.index import Index, Inventory
    from tally.placement.ledger.sandbox.patch import Patch


class SandboxView(View):
    """The live `View` with a sandbox's patch laid over it (one search, under the
    index's lock). Its kept answers are the sandbox's own (answers.py)."""

    def __init__(self, index: Index, patch: Patch) -> None:
        super().__init__(index)
        self.patch = patch
        self.rows = patch.rows

    # -- a provider's inventories, usage and traits, patched ----------------------

    def inventories_of(self, rp: int) -> Mapping[int, Inventory]:
        return self.patch.inventories_of(rp)

    def used_of(self, rp: int) -> dict[int, int]:
        used = dict(self.index.used.get(rp, {}))
        for rc, delta in self.patch.used.get(rp, {}).items():
            used[rc] = used.get(rc, 0) + delta
        return used

    def traits_of(self, rp: int) -> frozenset[int]:
        return self.patch.traits_of(rp)

    def exists(self, rp: int) -> bool:
        return rp in self.rows and rp not in self.patch.removed

    # -- what a sandbox's changes ask, by uuid and name ---------------------------

    def provider(self, uuid: str) -> int | None:
        """The id of provider `uuid`, None when it does not exist in the sandbox."""
        return self.patch.provider(uuid)

    def uuid_of(self, rp: int) -> str:
        return self.rows[rp][0]

    def root_uuid(self, uuid: str) -> str | None:
        """The uuid of the root of provider `uuid` (removed or not), None if unknown."""
        rp = self.patch.added_ids.get(uuid, self.index.by_uuid.get(uuid))
        return None if rp is None else self.rows[self.patch.root_of[rp]][0]

    def class_ids_by_name(self) -> Mapping[str, int]:
        return self.index.class_ids

    def class_names_by_id(self) -> Mapping[int, str]:
        return self.index.class_names

    def trait_ids_by_name(self) -> Mapping[str, int]:
        return self.index.trait_ids

    def is_live(self, rp: int) -> bool:
        """Whether provider `rp` is a live one (not made in the sandbox)."""
        return rp in self.index.rows

    def trait_names_of(self, rp: int) -> list[str]:
        names = self.index.trait_names
        return sorted(names[tr] for tr in self.traits_of(rp))

    def aggregate_uuids_of(self, rp: int) -> list[str]:
        by_id = {agg: uuid for uuid, agg in self.index.aggregate_ids.items()}
        return sorted(by_id[agg] for agg in self.patch.aggregates_of(rp) if agg in by_id)

    def subtree(self, rp: int) -> list[int]:
        """Provider `rp` and every provider below it in the sandbox, deepest first,
        then by uuid."""
        rows = self.rows

        def depth_under(m: int) -> int | None:  # (None: not under rp)
            depth = 0
            while m != rp:
                m = rows[m][1]
                if m is None:
                    return None
                depth += 1
            return depth

        found = [(depth_under(m), m) for m in self.patch.members(self.patch.root_of[rp])]
        under = [(d, m) for d, m in found if d is not None]
        return [m for _, m in sorted(under, key=lambda dm: (-dm[0], rows[dm[1]][0]))]

    def children(self, rp: int) -> list[int]:
        rows = self.rows
        return [m for m in self.patch.members(self.patch.root_of[rp]) if rows[m][1] == rp]

    def tree_uuids(self, rp: int) -> set[str]:
        """The uuids of every provider of `rp`'s tree in the sandbox."""
        return {self.rows[m][0] for m in self.patch.members(self.patch.root_of[rp])}

    # -- Source ----------------------------------------------------------------

    def kept(self) -> SandboxAnswers | None:
        patch = self.patch
        if patch.answers is None:
            patch.answers = SandboxAnswers(self.index.kept, patch)
        return patch.answers

    def fresh(self) -> SandboxView:
        return self

    def root_of(self) -> dict[int, int]:
        return self.patch.root_of

    def stock_list(self, rc: int) -> list[Stock]:
        return self.patch.stock_list(rc)

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        if rc not in self.patch.classes:
            return super().class_stock(rc)
        return _Patched(super().class_stock(rc), self.patch.class_rows(rc))

    def sorted_roots(self) -> list[int]:
        return self.patch.sorted_roots()

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        patch = self.patch
        roots = list(roots)
        found = super().tree_members(roots)
        if patch.tree_extra:
            extra = patch.tree_extra
            found.update(*[extra[root] for root in roots if root in extra])
        if patch.removed:
            found -= patch.removed
        return found

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        found = {}
        for uuid in uuids:
            rp = self.patch.provider(uuid)
            if rp is not None:
                found[uuid] = self.patch.root_of[rp]
        return found

    def has_trees(self) -> bool:
        patch, index = self.patch, self.index
        removed = patch.removed
        live_gone = sum(1 for rp in removed if rp in index.rows)
        roots_gone = sum(1 for rp in removed if rp in index.roots)
        added = [rp for rp in patch.added_ids.values() if rp not in removed]
        added_roots = sum(1 for rp in added if self.rows[rp][1] is None)
        roots = len(index.roots) - roots_gone + added_roots
        return roots != len(index.rows) - live_gone + len(added)

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]:
        found = super().roots_with_traits(required, forbidden)
        rows = self.rows
        for rp, traits in self.patch.traits.items():
            if rows[rp][1] is None:
                if required <= traits and not forbidden & traits:
                    found.add(rp)
                else:
                    found.discard(rp)
        return found - self.patch.removed

    def trait_holders(self, trait_ids: Iterable[int]) -> dict[int, set[int]]:
        wanted = set(trait_ids)
        found = super().trait_holders(wanted)
        for rp, traits in self.patch.traits.items():
            for trait in wanted:
                if trait in traits:
                    found.setdefault(trait, set()).add(rp)
                elif trait in found:
                    found[trait].discard(rp)
        removed = self.patch.removed
        return {tr: held - removed for tr, held in found.items() if held - removed}

    def aggregate_members(self, agg_ids: Iterable[int]) -> dict[int, set[int]]:
        found = {agg: self.patch.aggregate_members(agg) for agg in agg_ids}
        return {agg: held for agg, held in found.items() if held}

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        return self.patch.sharing_anchors(providers)

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        classes = set(class_ids)
        touched = classes & self.patch.classes.keys()
        found = super().stock(classes - touched, roots)  # (as outside where nothing changed)
        for rc in sorted(touched):
            every = self.stock_list(rc)
            if roots is None:
                found[rc] = every
            elif len(roots) * 4 < len(every):  # few trees: walk them
                by_rp = self.class_stock(rc)
                in_trees = [rp for rp in self.tree_members(roots) if rp in by_rp]
                found[rc] = [by_rp[rp] for rp in sorted(in_trees)]
            else:
                found[rc] = [s for s in every if s[1] in roots]
        return dict(sorted(found.items()))

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        if rows is self.stock_list(rc):
            return self.patch.fitting(rc, amount)
        return fitting(rows, amount)

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]:
        found = []
        patch = self.patch
        for root in roots:  # (in the live view's order)
            for rp in sorted(patch.members(root)):
                for rc, inv in patch.inventories_of(rp).items():
                    if rc not in skip_classes:
                        found.append((rp, rc, inv[0], patch.used_of(rp, rc)))
        return found

    def trait_names(self, providers: Collection[int]) -> dict[int, list[str]]:
        names = self.index.trait_names
        found = {}
        for rp in providers:
            traits = self.traits_of(rp)
            if traits:
                found[rp] = [names[tr] for tr in sorted(traits)]
        return found

    # -- the provider listing's questions: not served inside a sandbox -----------

    def lists_every_provider(self) -> bool:
        return False


class _Patched(Mapping[int, Stock]):
    """A class's stock rows by provider: the live ones, with the patch's rows of the
    providers it touched (None: none of the class there any more) laid over."""

    def __init__(self, live: Mapping[int, Stock], rows: dict[int, Stock | None]) -> None:
        self.live, self.rows = live, rows

    def __getitem__(self, rp: int) -> Stock:
        if rp in self.rows:
            row = self.rows[rp]
            if row is None:
                raise KeyError(rp)
            return row
        return self.live[rp]

    def get(self, rp: int, default=None):  # noqa: ANN001, ANN201
        if rp in self.rows:
            row = self.rows[rp]
            return default if row is None else row
        return self.live.get(rp, default)

    def __contains__(self, rp: object) -> bool:
        if rp in self.rows:
            return self.rows[rp] is not None  # type: ignore[index]
        return rp in self.live

    def __iter__(self) -> Iterator[int]:
        yield from (rp for rp in self.live if rp not in self.rows)
        yield from (rp for rp, row in self.rows.items() if row is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)
