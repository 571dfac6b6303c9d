"""`Source`: every question the candidate search asks of what it reads.

Two classes answer it: `Snapshot` (snapshot.py), over one database connection,
and `View` (view.py), the in-memory index held for one search; a test hands
the search a fake one. The search never asks which it has: where a source holds
more (every tree at hand, answers kept between searches), it says so through a
question here (`whole`, `kept`), and the snapshot answers from SQL or with
"none kept".

A new question is a method here, one in each source, and its caller.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from tally.placement.ledger.candidates.snapshot import ProviderRow, Stock

if TYPE_CHECKING:
    from tally.placement.ledger.candidates.answer_cache import KeptAnswers


class Source(Protocol):
    """What the candidate search reads, for one search."""

    # Provider id -> (uuid, parent id or None, root id): at least the providers
    # loaded (`load_providers`, `load_trees`); every one when `whole`.
    rows: dict[int, ProviderRow]
    # Every provider is at hand in memory: the search may walk tree by tree.
    whole: bool

    def fresh(self) -> Source:
        """The same source having read nothing yet (the search in full again)."""
        ...

    # -- names -> ids ---------------------------------------------------------

    def class_ids(self, names: Iterable[str]) -> dict[str, int]: ...

    def trait_ids(self, names: Iterable[str]) -> dict[str, int]: ...

    def aggregate_ids(self, uuids: Iterable[str]) -> dict[str, int]: ...

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        """Root provider id of each provider uuid that exists."""
        ...

    def class_names(self, ids: Iterable[int]) -> dict[int, str]: ...

    # -- the deployment -------------------------------------------------------

    def has_trees(self) -> bool:
        """Whether any provider has a parent (upstream switches behaviour on it)."""
        ...

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]: ...

    def trait_holders(self, trait_ids: Iterable[int]) -> dict[int, set[int]]: ...

    def aggregate_members(self, agg_ids: Iterable[int]) -> dict[int, set[int]]: ...

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]: ...

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        """Inventories of these classes with usage, in provider order: all of
        them, or those in the trees of `roots`."""
        ...

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        """The rows of class `rc` one allocation of `amount` fits in."""
        ...

    def sorted_roots(self) -> list[int]:
        """Every root provider, in id order."""
        ...

    def root_of(self) -> Mapping[int, int] | None:
        """Every provider's root; None when the source holds none (the search
        then works them out from what it read)."""
        ...

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        """Every inventory of class `rc`, by provider."""
        ...

    # -- trees and summaries --------------------------------------------------

    def load_providers(self, ids: Collection[int]) -> None:
        """Make `rows` hold the given providers."""
        ...

    def load_trees(self, roots: Collection[int]) -> None:
        """Make `rows` hold every provider of the given trees."""
        ...

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        """Every provider of the trees of `roots` (a set of the caller's own)."""
        ...

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]: ...

    def trait_names(self, providers: Collection[int]) -> dict[int, list[str]]: ...

    def kept(self) -> KeptAnswers | None:
        """Answers, allocation requests and summaries written before and kept
        until what they show changes; None: none kept (written every time)."""
        ...
