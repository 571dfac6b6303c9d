"""A sandbox's kept answers: what `KeptAnswers` (candidates/answer_cache.py) is
to the live index, for one patch (patch.py), so a search asked again inside a
sandbox costs what it costs outside.

A sandbox differs from the live cloud in the trees its patch touched (`anchors`:
each touched provider's tree, and every tree a touched sharing provider shares
into). So the answer of a request shape the live index keeps is the sandbox's
in every other tree: the sandbox takes a copy of it with those trees (and the
trees stale in it) marked stale, and kept_answers.py searches just them again
over the sandbox, as it does after a live write. A shape the live index does not
keep is searched in full the first time, then kept here. Summaries are the live
index's kept ones except for the providers the patch touched.

Nothing here changes what the live index keeps (its answers are read, not
asked: `Answers.peek`; a copy holds the trees it searched again over the live
ones, a `ChainMap`). What a sandbox keeps is bounded (SHAPES_KEPT shapes,
CANDIDATES_KEPT candidates; only the ANSWERS_KEPT sandboxes read last keep any,
store.py) and goes with its patch (a step applied, or the live index moved).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Protocol

import orjson

from tally.placement.ledger.candidates.answer_cache import (
    STALE_MIN,
    STALE_SHARE,
    Answers,
    Kept,
    KeptAnswers,
)


class Patch(Protocol):
    """What the kept answers ask of a sandbox's patch (patch.py)."""

    rows: dict[int, tuple]

    def touched(self) -> set[int]: ...

    def anchors(self) -> set[int]: ...

    def summary_of(self, rp: int) -> dict[str, Any]: ...


SHAPES_KEPT = 4  # request shapes a sandbox keeps
CANDIDATES_KEPT = 20_000  # candidates it keeps over them
REQUEST_TEXTS_KEPT = 10_000  # allocation requests it keeps as JSON


class _Shapes(Answers):
    """A sandbox's answers per request shape: its own, or a copy of the live
    index's with the trees the sandbox changed to search again."""

    def __init__(self, live: Answers, patch: Patch) -> None:
        super().__init__()
        self.live, self.patch = live, patch

    def get(self, key: tuple) -> Kept | None:
        found = super().get(key)
        if found is not None:
            return found
        live = self.live.peek(key)
        if live is None:
            return None
        stale = live.stale | self.patch.anchors()
        if len(stale) > max(STALE_MIN, len(live.anchors) // STALE_SHARE):
            return None  # (searching them all again in bulk costs less)
        # (its trees over the live ones: those searched again are its own)
        trees = collections.ChainMap({}, live.trees)
        found = dataclasses.replace(
            live, trees=trees, anchors=list(live.anchors), stale=stale, whole=None
        )
        self._kept[key] = found
        return found

    def trim(self) -> None:
        while len(self._kept) > SHAPES_KEPT or (
            sum(k.size for k in self._kept.values()) > CANDIDATES_KEPT
        ):
            del self._kept[next(iter(self._kept))]


class SandboxAnswers:
    """The `KeptAnswers` of a sandbox's view (`SandboxView.kept`): answers per
    request shape, summaries, allocation requests as JSON and verdicts, the live
    index's wherever the sandbox changed nothing."""

    def __init__(self, live: KeptAnswers, patch: Patch) -> None:
        self.live, self.patch = live, patch
        self.answers = _Shapes(live.answers, patch)
        self.verdicts: dict[tuple, Any] = {}
        self._summaries: dict[int, dict[str, Any]] = {}
        self._summaries_json: dict[int, bytes] = {}
        # (its own: a provider made in the sandbox has an id the live index may
        # give another provider later)
        self._request_texts: dict[tuple[str, ...], dict[tuple, str]] = {}

    def advanced(self) -> None:
        """The patch folded more steps: nothing kept holds."""
        self.answers = _Shapes(self.live.answers, self.patch)
        self.verdicts.clear()
        self._summaries.clear()
        self._summaries_json.clear()

    def keeps_answers(self) -> bool:
        return bool(self.answers)

    def summary(self, rp: int) -> dict[str, Any]:
        if rp not in self.patch.touched():
            return self.live.summary(rp)
        found = self._summaries.get(rp)
        if found is None:
            found = self._summaries[rp] = self.patch.summary_of(rp)
        return found

    def summaries(self, providers: list[int]) -> dict[str, dict[str, Any]]:
        rows = self.patch.rows
        return {rows[rp][0]: self.summary(rp) for rp in providers}

    def summaries_json(self, providers: list[int]) -> list[bytes]:
        touched = self.patch.touched()
        if touched.isdisjoint(providers):
            return self.live.summaries_json(providers)
        live = iter(self.live.summaries_json([rp for rp in providers if rp not in touched]))
        return [self._summary_json(rp) if rp in touched else next(live) for rp in providers]

    def _summary_json(self, rp: int) -> bytes:
        found = self._summaries_json.get(rp)
        if found is None:
            uuid = self.patch.rows[rp][0]
            found = self._summaries_json[rp] = b'"%s":%s' % (
                uuid.encode(),
                orjson.dumps(self.summary(rp)),
            )
        return found

    def request_texts(self, suffixes: tuple[str, ...]) -> dict[tuple, str]:
        if sum(map(len, self._request_texts.values())) > REQUEST_TEXTS_KEPT:
            self._request_texts.clear()
        return self._request_texts.setdefault(suffixes, {})
