"""A sandbox laid over the live index: `Patch`, the overlay in the index's ids
(view.py reads the live index through it).

What a patch holds costs what the sandbox changed: per provider touched its
usage deltas, its inventories (when changed) and traits (when changed), the
providers removed, and the providers made in the sandbox (ids after every id of
the index, in the order they were made, as the database gives them). A patch is
folded step by step as its overlay grows (`advance`), so a plan of 200 steps
folds each once. What it keeps while it lives (a class's stock list with the
providers it touched patched in, the inventories of a class an amount fits in,
the sandbox's kept answers: answers.py) is patched as it advances, never built
again per search; the index's own lists are never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tally.placement.ledger.candidates.index import _put
from tally.placement.ledger.candidates.snapshot import (
    SHARING_TRAIT,
    ProviderRow,
    Stock,
    capacity_of,
    fitting,
)
from tally.placement.ledger.sandbox.answers import SandboxAnswers
from tally.placement.ledger.sandbox.overlay import amounts

if TYPE_CHECKING:
    from tally.placement.ledger.candidates.index import Index, Inventory
    from tally.placement.ledger.sandbox.overlay import Overlay

FITTING_KEPT = 8  # amounts per class whose fitting inventories a patch keeps
_NONE: frozenset[int] = frozenset()


class Patch:
    """An overlay in the ids of one state of the index (`index_version`), folded
    up to `folded` of its steps."""

    def __init__(self, overlay: Overlay, index: Index) -> None:
        self.overlay, self.index = overlay, index
        self.index_version = index.version
        self.folded = 0  # steps of the overlay folded in
        self.removed: set[int] = set()
        self.used: dict[int, dict[int, int]] = {}  # provider -> class -> delta
        self.inventories: dict[int, dict[int, Inventory]] = {}  # replaced whole
        self.traits: dict[int, frozenset[int]] = {}  # replaced whole
        self.aggregates: dict[int, frozenset[int]] = {}  # of the providers made here
        self.added_ids: dict[str, int] = {}  # uuid -> id, of the providers made here
        self.added_roots: list[int] = []  # in id order
        self.tree_extra: dict[int, set[int]] = {}  # root -> providers made here in its tree
        self.classes: dict[int, set[int]] = {}  # class -> providers whose row of it differs
        self.rows: dict[int, ProviderRow] = index.rows  # (copied once a provider is made)
        self.root_of: dict[int, int] = index.root_of
        self._next = 1 + max(max(index.rows, default=0), max(index.left_out, default=0))
        self.shape = 0  # bumped by every change of traits, trees or aggregates
        self._lists: dict[int, list[Stock]] = {}
        self._class_rows: dict[int, dict[int, Stock | None]] = {}
        self._fitting: dict[int, dict[int, list[Stock]]] = {}
        self._sorted_roots: tuple[int, list[int]] | None = None
        self._sharing: tuple[int, dict[int, set[int]]] | None = None
        self._touched: tuple[int, set[int], set[int]] | None = None
        self.answers: SandboxAnswers | None = None  # kept answers (answers.py)
        changed: set[tuple[int, int]] = set()
        for write in _writes(overlay):
            self._fold(write, changed)
        self.folded = overlay.count
        self._classes(changed)

    # -- folding the overlay's steps ------------------------------------------

    def advance(self) -> None:
        """Fold the steps the overlay gained since (the caches patched)."""
        overlay = self.overlay
        new = overlay.count - self.folded
        if not new:
            return
        changed: set[tuple[int, int]] = set()  # (provider, class) whose stock row may differ
        for step in overlay.steps[len(overlay.steps) - new :]:
            if step["applied"]:
                self._fold(step["write"], changed)
        self.folded = overlay.count
        self._classes(changed)
        self._restock(changed)
        if self.answers is not None:
            self.answers.advanced()

    def _classes(self, changed: set[tuple[int, int]]) -> None:
        for rp, rc in changed:
            self.classes.setdefault(rc, set()).add(rp)

    def provider(self, uuid: str) -> int | None:
        """The id of provider `uuid` in the sandbox, None when it does not exist."""
        rp = self.added_ids.get(uuid)
        if rp is None or rp in self.removed:
            rp = self.index.by_uuid.get(uuid)
        return None if rp is None or rp in self.removed else rp

    def _fold(self, write: dict[str, Any], changed: set[tuple[int, int]]) -> None:
        op, classes = write["op"], self.index.class_ids
        if op == "allocations":
            for held, sign in ((write["before"], -1), (write["allocations"], 1)):
                for uuid, resources in held.items():
                    rp = self.provider(uuid)
                    if rp is None:
                        continue
                    delta = self.used.setdefault(rp, {})
                    for name, amount in resources.items():
                        rc = classes.get(name)
                        if rc is not None:
                            delta[rc] = delta.get(rc, 0) + sign * amount
                            changed.add((rp, rc))
            return
        uuid = write["provider"]
        if op == "add":
            rp = self._add(write)
        else:
            rp = self.provider(uuid)
            if rp is None:
                return
        before = set(self.inventories_of(rp))
        if op in ("inventories", "add"):
            self.inventories[rp] = {
                classes[name]: (
                    capacity_of(a["total"], a["reserved"], a["allocation_ratio"]),
                    a["min_unit"],
                    a["max_unit"],
                    a["step_size"],
                )
                for name, a in write["inventories"].items()
                if name in classes
            }
        if op in ("traits", "add"):
            ids = self.index.trait_ids
            self.traits[rp] = frozenset(ids[n] for n in write["traits"] if n in ids)
            self.shape += 1
        if op == "delete":
            self.removed.add(rp)
            self.shape += 1
        changed.update((rp, rc) for rc in before | set(self.inventories_of(rp)))

    def _add(self, write: dict[str, Any]) -> int:
        """A provider made in the sandbox: its id, after all the others."""
        if self.rows is self.index.rows:  # (the first: the maps become the patch's own)
            self.rows, self.root_of = dict(self.rows), dict(self.root_of)
        rp, self._next = self._next, self._next + 1
        parent = None if write["parent"] is None else self.provider(write["parent"])
        root = rp if parent is None else self.root_of[parent]
        self.rows[rp] = (write["provider"], parent, root)
        self.root_of[rp] = root
        self.added_ids[write["provider"]] = rp
        if parent is None:
            self.added_roots.append(rp)
        self.tree_extra.setdefault(root, set()).add(rp)
        known = self.index.aggregate_ids
        self.aggregates[rp] = frozenset(known[a] for a in write["aggregates"] if a in known)
        return rp

    def touched(self) -> set[int]:
        """The providers whose summary differs from the live one (worked out when
        asked: the kept answers ask, answers.py)."""
        return self._touch()[0]

    def anchors(self) -> set[int]:
        """The trees whose candidates may differ from the live ones: the trees of
        the providers touched, and every tree a touched sharing provider (before
        or after) shares into."""
        return self._touch()[1]

    def _touch(self) -> tuple[set[int], set[int]]:
        if self._touched is None or self._touched[0] != self.folded:
            touched = {*self.used, *self.inventories, *self.traits, *self.removed}
            touched.update(self.added_ids.values())
            anchors = {self.root_of[rp] for rp in touched}
            sharing = self.index.trait_ids.get(SHARING_TRAIT)
            for rp in touched if sharing is not None else ():
                if sharing in self.traits.get(rp, _NONE) or sharing in self.index.traits.get(
                    rp, _NONE
                ):
                    anchors.update(self._shared_into(rp))
            self._touched = (self.folded, touched, anchors)
        return self._touched[1], self._touched[2]

    def _shared_into(self, sp: int) -> set[int]:
        """The roots of every provider in an aggregate of `sp` (live or made here)."""
        index, found = self.index, set()
        for agg in self.aggregates.get(sp) or index.aggregates.get(sp, ()):
            found.update(self.root_of[m] for m in index.members.get(agg, ()))
            found.update(self.root_of[m] for m, aggs in self.aggregates.items() if agg in aggs)
        return found

    # -- the patched state ------------------------------------------------------

    def inventories_of(self, rp: int) -> Mapping[int, Inventory]:
        found = self.inventories.get(rp)
        return self.index.inventories.get(rp, {}) if found is None else found

    def used_of(self, rp: int, rc: int) -> int:
        return self.index.used.get(rp, {}).get(rc, 0) + self.used.get(rp, {}).get(rc, 0)

    def traits_of(self, rp: int) -> frozenset[int]:
        found = self.traits.get(rp)
        return self.index.traits.get(rp, _NONE) if found is None else found

    def aggregates_of(self, rp: int) -> frozenset[int]:
        found = self.aggregates.get(rp)
        return self.index.aggregates.get(rp, _NONE) if found is None else found

    def stock_row(self, rp: int, rc: int) -> Stock | None:
        """Provider `rp`'s row of class `rc` in the sandbox (None: it has none)."""
        if rp in self.removed:
            return None
        inv = self.inventories_of(rp).get(rc)
        if inv is None:
            return None
        return (rp, self.root_of[rp], inv[0], self.used_of(rp, rc), inv[1], inv[2], inv[3])

    def sorted_roots(self) -> list[int]:
        """Every root in the sandbox, in id order (kept until a tree changes)."""
        if self._sorted_roots is None or self._sorted_roots[0] != self.shape:
            removed = self.removed
            roots = [rp for rp in self.index.sorted_roots() if rp not in removed]
            roots += [rp for rp in self.added_roots if rp not in removed]
            self._sorted_roots = (self.shape, roots)
        return self._sorted_roots[1]

    def members(self, root: int) -> set[int]:
        """The providers of the tree of `root` in the sandbox."""
        found = self.index.trees.get(root, _NONE)
        extra = self.tree_extra.get(root)
        if extra:
            found = found | extra
        removed = self.removed
        return {rp for rp in found if rp not in removed} if removed else set(found)

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        """`View.sharing_anchors` in the sandbox: per sharing provider the roots of
        the providers in its aggregates (kept until a tree or aggregate changes)."""
        if self._sharing is None or self._sharing[0] != self.shape:
            self._sharing = (self.shape, {})
        kept, removed = self._sharing[1], self.removed
        found: dict[int, set[int]] = {}
        for sp in providers:
            if sp in removed:
                continue
            roots = kept.get(sp)
            if roots is None:
                roots = kept[sp] = {
                    self.root_of[m]
                    for agg in self.aggregates_of(sp)
                    for m in self.aggregate_members(agg)
                }
            if roots:
                found[sp] = roots
        return found

    def aggregate_members(self, agg: int) -> set[int]:
        found = set(self.index.members.get(agg, ()))
        found.update(rp for rp, aggs in self.aggregates.items() if agg in aggs)
        return found - self.removed

    def summary_of(self, rp: int) -> dict[str, Any]:
        """A provider's summary in the sandbox (as `Index.summary_of`)."""
        _, parent, root = self.rows[rp]
        names, traits = self.index.class_names, self.index.trait_names
        return {
            "resources": {
                names[rc]: {"capacity": inv[0], "used": self.used_of(rp, rc)}
                for rc, inv in self.inventories_of(rp).items()
            },
            "traits": [traits[tr] for tr in sorted(self.traits_of(rp))],
            "parent_provider_uuid": self.rows[parent][0] if parent is not None else None,
            "root_provider_uuid": self.rows[root][0],
        }

    # -- what is kept while the patch lives ------------------------------------

    def class_rows(self, rc: int) -> dict[int, Stock | None]:
        """The rows of class `rc` the patch changed, by provider (None: gone)."""
        found = self._class_rows.get(rc)
        if found is None:
            touched = self.classes.get(rc, ())
            found = self._class_rows[rc] = {rp: self.stock_row(rp, rc) for rp in touched}
        return found

    def stock_list(self, rc: int) -> list[Stock]:
        """Every inventory of class `rc` in provider order: the index's list, or
        a copy with the patch's rows in it (kept, patched as the patch advances)."""
        if rc not in self.classes:
            return self.index.stock_list(rc)
        found = self._lists.get(rc)
        if found is None:
            found = self._lists[rc] = list(self.index.stock_list(rc))
            for rp, row in sorted(self.class_rows(rc).items()):
                _put(found, rp, row)
        return found

    def fitting(self, rc: int, amount: int) -> list[Stock]:
        """The inventories of class `rc` one allocation of `amount` fits in (the
        index's when it keeps them and the patch changed none of the class; the
        patch keeps the others: it never makes the index keep one more)."""
        if rc not in self.classes:
            found = self.index.fitting_kept(rc, amount)
            if found is not None:
                return found
        by_amount = self._fitting.setdefault(rc, {})
        found = by_amount.get(amount)
        if found is None:
            if len(by_amount) >= FITTING_KEPT:
                del by_amount[next(iter(by_amount))]
            found = by_amount[amount] = fitting(self.stock_list(rc), amount)
        return found

    def _restock(self, changed: set[tuple[int, int]]) -> None:
        for rp, rc in changed:
            row = self.stock_row(rp, rc)
            kept = self._class_rows.get(rc)
            if kept is not None:
                kept[rp] = row
            listed = self._lists.get(rc)
            if listed is not None:
                _put(listed, rp, row)
            for amount, rows in self._fitting.get(rc, {}).items():
                fits = row is not None and fitting([row], amount)
                _put(rows, rp, row if fits else None)


def _writes(overlay: Overlay) -> Iterator[dict[str, Any]]:
    """The overlay's folded state as writes (`Patch._fold`): the live providers
    removed, each provider made (in the order made), inventories and traits as
    now, the usage the consumers' allocations add (or free)."""
    for uuid in sorted(overlay.removed):  # (live ones: before one is made again)
        yield {"op": "delete", "provider": uuid}
    yield from overlay.added.values()
    for uuid, changed in overlay.inventories.items():
        yield {"op": "inventories", "provider": uuid, "inventories": amounts(changed.now)}
    for uuid, changed in overlay.traits.items():
        yield {"op": "traits", "provider": uuid, "traits": sorted(changed.now)}
    yield {"op": "allocations", "before": {}, "allocations": overlay.delta}


def patch_of(overlay: Overlay, index: Index, found: Patch | None) -> Patch:
    """The overlay's patch over the index as it is now: `found` (the one kept),
    advanced to the overlay's newest step, while neither the overlay object nor
    the index moved; else a new one (the caller keeps it)."""
    if (
        found is None
        or found.overlay is not overlay
        or found.index is not index
        or found.index_version != index.version
    ):
        return Patch(overlay, index)
    found.advance()
    return found
