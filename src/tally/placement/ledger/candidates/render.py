"""Step 4, as bytes: the answer in the newest response shape (1.34 on), written
straight from ids to JSON.

An answer can hold tens of thousands of candidates and summaries; building a
dict per entry and serializing it costs more than the search. Here each
summary comes from the index's per-provider JSON (kept until the provider
changes) and each allocation request from a few string pieces computed once
per answer (one of several providers also kept by the index, by candidate).
The bytes are exactly `orjson.dumps` of what `summaries.build` returns for the
same candidates (tested), so both paths stay one answer. The body leaves as
its pieces (`Answer`), joined a chunk at a time as the server sends it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

import orjson

from tally.placement.ledger.candidates.groups import Context
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.candidates.snapshot import Candidate
from tally.placement.ledger.candidates.summaries import Chosen, summaries_of

if TYPE_CHECKING:
    from tally.placement.ledger.candidates.answer_cache import KeptAnswers

SUMMARIES_A_CHUNK = 1000  # (about 330 KB of JSON)


@dataclasses.dataclass(frozen=True)
class Answer:
    """The JSON body as the pieces it is made of, joined only as it is sent
    (`chunks`): a whole answer of 100,000 providers is 26 MB, and joining it once
    held that beside the 20 MB of its summaries. The summaries are the index's
    kept bytes, which no change of the index alters (it replaces them), so the
    answer may be sent after the index moved on."""

    requests: bytes  # the allocation requests, joined by commas
    summaries: list[bytes]  # each `"uuid":{...}` (or several, joined by commas)

    def __len__(self) -> int:
        return (
            len(_HEAD) + len(self.requests) + len(_MIDDLE) + len(_TAIL)
            + sum(map(len, self.summaries)) + max(0, len(self.summaries) - 1)
        )  # fmt: skip

    def chunks(self) -> Iterator[bytes]:
        yield _HEAD + self.requests + _MIDDLE
        summaries = self.summaries
        for i in range(0, len(summaries), SUMMARIES_A_CHUNK):
            chunk = b",".join(summaries[i : i + SUMMARIES_A_CHUNK])
            yield b"," + chunk if i else chunk
        yield _TAIL

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks())


_HEAD, _MIDDLE, _TAIL = b'{"allocation_requests":[', b'],"provider_summaries":{', b"}}"
EMPTY = Answer(b"", [])


def body(ctx: Context, request: CandidateRequest, chosen: Chosen) -> Answer:
    """The JSON body for the chosen candidates (a search that found nothing
    has `chosen` None)."""
    if chosen is None:
        return EMPTY
    found, members, roots = chosen
    requests = ",".join(allocation_requests(ctx, request, found)).encode()
    kept = ctx.snap.kept()
    if request.all_summary_classes and kept is not None:  # kept whole per provider
        return joined(requests, kept, members)
    summaries = orjson.dumps(summaries_of(ctx, request, members, roots))[1:-1]
    return Answer(requests, [summaries] if summaries else [])


def joined(requests: bytes, kept: KeptAnswers, members: set[int]) -> Answer:
    """The body of allocation requests already written (joined by commas) with
    the kept summary of every provider in `members`."""
    return Answer(requests, kept.summaries_json(sorted(members)))


class _Quoted(dict):
    """Provider id -> its uuid as a JSON string, worked out on first use."""

    def __init__(self, rows: dict[int, tuple]) -> None:
        super().__init__()
        self.rows = rows

    def __missing__(self, rp: int) -> str:
        found = self[rp] = f'"{self.rows[rp][0]}"'
        return found


class _Pieces(dict):
    """(class id, amount) -> '"VCPU":1'."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names

    def __missing__(self, key: tuple[int, int]) -> str:
        found = self[key] = f"{self.names[key[0]]}:{key[1]}"
        return found


def allocation_requests(
    ctx: Context, request: CandidateRequest, found: list[Candidate]
) -> list[str]:
    """Each candidate as `{"allocations":{...},"mappings":{...}}`."""
    snap = ctx.snap
    uuid = _Quoted(snap.rows)  # (per answer: kept for every provider it cost 140 B each)
    names = {rc: orjson.dumps(name).decode() for rc, name in ctx.class_names.items()}
    pieces = _Pieces(names)
    suffixes = [orjson.dumps(group.suffix).decode() for group in request.groups]
    single = len(suffixes) == 1
    if single:  # one provider gives the whole group: the same resources
        ids = {name: rc for rc, name in ctx.class_names.items()}
        amounts = sorted((ids[name], n) for name, n in request.groups[0].resources.items())
        whole = ",".join(f"{names[rc]}:{n}" for rc, n in amounts)
        only = suffixes[0]
    out = []
    append = out.append
    quote = uuid.__getitem__
    # the candidates of several providers, as written before (a mapping's lookup
    # costs less than writing one again)
    kept = snap.kept()
    written = kept.request_texts(tuple(suffixes)) if kept is not None else {}
    for allocs, mappings in found:
        if single:
            providers = mappings[0]
            if len(providers) == 1:  # the usual candidate
                u = uuid[providers[0]]
                append(
                    f'{{"allocations":{{{u}:{{"resources":{{{whole}}}}}}},'
                    f'"mappings":{{{only}:[{u}]}}}}'
                )
                continue
            mapped = f"{only}:[{','.join(map(quote, providers))}]"
        else:
            mapped = ",".join(
                [
                    f"{suffix}:[{','.join(map(quote, providers))}]"
                    for suffix, providers in zip(suffixes, mappings, strict=True)
                ]
            )
        key = (allocs, mappings)
        text = written.get(key)
        if text is not None:
            append(text)
            continue
        by_provider: dict[int, list[str]] = {}
        for rp, rc, amount in allocs:
            held = by_provider.get(rp)
            if held is None:
                by_provider[rp] = [pieces[rc, amount]]
            else:
                held.append(pieces[rc, amount])
        allocations = ",".join(
            [f'{uuid[rp]}:{{"resources":{{{",".join(held)}}}}}' for rp, held in by_provider.items()]
        )
        text = written[key] = f'{{"allocations":{{{allocations}}},"mappings":{{{mapped}}}}}'
        append(text)
    return out
