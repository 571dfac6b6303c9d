"""A sandbox laid over the live index: `Patch` (the overlay in the index's ids)
and `SandboxView`, a `Source` (candidates/source.py) that reads the live `View`
through it, so the search, the "why" verdict, usages and amounts answer inside a
sandbox with the same code as outside.

What a patch holds costs only what the sandbox changed: per provider touched its
usage deltas, its inventories (when changed) and traits (when changed), and the
providers removed. A class's stock list with a provider touched is copied and
patched per search (never kept: the index's own lists are never changed).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from tally.placement.ledger.candidates.index import _put
from tally.placement.ledger.candidates.snapshot import Stock, fitting
from tally.placement.ledger.candidates.view import View

if TYPE_CHECKING:
    from tally.placement.ledger.candidates.index import Index, Inventory
    from tally.placement.ledger.sandbox.overlay import Overlay


class Patch:
    """An overlay in the ids of one state of the index (`key`)."""

    def __init__(self, overlay: Overlay, index: Index) -> None:
        self.overlay, self.index = overlay, index
        self.key = (index.version, overlay.version)
        ids, classes = index.by_uuid, index.class_ids
        self.removed = {ids[u] for u in overlay.removed if u in ids}
        self.used: dict[int, dict[int, int]] = {}  # provider -> class -> delta
        for consumer in overlay.consumers.values():
            for allocations, sign in ((consumer.before, -1), (consumer.now, 1)):
                for uuid, resources in allocations.items():
                    rp = ids.get(uuid)
                    if rp is None:
                        continue
                    delta = self.used.setdefault(rp, {})
                    for rc_name, amount in resources.items():
                        rc = classes.get(rc_name)
                        if rc is not None:
                            delta[rc] = delta.get(rc, 0) + sign * amount
        self.inventories: dict[int, dict[int, Inventory]] = {}
        for uuid, changed in overlay.inventories.items():
            rp = ids.get(uuid)
            if rp is not None:
                self.inventories[rp] = {
                    classes[rc]: (r.capacity, r.min_unit, r.max_unit, r.step_size)
                    for rc, r in changed.now.items()
                    if rc in classes
                }
        self.traits: dict[int, frozenset[int]] = {}
        for uuid, changed in overlay.traits.items():
            rp = ids.get(uuid)
            if rp is not None:
                names = index.trait_ids
                self.traits[rp] = frozenset(names[n] for n in changed.now if n in names)
        # class -> providers whose stock row of it the patch changes
        self.classes: dict[int, set[int]] = {}
        for rp, delta in self.used.items():
            for rc in delta:
                self.classes.setdefault(rc, set()).add(rp)
        for rp in self.inventories:
            for rc in {*self.inventories[rp], *index.inventories.get(rp, {})}:
                self.classes.setdefault(rc, set()).add(rp)
        for rp in self.removed:
            for rc in index.inventories.get(rp, {}):
                self.classes.setdefault(rc, set()).add(rp)
        self.removed_roots = {rp for rp in self.removed if rp in index.roots}


def patch_of(overlay: Overlay, index: Index, kept: dict[str, Patch], sandbox: str) -> Patch:
    """The overlay's patch over the index as it is now (kept per sandbox while
    neither moved)."""
    found = kept.get(sandbox)
    if (
        found is None
        or found.overlay is not overlay
        or found.index is not index
        or found.key != (index.version, overlay.version)
    ):
        found = kept[sandbox] = Patch(overlay, index)
    return found


class SandboxView(View):
    """The live `View` with a sandbox's patch laid over it (one search, under the
    index's lock). Answers nothing from the index's kept answers."""

    def __init__(self, index: Index, patch: Patch) -> None:
        super().__init__(index)
        self.patch = patch
        self._lists: dict[int, list[Stock]] = {}
        self._stocks: dict[int, _Patched] = {}

    # -- a provider's inventories, usage and traits, patched ----------------------

    def inventories_of(self, rp: int) -> Mapping[int, Inventory]:
        found = self.patch.inventories.get(rp)
        return self.index.inventories.get(rp, {}) if found is None else found

    def used_of(self, rp: int) -> dict[int, int]:
        used = dict(self.index.used.get(rp, {}))
        for rc, delta in self.patch.used.get(rp, {}).items():
            used[rc] = used.get(rc, 0) + delta
        return used

    def traits_of(self, rp: int) -> frozenset[int]:
        found = self.patch.traits.get(rp)
        return self.index.traits.get(rp, frozenset()) if found is None else found

    def exists(self, rp: int) -> bool:
        return rp in self.index.rows and rp not in self.patch.removed

    # -- what a sandbox's changes ask, by uuid and name ---------------------------

    def provider(self, uuid: str) -> int | None:
        """The id of provider `uuid`, None when it does not exist in the sandbox."""
        rp = self.index.by_uuid.get(uuid)
        return rp if rp is not None and self.exists(rp) else None

    def uuid_of(self, rp: int) -> str:
        return self.rows[rp][0]

    def root_uuid(self, uuid: str) -> str | None:
        """The uuid of the root of provider `uuid` (removed or not), None if unknown."""
        rp = self.index.by_uuid.get(uuid)
        return None if rp is None else self.rows[self.index.root_of[rp]][0]

    def class_ids_by_name(self) -> Mapping[str, int]:
        return self.index.class_ids

    def class_names_by_id(self) -> Mapping[int, str]:
        return self.index.class_names

    def trait_names_of(self, rp: int) -> list[str]:
        names = self.index.trait_names
        return sorted(names[tr] for tr in self.traits_of(rp))

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

        found = [(depth_under(m), m) for m in self.tree_members([self.index.root_of[rp]])]
        under = [(d, m) for d, m in found if d is not None]
        return [m for _, m in sorted(under, key=lambda dm: (-dm[0], rows[dm[1]][0]))]

    def children(self, rp: int) -> list[int]:
        rows = self.rows
        return [m for m in self.tree_members([self.index.root_of[rp]]) if rows[m][1] == rp]

    def tree_uuids(self, rp: int) -> set[str]:
        """The uuids of every provider of `rp`'s tree in the sandbox."""
        return {self.rows[m][0] for m in self.tree_members([self.index.root_of[rp]])}

    def _stock_row(self, rp: int, rc: int) -> Stock | None:
        if rp in self.patch.removed:
            return None
        inv = self.inventories_of(rp).get(rc)
        if inv is None:
            return None
        used = self.used_of(rp).get(rc, 0)
        return (rp, self.index.rows[rp][2], inv[0], used, inv[1], inv[2], inv[3])

    # -- Source ----------------------------------------------------------------

    def kept(self) -> None:
        return None

    def fresh(self) -> SandboxView:
        return self

    def stock_list(self, rc: int) -> list[Stock]:
        """Every inventory of class `rc` in provider order: the index's list, or a
        patched copy when the sandbox touched the class (made once per search)."""
        touched = self.patch.classes.get(rc)
        if not touched:
            return self.index.stock_list(rc)
        found = self._lists.get(rc)
        if found is None:
            found = self._lists[rc] = list(self.index.stock_list(rc))
            for rp in sorted(touched):
                _put(found, rp, self._stock_row(rp, rc))
        return found

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        touched = self.patch.classes.get(rc)
        if not touched:
            return super().class_stock(rc)
        found = self._stocks.get(rc)
        if found is None:
            rows = {rp: self._stock_row(rp, rc) for rp in touched}
            found = self._stocks[rc] = _Patched(super().class_stock(rc), rows)
        return found

    def sorted_roots(self) -> list[int]:
        removed = self.patch.removed_roots
        roots = self.index.sorted_roots()
        return [rp for rp in roots if rp not in removed] if removed else roots

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        return super().tree_members(roots) - self.patch.removed

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        found = super().tree_roots(uuids)
        removed = self.patch.removed
        return {u: root for u, root in found.items() if self.index.by_uuid[u] not in removed}

    def has_trees(self) -> bool:
        removed = self.patch.removed
        return len(self.index.roots) - len(self.patch.removed_roots) != len(self.rows) - len(
            removed
        )

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]:
        found = super().roots_with_traits(required, forbidden)
        for rp, traits in self.patch.traits.items():
            if rp in self.index.roots:
                if required <= traits and not forbidden & traits:
                    found.add(rp)
                else:
                    found.discard(rp)
        return found - self.patch.removed_roots

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
        removed = self.patch.removed
        found = super().aggregate_members(agg_ids)
        return {agg: held - removed for agg, held in found.items() if held - removed}

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        removed = self.patch.removed
        found = super().sharing_anchors(p for p in providers if p not in removed)
        return {sp: roots - removed for sp, roots in found.items() if roots - removed}

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        found: dict[int, list[Stock]] = {}
        for rc in sorted(set(class_ids)):
            every = self.stock_list(rc)
            if roots is None:
                found[rc] = every
            else:
                found[rc] = [s for s in every if s[1] in roots]
        return found

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        if not self.patch.classes.get(rc):
            return super().fitting(rc, rows, amount)
        return fitting(rows, amount)

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]:
        found = []
        removed, trees = self.patch.removed, self.index.trees
        for root in roots:  # (in the live view's order)
            for rp in trees.get(root, ()):
                if rp in removed:
                    continue
                used = self.used_of(rp)
                for rc, inv in self.inventories_of(rp).items():
                    if rc not in skip_classes:
                        found.append((rp, rc, inv[0], used.get(rc, 0)))
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
