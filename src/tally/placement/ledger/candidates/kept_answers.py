"""Answers kept per request shape: each tree's candidates as JSON text, kept by
the index until that tree changes.

A scheduler asks the same few questions again and again (one per flavor), and
a claim changes one tree at a time. So for a request asked more than once the
index keeps, per anchor tree, its candidates already written as allocation
requests. A write marks the trees it touched stale (the provider's tree, and
for a sharing provider every tree it shares into); the next answer searches
just those trees again (walk.py, tree by tree, the bulk search's order) and
joins the kept text of all the others. Summaries come from the index's
per-provider JSON as before, so used amounts are always current.

Only the newest answer shape of the index path is kept, for requests the
tree-by-tree search answers exactly as the bulk one (every group asks for
resources, depth-first, no cap on candidates); an answer that depends on the
whole cloud (an unknown class, trait, aggregate or in_tree provider; no root
with the root_required traits) is never kept: such a request takes the
ordinary search every time.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
from collections.abc import Iterable

from tally.placement.ledger.candidates import render, search
from tally.placement.ledger.candidates.answer_cache import Kept, Tree
from tally.placement.ledger.candidates.budget import AnswerTooLarge, Budget
from tally.placement.ledger.candidates.options import Options
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.candidates.search import Trees
from tally.placement.ledger.candidates.snapshot import Candidate
from tally.placement.ledger.candidates.source import Source


def body(
    view: Source, request: CandidateRequest, options: Options, budget: Budget
) -> render.Answer | None:
    """The JSON body from the kept answer of this request shape, brought up to
    date; None when the source keeps no answers or the shape is not kept (the
    caller searches as usual, with a fresh count of `budget`)."""
    store = view.kept()
    if store is None or not _keepable(request, options):
        return None
    answers = store.answers
    key = signature(request)
    kept = answers.get(key)
    if kept is None:
        if request.limit and not answers.asked(key):
            return None  # a one-off cut answer: the walk makes just what it returns
        kept = _search_all(view, request, options, budget)
        if kept is None:
            return None
        answers.put(key, kept)
    elif kept.stale:
        if not _refresh(view, request, budget, kept):
            answers.drop(key)
            return None
        answers.trim()
    return _write(view, kept, request.limit, options.randomize)


def _keepable(request: CandidateRequest, options: Options) -> bool:
    return (
        request.nested_aware
        and request.all_summary_classes
        and options.strategy == "depth-first"
        and options.max_candidates < 0
        and all(group.resources for group in request.groups)
    )


def signature(request: CandidateRequest) -> tuple:
    """What the candidates depend on: the request without its `limit`."""

    def sets(values: Iterable[frozenset[str]]) -> tuple:
        return tuple(tuple(sorted(value)) for value in values)

    groups = tuple(
        (
            group.suffix,
            tuple(sorted(group.resources.items())),
            sets(group.required),
            tuple(sorted(group.forbidden)),
            sets(group.member_of),
            tuple(sorted(group.forbidden_aggs)),
            group.in_tree,
        )
        for group in request.groups
    )
    return (
        groups,
        request.group_policy,
        tuple(sorted(request.root_required)),
        tuple(sorted(request.root_forbidden)),
        sets(request.same_subtrees),
    )


def _search_all(
    view: Source, request: CandidateRequest, options: Options, budget: Budget
) -> Kept | None:
    """Every tree's candidates, by the bulk search; None when the answer depends
    on more than the trees (see the module's docstring)."""
    whole = dataclasses.replace(request, limit=None)
    try:
        searched = search.every_tree(view, whole, options, budget)
    except AnswerTooLarge:
        if request.limit:
            return None  # too many to keep, not to answer: the walk makes just `limit`
        raise
    if searched is None:
        return None
    trees, ctx, grouped = searched
    assert trees.groups is not None
    kept = Kept()
    if ctx is not None and grouped:  # (a search that found nothing gives [])
        owners, found = grouped
        kept.trees = _written(trees, request, owners, found)
        kept.anchors = list(kept.trees)
        kept.size = len(found)
    kept.in_trees = tuple(ids.tree for ids in trees.groups)
    return kept


def _refresh(view: Source, request: CandidateRequest, budget: Budget, kept: Kept) -> bool:
    """Search the stale trees again; False when the answer now depends on more
    than them (an in_tree provider moved, or see the module's docstring) or
    would pass the budget. The kept answer changes only once all of it is written."""
    trees = Trees.of(view, request, budget)
    if trees is None or trees.groups is None:
        return False
    if tuple(ids.tree for ids in trees.groups) != kept.in_trees:
        return False
    root_of = view.root_of() or {}
    stale = sorted(kept.stale)
    owners: list[int] = []
    found: list[Candidate] = []
    try:
        for anchor in stale:
            here = trees.at(anchor) if root_of.get(anchor) == anchor else []
            owners += [anchor] * len(here)
            found += here
    except AnswerTooLarge:
        return False  # the ordinary search answers (or refuses) it
    written = _written(trees, request, owners, found)
    for anchor in stale:
        kept.put(anchor, written.get(anchor))
    kept.stale = set()
    return True


def _written(
    trees: Trees, request: CandidateRequest, owners: list[int], found: list[Candidate]
) -> dict[int, Tree]:
    """The candidates (`owners`: the anchor of each, in order) written, per anchor."""
    ctx = trees.ctx
    texts = render.allocation_requests(ctx, request, found)
    root_of, sharing = ctx.root_of, ctx.sharing
    # Only a sharing provider is in candidates of another tree than its own:
    # elsewhere every candidate is plain (the anchor's tree only, found once).
    suspect = set().union(*(ctx.anchors_of(sp) | {root_of[sp]} for sp in sharing))
    by_anchor: dict[int, list[str]] = {}
    for anchor, text in zip(owners, texts, strict=True):
        held = by_anchor.get(anchor)
        if held is None:
            by_anchor[anchor] = [text]
        else:
            held.append(text)
    written: dict[int, Tree] = {anchor: (tuple(held), None) for anchor, held in by_anchor.items()}
    for anchor in suspect & by_anchor.keys():
        start = bisect.bisect_left(owners, anchor)
        extra = tuple(
            _extra(candidate, anchor, root_of, sharing)
            for candidate in found[start : start + len(by_anchor[anchor])]
        )
        if any(roots is not None or again is not None for roots, again in extra):
            written[anchor] = (written[anchor][0], extra)
    return written


def _extra(
    candidate: Candidate, anchor: int, root_of: dict[int, int], sharing: set[int]
) -> tuple[frozenset[int] | None, Candidate | None]:
    """(the roots it takes from, when not just the anchor's; itself when it may
    come again from another tree: sharing providers alone)."""
    roots = frozenset([root_of[rp] for rp, _, _ in candidate[0]])
    alone = all([rp in sharing for rp, _, _ in candidate[0]])
    return (None if roots == {anchor} else roots, candidate if alone else None)


def _write(view: Source, kept: Kept, limit: int | None, randomize: bool) -> render.Answer:
    """The answer from the kept trees, as `render.body` writes it: the first
    `limit` distinct candidates in anchor order (trees in a random order with
    `randomize`), and the summaries of every provider of the trees they take from."""
    if limit or randomize:
        texts, roots = _chosen(kept, limit, randomize)
        requests = ",".join(texts).encode()
    else:  # the whole answer: the same until a tree changes
        if kept.whole is None:
            texts, roots = _chosen(kept, None, False)
            kept.whole = (",".join(texts).encode(), roots)
        requests, roots = kept.whole
    if not requests:
        return render.EMPTY
    store = view.kept()
    assert store is not None  # (`body` answers only from a source that keeps answers)
    return render.joined(requests, store, view.tree_members(roots))


def _chosen(kept: Kept, limit: int | None, randomize: bool) -> tuple[list[str], set[int]]:
    """The texts of the answer's candidates, and the trees they take from."""
    order = kept.anchors
    if randomize and limit:
        order = random.sample(order, len(order))
    texts: list[str] = []
    roots: set[int] = set()
    seen: set[Candidate] = set()
    room = limit or -1
    for anchor in order:
        found, extra = kept.trees[anchor]
        if extra is None:
            if 0 <= room < len(found):
                found = found[:room]
            texts.extend(found)
            roots.add(anchor)
            room -= len(found)
        else:
            for text, (others, again) in zip(found, extra, strict=True):
                if again is not None:
                    if again in seen:
                        continue
                    seen.add(again)
                texts.append(text)
                roots.update(others or (anchor,))
                room -= 1
                if room == 0:
                    break
        if room == 0:
            break
    if randomize:
        random.shuffle(texts)
    return texts, roots
