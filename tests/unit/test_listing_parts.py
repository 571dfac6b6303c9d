"""The listing parts a worker keeps (`answer_cache.ListingParts`): kept per
shape until their provider changes, never kept from a read a change overtook,
and bounded."""

from __future__ import annotations

import pytest

from tally.placement.ledger.candidates import answer_cache
from tally.placement.ledger.candidates.answer_cache import ListingParts


def _kept(parts: ListingParts, shape: str, ids: list[int]) -> list[bytes | None]:
    return parts.lookup(shape, ids)[0]


def test_parts_are_kept_per_shape_with_their_stamps():
    parts = ListingParts()
    assert parts.lookup("a", [1, 2]) == ([None, None], [], 0)
    parts.keep("a", 0, {1: (b"one", "2026-01-01"), 2: (b"two", None)})
    assert parts.lookup("a", [2, 1, 3]) == ([b"two", b"one", None], [None, "2026-01-01", None], 0)
    assert _kept(parts, "b", [1]) == [None]  # another link shape writes its own


def test_a_change_drops_the_provider_from_every_shape():
    parts = ListingParts()
    parts.keep("a", 0, {1: (b"a1", None), 2: (b"a2", "s")})  # a stamp of None too
    parts.keep("b", 0, {1: (b"b1", None)})
    parts.changed({1, 7})
    assert _kept(parts, "a", [1, 2]) == [None, b"a2"]
    assert _kept(parts, "b", [1]) == [None]
    parts.changed(None)  # loaded whole
    assert _kept(parts, "a", [2]) == [None]


def test_a_read_overtaken_by_a_change_is_not_kept():
    """Rows read after a lookup may predate a change told meanwhile: keeping
    them would outlive the drop that change made."""
    parts = ListingParts()
    _, _, epoch = parts.lookup("a", [1])
    parts.changed({1})  # another thread caught up
    parts.keep("a", epoch, {1: (b"old", None)})
    assert _kept(parts, "a", [1]) == [None]
    _, _, epoch = parts.lookup("a", [1])
    parts.keep("a", epoch, {1: (b"new", None)})
    assert _kept(parts, "a", [1]) == [b"new"]


def test_parts_are_bounded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(answer_cache, "LISTING_PARTS_KEPT", 3)
    monkeypatch.setattr(answer_cache, "LISTING_SHAPES_KEPT", 2)
    parts = ListingParts()
    parts.keep("a", 0, {1: (b"a1", None), 2: (b"a2", None)})
    parts.keep("b", 0, {1: (b"b1", None), 2: (b"b2", None)})  # past 3: "a" is forgotten
    assert _kept(parts, "a", [1, 2]) == [None, None]
    assert _kept(parts, "b", [1, 2]) == [b"b1", b"b2"]
    parts.keep("b", 0, {3: (b"b3", None), 4: (b"b4", None)})  # alone past 3: not kept
    assert _kept(parts, "b", [1, 2, 3, 4]) == [b"b1", b"b2", None, None]
    parts.keep("c", 0, {5: (b"c5", None)})
    parts.keep("d", 0, {5: (b"d5", None)})  # a third shape: the others go
    assert _kept(parts, "d", [5]) == [b"d5"]
    assert _kept(parts, "b", [1]) == [None]
