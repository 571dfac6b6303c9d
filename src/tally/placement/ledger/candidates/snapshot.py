"""Everything the candidate search reads, loaded in a handful of bulk queries
and returned as plain ints, tuples, sets and dicts.

`Snapshot` is one of the two `Source`s of the search (source.py; the other is
the in-memory index's `View`): it answers each question with one SQL statement,
never one per provider, and keeps nothing between searches ("none kept"). A set of ids goes to the
database as ONE parameter (a JSON array on SQLite, an array on PostgreSQL), so
a filter on thousands of providers costs no more to send than one on three.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping

import os_traits
import sqlalchemy as sa

from tally.amounts import capacity, raw_capacity
from tally.db import schema as t
from tally.db.bound_lists import among
from tally.db.row_rules import sound_inventory
from tally.db.schema import MAX_CAPACITY

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE

_RP, _INV, _ALLOC = t.resource_providers, t.inventories, t.allocations
_RPT, _RPA = t.resource_provider_traits, t.resource_provider_aggregates


# A stock row: one inventory of one provider with what is already used of it,
#   (provider, root, capacity, used, min_unit, max_unit, step_size)
# with capacity = int((total - reserved) * allocation_ratio) as upstream. Plain
# tuples, not objects: a search over 10,000 trees reads tens of thousands.
Stock = tuple[int, int, int, int, int, int, int]
PROVIDER = operator.itemgetter(0)  # a stock row's provider

Alloc = tuple[int, int, int]  # (provider id, class id, amount)
# (allocs, providers): what the group takes, and the providers it maps to
# (sorted, distinct). A plain tuple: there can be tens of thousands.
Part = tuple[tuple[Alloc, ...], tuple[int, ...]]
# A candidate: its allocations, and per group the providers it maps to.
Candidate = tuple[tuple[Alloc, ...], tuple[tuple[int, ...], ...]]

# A provider row: (uuid, parent id or None, root id).
ProviderRow = tuple[str, int | None, int]


# What a search reads of an inventory, in this order (capacity and the limits of
# one allocation): the index and the snapshot both load these.
INVENTORY_FIELDS = (
    _INV.c.total,
    _INV.c.reserved,
    _INV.c.allocation_ratio,
    _INV.c.min_unit,
    _INV.c.max_unit,
    _INV.c.step_size,
)


def fitting(rows: list[Stock], amount: int) -> list[Stock]:
    """The inventories one allocation of `amount` fits in (as upstream's SQL checks)."""
    return [
        s
        for s in rows
        if s[3] + amount <= s[2] and s[4] <= amount <= s[5] and (s[6] <= 1 or amount % s[6] == 0)
    ]


def room(s: Stock) -> int:
    """The most one allocation request may take: free capacity, capped by max_unit."""
    return min(s[2] - s[3], s[5])


def capacity_of(total: int, reserved: int, ratio: float) -> int:
    """`tally.amounts.capacity`, clamped to what a write accepts (as `_CAPACITY_SQL`)."""
    return min(capacity(total, reserved, ratio), MAX_CAPACITY)


class Snapshot:
    """Read-only view of the providers a search needs, over one connection."""

    whole = False  # providers are read as the search asks for them

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name
        self.correlated = self.dialect == "sqlite"
        self.rows: dict[int, ProviderRow] = {}
        self._trees: set[int] = set()
        self._has_trees: bool | None = None

    def fitting(self, rc: int, rows: list[Stock], amount: int) -> list[Stock]:
        """The rows of class `rc` one allocation of `amount` fits in."""
        return fitting(rows, amount)

    def fresh(self) -> Snapshot:
        """A snapshot that has read nothing yet, on the same connection."""
        return Snapshot(self.conn)

    def _in(self, column: sa.ColumnElement, ids: Collection[int]) -> sa.ColumnElement[bool]:
        found = among(column, ids, self.dialect)
        return sa.true() if found is None else found  # (None: the caller filters the rows)

    def _all(self, query: sa.Select) -> list[tuple]:
        """All rows as the driver's plain tuples: the columns read here (integers,
        floats, strings) need none of SQLAlchemy's per-row processing."""
        result = self.conn.execute(query)
        try:
            return result.cursor.fetchall()
        finally:
            result.close()

    # -- names -> ids ---------------------------------------------------------

    def class_ids(self, names: Iterable[str]) -> dict[str, int]:
        return self._ids(t.resource_classes.c.name, t.resource_classes.c.id, names)

    def trait_ids(self, names: Iterable[str]) -> dict[str, int]:
        return self._ids(t.traits.c.name, t.traits.c.id, names)

    def aggregate_ids(self, uuids: Iterable[str]) -> dict[str, int]:
        return self._ids(t.placement_aggregates.c.uuid, t.placement_aggregates.c.id, uuids)

    def tree_roots(self, uuids: Iterable[str]) -> dict[str, int]:
        """Root provider id of each provider uuid that exists."""
        return self._ids(_RP.c.uuid, _RP.c.root_provider_id, uuids, _placed(_RP.c.id))

    def _ids(
        self,
        key: sa.Column,
        value: sa.Column,
        names: Iterable[str],
        where: sa.ColumnElement[bool] | None = None,
    ) -> dict[str, int]:
        names = set(names)
        if not names:
            return {}
        query = sa.select(key, value).where(key.in_(sorted(names)))
        return dict(self._all(query if where is None else query.where(where)))

    def class_names(self, ids: Iterable[int]) -> dict[int, str]:
        ids = set(ids)
        if not ids:
            return {}
        classes = t.resource_classes
        return dict(self._all(sa.select(classes.c.id, classes.c.name).where(classes.c.id.in_(ids))))

    # -- the deployment ------------------------------------------------------

    def has_trees(self) -> bool:
        """Whether any provider has a parent (upstream switches behaviour on it)."""
        if self._has_trees is None:
            query = (
                sa.select(_RP.c.id)
                .where(_RP.c.parent_provider_id.is_not(None), _placed(_RP.c.id))
                .limit(1)
            )
            self._has_trees = self.conn.execute(query).first() is not None
        return self._has_trees

    def roots_with_traits(self, required: set[int], forbidden: set[int]) -> set[int]:
        """Root providers that have every trait of `required` and none of `forbidden`."""
        query = sa.select(_RP.c.id).where(
            _RP.c.parent_provider_id.is_(None), _RP.c.root_provider_id == _RP.c.id
        )
        if required:
            having = (
                sa.select(_RPT.c.resource_provider_id)
                .where(_RPT.c.trait_id.in_(sorted(required)))
                .group_by(_RPT.c.resource_provider_id)
                .having(sa.func.count(_RPT.c.trait_id) == len(required))
            )
            query = query.where(_RP.c.id.in_(having))
        if forbidden:
            bad = sa.select(_RPT.c.resource_provider_id).where(
                _RPT.c.trait_id.in_(sorted(forbidden))
            )
            query = query.where(_RP.c.id.not_in(bad))
        return {rp for (rp,) in self._all(query)}

    def trait_holders(self, trait_ids: Iterable[int]) -> dict[int, set[int]]:
        """Providers having each trait (only the traits asked about)."""
        return self._groups(_RPT.c.trait_id, _RPT.c.resource_provider_id, trait_ids)

    def aggregate_members(self, agg_ids: Iterable[int]) -> dict[int, set[int]]:
        return self._groups(_RPA.c.aggregate_id, _RPA.c.resource_provider_id, agg_ids)

    def _groups(self, key: sa.Column, value: sa.Column, ids: Iterable[int]) -> dict[int, set[int]]:
        found: dict[int, set[int]] = defaultdict(set)
        ids = set(ids)
        if ids:
            for k, v in self._all(sa.select(key, value).where(key.in_(sorted(ids)))):
                found[k].add(v)
        return found

    def sharing_anchors(self, providers: Iterable[int]) -> dict[int, set[int]]:
        """For each sharing provider, the roots of every tree with a provider in
        one of its aggregates (its own tree included when it has an aggregate)."""
        found: dict[int, set[int]] = defaultdict(set)
        ids = set(providers)
        if not ids:
            return found
        mine, theirs = _RPA.alias("mine"), _RPA.alias("theirs")
        query = (
            sa.select(mine.c.resource_provider_id, _RP.c.root_provider_id)
            .distinct()
            .select_from(
                mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                    _RP, _RP.c.id == theirs.c.resource_provider_id
                )
            )
            .where(self._in(mine.c.resource_provider_id, ids), _placed(_RP.c.id))
        )
        for sharing, root in self._all(query):
            if sharing in ids:
                found[sharing].add(root)
        return found

    def stock(
        self, class_ids: Iterable[int], roots: Collection[int] | None = None
    ) -> dict[int, list[Stock]]:
        """Inventories of the given classes, with usage, by class id: all of
        them, or those in the trees of `roots`. On SQLite and PostgreSQL the
        database computes capacity and usage and the driver's rows are used as
        they come (one query per class)."""
        ids = sorted(set(class_ids))
        found: dict[int, list[Stock]] = {rc: [] for rc in ids}
        if not ids or (roots is not None and not roots):
            return found
        in_trees = sa.true() if roots is None else self._in(_RP.c.root_provider_id, roots)
        capacity = _CAPACITY_SQL.get(self.dialect)
        if capacity is not None:
            for rc in ids:
                cond = sa.and_(_INV.c.resource_class_id == rc, in_trees)
                query = _stock_query(cond, _ALLOC.c.resource_class_id == rc, self.correlated)
                found[rc] = self._all(query.with_only_columns(*_stock_columns(query, capacity)))
            return found
        query = _stock_query(
            sa.and_(_INV.c.resource_class_id.in_(ids), in_trees),
            _ALLOC.c.resource_class_id.in_(ids),
            self.correlated,
        )
        for rc, rp, root, total, reserved, ratio, low, high, step, used in self._all(query):
            if roots is None or root in roots:
                capacity_ = capacity_of(total, reserved, ratio)
                found[rc].append((rp, root, capacity_, int(used or 0), low, high, step))
        return found

    def sorted_roots(self) -> list[int]:
        """Every root provider in its place, in id order."""
        query = (
            sa.select(_RP.c.id)
            .where(_RP.c.parent_provider_id.is_(None), _placed(_RP.c.id))
            .order_by(_RP.c.id)
        )
        return [rp for (rp,) in self._all(query)]

    def root_of(self) -> None:
        """None kept: the search works roots out from the stock it read."""
        return None

    def class_stock(self, rc: int) -> Mapping[int, Stock]:
        return {s[0]: s for s in self.stock([rc])[rc]}

    def kept(self) -> None:
        """None kept: every answer is written afresh."""
        return None

    # -- trees and summaries --------------------------------------------------

    def tree_members(self, roots: Iterable[int]) -> set[int]:
        roots = set(roots)
        self.load_trees(roots)
        return {rp for rp, row in self.rows.items() if row[2] in roots}

    def load_providers(self, ids: Collection[int]) -> None:
        """Make `rows` hold the given providers."""
        missing = {i for i in ids if i not in self.rows}
        if missing:
            self._load_rows(_RP.c.id, missing)

    def load_trees(self, roots: Collection[int]) -> None:
        """Make `rows` hold every provider of the given trees."""
        missing = set(roots) - self._trees
        if missing:
            self._load_rows(_RP.c.root_provider_id, missing)
            self._trees |= missing

    def _load_rows(self, column: sa.Column, ids: set[int]) -> None:
        """(A few more rows than asked for are harmless: they are right too.)"""
        query = sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id, _RP.c.root_provider_id
        ).where(self._in(column, ids), _placed(_RP.c.id))
        self.rows.update({rp: (uuid, parent, root) for rp, uuid, parent, root in self._all(query)})

    def stock_of_trees(
        self, roots: Collection[int], skip_classes: Collection[int]
    ) -> list[tuple[int, int, int, int]]:
        """(provider, class, capacity, used) of every inventory in the given trees,
        but for the classes in `skip_classes` (which the caller already holds)."""
        cond, classes = self._in(_RP.c.root_provider_id, roots), sa.true()
        if skip_classes:
            classes = _ALLOC.c.resource_class_id.not_in(sorted(skip_classes))
            cond = sa.and_(cond, _INV.c.resource_class_id.not_in(sorted(skip_classes)))
        want = set(roots)
        query = _stock_query(cond, classes, self.correlated)
        return [
            (rp, rc, capacity_of(total, reserved, ratio), int(used or 0))
            for rc, rp, root, total, reserved, ratio, _, _, _, used in self._all(query)
            if root in want
        ]

    def trait_names(self, providers: Collection[int]) -> dict[int, list[str]]:
        """All trait names of the given providers, in trait id order."""
        query = (
            sa.select(_RPT.c.resource_provider_id, t.traits.c.name)
            .join(t.traits, t.traits.c.id == _RPT.c.trait_id)
            .where(self._in(_RPT.c.resource_provider_id, providers))
            .order_by(_RPT.c.trait_id)
        )
        found: dict[int, list[str]] = defaultdict(list)
        want = set(providers)
        for rp, name in self._all(query):
            if rp in want:
                found[rp].append(name)
        return found


_RAW_CAPACITY = raw_capacity(_INV.c.total, _INV.c.reserved, _INV.c.allocation_ratio)
# int((total - reserved) * allocation_ratio) in SQL: both truncate the same double.
# Clamped to what a write accepts today, so a row written before that check (or
# imported) cannot overflow bigint on PostgreSQL nor read differently per backend.
_CAPACITY_SQL = {
    "sqlite": sa.func.min(sa.cast(_RAW_CAPACITY, sa.Integer), MAX_CAPACITY),
    "postgresql": sa.cast(sa.func.least(sa.func.trunc(_RAW_CAPACITY), MAX_CAPACITY), sa.BigInteger),
}


_PARENT = _RP.alias("parent")
_ROOT = _RP.alias("root")
# A provider row in its place (the index's `placed` rule, index.py): its root
# exists, and it is its own root without a parent, or its parent exists and has
# the same root. Any other row (written behind the API's back: a child hanging
# under another tree's root) is left out of the search, as the index leaves it
# out, not a 500 or a tree of mixed rows (and `tally db check` lists it).
_PLACED = sa.and_(
    _ROOT.c.id.is_not(None),
    sa.or_(
        sa.and_(_RP.c.parent_provider_id.is_(None), _RP.c.root_provider_id == _RP.c.id),
        _PARENT.c.root_provider_id == _RP.c.root_provider_id,
    ),
)
_PLACED_IDS = (
    sa.select(_RP.c.id)
    .select_from(
        _RP.outerjoin(_ROOT, _ROOT.c.id == _RP.c.root_provider_id).outerjoin(
            _PARENT, _PARENT.c.id == _RP.c.parent_provider_id
        )
    )
    .where(_PLACED)
    .correlate(None)  # (a table of its own: never the caller's provider rows)
)
# Inventories the ledger's rules allow (db/row_rules.py), of providers in their place.
_SOUND = sa.and_(sound_inventory(_INV), _PLACED)


def _placed(rp: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
    """Whether the provider `rp` is in its place (`_PLACED`)."""
    return rp.in_(_PLACED_IDS)


def _stock_columns(query: sa.Select, capacity: sa.ColumnElement) -> list[sa.ColumnElement]:
    """A Stock row: (provider, root, capacity, used, min_unit, max_unit, step_size)."""
    used = list(query.selected_columns)[-1]
    return [
        _INV.c.resource_provider_id,
        _RP.c.root_provider_id,
        capacity,
        sa.func.coalesce(used, 0),
        _INV.c.min_unit,
        _INV.c.max_unit,
        _INV.c.step_size,
    ]


def _stock_query(
    condition: sa.ColumnElement[bool], classes: sa.ColumnElement[bool], correlated: bool
) -> sa.Select:
    """Inventories with their provider's root and what is used of them.

    `correlated`: a sum per row, one probe of the (provider, class, used) index
    each (fastest on SQLite); else a join to the allocations grouped once over
    `classes` (PostgreSQL hashes that; per-row sums cost it a JIT compile).
    """
    columns = [
        _INV.c.resource_class_id,
        _INV.c.resource_provider_id,
        _RP.c.root_provider_id,
        *INVENTORY_FIELDS,
    ]
    joined = (
        _INV.join(_RP, _RP.c.id == _INV.c.resource_provider_id)
        .join(_ROOT, _ROOT.c.id == _RP.c.root_provider_id)
        .outerjoin(_PARENT, _PARENT.c.id == _RP.c.parent_provider_id)
    )
    condition = sa.and_(condition, _SOUND)
    if correlated:
        used = (
            sa.select(sa.func.sum(_ALLOC.c.used))
            .where(_ALLOC.c.resource_provider_id == _INV.c.resource_provider_id)
            .where(_ALLOC.c.resource_class_id == _INV.c.resource_class_id)
            .scalar_subquery()
        )
        return sa.select(*columns, used).select_from(joined).where(condition)
    usage = (
        sa.select(
            _ALLOC.c.resource_provider_id.label("rp"),
            _ALLOC.c.resource_class_id.label("rc"),
            sa.func.sum(_ALLOC.c.used).label("used"),
        )
        .where(classes)
        .group_by(_ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id)
        .subquery("usage")
    )
    on = sa.and_(usage.c.rp == _INV.c.resource_provider_id, usage.c.rc == _INV.c.resource_class_id)
    return (
        sa.select(*columns, usage.c.used).select_from(joined.outerjoin(usage, on)).where(condition)
    )
