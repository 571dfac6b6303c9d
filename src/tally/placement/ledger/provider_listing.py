"""Which providers `GET /resource_providers` lists, worked out on the worker's
in-memory index (the one the candidate search reads, `candidates/index.py`); their
parts of the answer are those kept since they last changed
(`answer_cache.ListingParts`), the others written from their rows, read by id
(the index keeps no names).

The filters mean what their SQL in `provider_filters` means, worked out on the
index's sets: traits and aggregates by who holds them, `resources` by the
inventories an allocation of that amount fits in (kept per class and amount).
A filter on `name` or `uuid` (a lookup of one row, compared in the database's
own collation), or naming a provider or aggregate by a uuid not in its
canonical form (which MySQL would still match, ignoring case), is left to the
database.
"""

from __future__ import annotations

import uuid as uuidlib

from tally.placement.ledger.candidates.view import View
from tally.placement.ledger.provider_filters import (
    UNKNOWN_CLASSES,
    UNKNOWN_TRAITS,
    ProviderFilter,
    known_ids,
)


def served(f: ProviderFilter) -> bool:
    """Whether the index answers this filter (else the database does)."""
    named = set().union(*f.member_of, f.forbidden_aggregates)
    if f.in_tree is not None:
        named.add(f.in_tree)
    return f.name is None and f.uuid is None and all(map(_canonical, named))


def _canonical(text: str) -> bool:
    try:
        return str(uuidlib.UUID(text)) == text
    except ValueError:
        return False


def matching(view: View, f: ProviderFilter) -> list[int]:
    """The ids of the providers matching `f`, in order."""
    names = set().union(*f.required_traits, f.forbidden_traits)
    trait_ids = known_ids(view.trait_ids(names), names, UNKNOWN_TRAITS)
    class_ids = known_ids(view.class_ids(f.resources), set(f.resources), UNKNOWN_CLASSES)
    kept: set[int] | None = None  # None: every provider so far

    def keep(providers: set[int]) -> None:
        nonlocal kept
        kept = providers if kept is None else kept & providers

    if f.in_tree is not None:
        keep(set(view.tree_of(f.in_tree)))
    for any_of in f.required_traits:
        keep(set().union(*(view.holders_of(trait_ids[name]) for name in any_of)))
    for any_of in f.member_of:
        keep(set().union(*(view.in_aggregate(agg_uuid) for agg_uuid in any_of)))
    for name, amount in f.resources.items():
        keep(view.fitting_providers(class_ids[name], amount))
    if kept is None and not (f.forbidden_traits or f.forbidden_aggregates):
        return sorted(view.providers())
    found = set(view.providers()) if kept is None else kept
    for name in f.forbidden_traits:
        found -= view.holders_of(trait_ids[name])
    for agg_uuid in f.forbidden_aggregates:
        found -= view.in_aggregate(agg_uuid)
    return sorted(found)
