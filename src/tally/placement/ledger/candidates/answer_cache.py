"""What the index path keeps between searches (`KeptAnswers`): the store of
kept answers (kept_answers.py fills and reads it: per request shape, each
anchor tree's candidates as JSON text, until the tree changes), each provider's
summary, and allocation requests as JSON. The index holds data only and tells
it what changed, once per load or catch-up."""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import orjson

from tally.placement.ledger.candidates.snapshot import Candidate

SHAPES_KEPT = 16  # request shapes kept (the least recently asked goes first)
CANDIDATES_KEPT = 150_000  # candidates kept over all shapes (about 50 MiB)
ASKS_REMEMBERED = 256  # shapes whose asks are counted, to keep a `limit`ed one asked twice
STALE_SHARE = 8  # search in bulk again once more than 1/8 of the trees are stale
STALE_MIN = 256  # (and more than this many)
REQUEST_TEXTS_KEPT = 50_000  # allocation requests kept as JSON (about 20 MiB)
VERDICTS_KEPT = 64  # verdicts of request shapes that found nothing
LISTING_PARTS_KEPT = 200_000  # providers of listings kept as JSON, over all shapes
LISTING_SHAPES_KEPT = 8  # listing shapes (microversions' links, base URLs)

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

    def peek(self, key: tuple) -> Kept | None:
        """The kept answer of `key`, not counted as asked (a sandbox reads it)."""
        return self._kept.get(key)

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


@dataclasses.dataclass
class Changed:
    """What one load or catch-up of the index changed, told to `KeptAnswers`."""

    everything: bool = False  # classes or traits renamed: nothing kept holds
    reloaded: bool = False  # loaded whole: nothing kept holds, and asks count afresh
    providers: set[int] = dataclasses.field(default_factory=set)  # summaries gone stale
    anchors: set[int] = dataclasses.field(default_factory=set)  # trees whose answers did
    ids_reused: bool = False  # a provider row went (SQLite may give its id to another)


class KeptAnswers:
    """What the index path writes once and keeps until it changes: answers per
    request shape (`answers`), each provider's summary (as a dict and as JSON)
    and allocation requests as JSON. Built from the index's data through
    `summary_of` and `uuid_of`; the index tells it what changed (`changed`),
    once at the end of each load or catch-up. Used under the index's lock."""

    def __init__(
        self, summary_of: Callable[[int], dict[str, Any]], uuid_of: Callable[[int], str]
    ) -> None:
        self._summary_of, self._uuid_of = summary_of, uuid_of
        self.answers = Answers()  # request shape -> candidates per tree (kept_answers.py)
        self._summaries: dict[int, dict[str, Any]] = {}
        self._summaries_json: dict[int, bytes] = {}  # provider -> b'"uuid":{...}'
        # group suffixes -> candidate -> its allocation request as JSON (render.py)
        self._request_texts: dict[tuple[str, ...], dict[tuple, str]] = {}
        self.listings = ListingParts()  # GET /resource_providers (provider_listing.py)
        # why a request shape finds nothing, until anything changes: a storm of boots
        # that fail alike works it out once (`candidates.answer_and_verdict`)
        self.verdicts: dict[tuple, Any] = {}

    def keeps_answers(self) -> bool:
        """Whether some answer is kept (else no tree needs marking stale)."""
        return bool(self.answers)

    def changed(self, change: Changed) -> None:
        """Forget what `change` made stale."""
        self.verdicts.clear()
        self.listings.changed(None if change.reloaded else change.providers)
        if change.everything or change.reloaded:
            self._summaries.clear()
            self._summaries_json.clear()
            self._request_texts.clear()
            if change.reloaded:
                self.answers = Answers()
            else:
                self.answers.clear()
            return
        for rp in change.providers:
            self._summaries.pop(rp, None)
            self._summaries_json.pop(rp, None)
        if change.ids_reused:
            self._request_texts.clear()
        if self.answers:
            self.answers.stale(change.anchors)

    def summaries(self, providers: list[int]) -> dict[str, dict[str, Any]]:
        """Summaries by provider uuid, in the order given."""
        kept, build, uuid = self._summaries, self.summary, self._uuid_of
        return {uuid(rp): kept.get(rp) or build(rp) for rp in providers}

    def summary(self, rp: int) -> dict[str, Any]:
        """A provider's summary with every class it has (kept until it changes;
        never modified once built, so an answer being written can hold it)."""
        found = self._summaries.get(rp)
        if found is None:
            found = self._summaries[rp] = self._summary_of(rp)
        return found

    def summaries_json(self, providers: list[int]) -> list[bytes]:
        """Each provider's `"uuid":{summary}` as JSON (bytes: an answer is joined
        from them without another copy as text), in the order given."""
        kept, build = self._summaries_json, self._summary_json
        return [kept.get(rp) or build(rp) for rp in providers]

    def _summary_json(self, rp: int) -> bytes:
        """(The summary as a dict is not kept for it: the dicts of a whole answer's
        100,000 providers held 62 MiB beside their 28 MiB of JSON.)"""
        summary = self._summaries.get(rp) or self._summary_of(rp)
        found = self._summaries_json[rp] = b'"%s":%s' % (
            self._uuid_of(rp).encode(),
            orjson.dumps(summary),
        )
        return found

    def request_texts(self, suffixes: tuple[str, ...]) -> dict[tuple, str]:
        """Allocation requests already written as JSON (render.py), by candidate,
        for requests with these group suffixes. The text is a function of the
        candidate's ids alone (usage plays no part), so it stays right while no
        provider is deleted (SQLite may hand its id to the next one) and no class
        renamed; at most REQUEST_TEXTS_KEPT are kept."""
        if sum(map(len, self._request_texts.values())) > REQUEST_TEXTS_KEPT:
            self._request_texts.clear()
        return self._request_texts.setdefault(suffixes, {})


class ListingParts:
    """Each provider's part of a `GET /resource_providers` answer as JSON, per
    listing shape (a microversion's links under one base URL), and its
    last-modified stamp (as the driver gave it), kept until the provider changes:
    a listing of thousands is then a lookup per provider, not a query.

    Rows are read from the database after the catch-up that chose them; one
    read before a change that a later catch-up tells is kept only if no change
    was told in between (`epoch`), so a change is never dropped before the stale
    row it would drop is kept. It has its own lock: parts are kept outside the
    index's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[Hashable, dict[int, bytes]] = {}  # shape -> provider -> part
        self._stamps: dict[int, Any] = {}  # provider -> raw last-modified stamp
        self._kept = 0  # parts over all shapes
        self.epoch = 0  # changes told so far

    def changed(self, providers: Iterable[int] | None) -> None:
        """These providers changed (None: every one may have)."""
        with self._lock:
            self.epoch += 1
            if providers is None:
                self._parts.clear()
                self._stamps.clear()
                self._kept = 0
                return
            stamps = self._stamps
            for rp in providers:
                if rp in stamps:  # (every kept part has its stamp)
                    del stamps[rp]
                    for parts in self._parts.values():
                        self._kept -= parts.pop(rp, None) is not None

    def lookup(
        self, shape: Hashable, providers: list[int]
    ) -> tuple[list[bytes | None], list[Any], int]:
        """The kept parts of these providers (None where none is kept), their
        stamps, and the epoch to hand back to `keep` with the missing ones."""
        with self._lock:
            kept = self._parts.get(shape)
            if kept is None:
                return [None] * len(providers), [], self.epoch
            stamps = list(map(self._stamps.get, providers))
            return list(map(kept.get, providers)), stamps, self.epoch

    def keep(self, shape: Hashable, epoch: int, found: dict[int, tuple[bytes, Any]]) -> None:
        """Keep these providers' parts and stamps, read after the catch-up of
        `epoch` (not when a change was told since: they may be older than it)."""
        with self._lock:
            if epoch != self.epoch or not found:
                return
            kept = self._parts.get(shape)
            if kept is None:
                if len(self._parts) >= LISTING_SHAPES_KEPT:
                    self._forget_shapes()
                kept = self._parts[shape] = {}
            if self._kept + len(found) > LISTING_PARTS_KEPT:
                self._forget_shapes(but=shape)
                if len(kept) + len(found) > LISTING_PARTS_KEPT:
                    return
            for rp, (part, stamp) in found.items():
                self._kept += kept.get(rp) is None
                kept[rp] = part
                self._stamps[rp] = stamp

    def _forget_shapes(self, but: Hashable | None = None) -> None:
        keep = self._parts.get(but)
        self._parts = {} if keep is None else {but: keep}
        self._kept = 0 if keep is None else len(keep)
        if keep is None:
            self._stamps.clear()
