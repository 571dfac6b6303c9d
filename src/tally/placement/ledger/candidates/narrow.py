"""Step 1b: which trees can anchor a candidate at all, worked out from the
filters before any inventory is read, so a narrow request (member_of, traits,
root_required, in_tree) reads the inventories of a few hundred trees instead
of every tree.

Every bound is a superset: a candidate anchored at tree T needs each group to
have a part at T, and a part at T comes from a provider of T or from a sharing
provider anchored at T. So:

  root_required        T is one of the roots it allows
  member_of            some provider in the aggregates is in T, or shares into T
  required (suffixed)  the one provider with all required traits is in / shares into T
  required (unsuff.)   for each any-of set, some provider having one of its
                       traits is in / shares into T
  in_tree (unsuff.)    T is that tree

`None` means no bound. Reading less can only remove parts at trees the merge
would drop anyway; the one visible difference, which group is reported empty
first, is handled by the caller (see `search.run`).
"""

from __future__ import annotations

from collections.abc import Callable

from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup


def allowed_anchors(
    request: CandidateRequest,
    anchor_roots: set[int] | None,
    in_aggregates: Callable[[RequestGroup], set[int] | None],
    holding: Callable[[frozenset[str]], set[int] | None],
    tree_root: Callable[[str], int | None],
    anchors_of_providers: Callable[[set[int]], set[int]],
) -> set[int] | None:
    """The roots that may anchor a candidate, or None when every tree may.

    `in_aggregates(group)`: providers matching all of the group's member_of
    sets (None without member_of); `holding(names)`: providers having any of
    the traits (None when a name is unknown: the search reports it later);
    `anchors_of_providers(ps)`: roots of those providers and of the trees the
    sharing ones among them anchor.
    """
    bound = None if anchor_roots is None else set(anchor_roots)
    for group in request.groups:
        providers: set[int] | None = in_aggregates(group)
        anchors: set[int] | None = None
        if group.use_same_provider:
            for any_of in group.required:
                having = holding(any_of)
                if having is not None:
                    providers = having if providers is None else providers & having
        else:
            if group.in_tree:
                root = tree_root(group.in_tree)
                anchors = {root} if root is not None else None
            for any_of in group.required:
                having = holding(any_of)
                if having is not None:
                    reach = anchors_of_providers(having)
                    anchors = reach if anchors is None else anchors & reach
        if providers is not None:
            reach = anchors_of_providers(providers)
            anchors = reach if anchors is None else anchors & reach
        if anchors is not None:
            bound = anchors if bound is None else bound & anchors
    return bound
