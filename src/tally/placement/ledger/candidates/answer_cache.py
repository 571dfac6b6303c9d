"""The store of kept answers (kept_answers.py fills and reads it): per request
shape, each anchor tree's candidates as JSON text, until the tree changes. The
index owns one and marks trees stale as writes come in."""

from __future__ import annotations

import bisect
import dataclasses

from tally.placement.ledger.candidates.snapshot import Candidate

SHAPES_KEPT = 16  # request shapes kept (the least recently asked goes first)
CANDIDATES_KEPT = 150_000  # candidates kept over all shapes (about 50 MiB)
ASKS_REMEMBERED = 256  # shapes whose asks are counted, to keep a `limit`ed one asked twice
STALE_SHARE = 8  # search in bulk again once more than 1/8 of the trees are stale
STALE_MIN = 256  # (and more than this many)

# One tree's candidates: their texts, and per candidate (roots of the trees it
# takes from when not just the anchor's, itself when it may come again from
# another tree: sharing providers alone); None: every candidate is in the tree.
Tree = tuple[tuple[str, ...], tuple[tuple[frozenset[int] | None, Candidate | None], ...] | None]


@dataclasses.dataclass(eq=False)
class Kept:
    """The candidates of one request shape, per anchor tree."""

    trees: dict[int, Tree] = dataclasses.field(default_factory=dict)
    anchors: list[int] = dataclasses.field(default_factory=list)  # with candidates, in order
    stale: set[int] = dataclasses.field(default_factory=set)
    size: int = 0  # candidates
    # the tree each group's in_tree named when searched: if one moves, every tree
    # a sharing provider of it reaches changes, not only the two marked stale
    in_trees: tuple[int | None, ...] = ()
    # the allocation requests of the whole answer joined, and the trees they take from
    whole: tuple[bytes, set[int]] | None = None

    def put(self, anchor: int, tree: Tree | None) -> None:
        """Set (None: clear) the candidates of one anchor."""
        self.whole = None
        old = self.trees.pop(anchor, None)
        if old is not None:
            self.size -= len(old[0])
        i = bisect.bisect_left(self.anchors, anchor)
        present = i < len(self.anchors) and self.anchors[i] == anchor
        if tree is None:
            if present:
                del self.anchors[i]
            return
        self.trees[anchor] = tree
        self.size += len(tree[0])
        if not present:
            self.anchors.insert(i, anchor)


class Answers:
    """The kept answers of one index (used under the index's lock)."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Kept] = {}
        self._asks: dict[tuple, int] = {}

    def __bool__(self) -> bool:
        return bool(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def stale(self, anchors: set[int]) -> None:
        """These trees changed: their kept candidates are searched again when
        next asked (a shape with too many stale trees is dropped whole)."""
        if not anchors:
            return
        for key, kept in list(self._kept.items()):
            kept.stale |= anchors
            if len(kept.stale) > max(STALE_MIN, len(kept.anchors) // STALE_SHARE):
                del self._kept[key]

    def get(self, key: tuple) -> Kept | None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._kept[key] = kept  # the most recently asked comes last
        return kept

    def asked(self, key: tuple) -> int:
        """Count one more ask of `key`; how many there were before."""
        before = self._asks.pop(key, 0)
        if len(self._asks) >= ASKS_REMEMBERED:
            del self._asks[next(iter(self._asks))]
        self._asks[key] = before + 1
        return before

    def put(self, key: tuple, kept: Kept) -> None:
        """Keep `kept` (not when it alone is over the cap), dropping the least
        recently asked shapes past the caps."""
        if kept.size <= CANDIDATES_KEPT:
            self._kept[key] = kept
            self.trim()

    def trim(self) -> None:
        while len(self._kept) > SHAPES_KEPT or (
            sum(k.size for k in self._kept.values()) > CANDIDATES_KEPT
        ):
            del self._kept[next(iter(self._kept))]

    def drop(self, key: tuple) -> None:
        self._kept.pop(key, None)
