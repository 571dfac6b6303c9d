"""What the candidate search reads, held in memory by each worker process.

`Index` loads providers, trees, inventories with capacity, usage, traits and
aggregates once (ids, never names, in plain dicts and tuples of ints), then
stays current through the ledger journal (`tally.db.journal`): before a search
it reads the journal's version, one indexed row, and when another writer moved
it, reloads just the providers changed since (a full reload only after a gap
the journal no longer covers). Writes never read the index: a claim's capacity
check stays in its own database transaction.

`View` (view.py) adapts it to the search's `Source` (source.py): the one module
that reads these structures. What the index path keeps between searches (the
rendering caches, kept answers) is `KeptAnswers` (answer_cache.py), told what
changed once per load or catch-up: the index holds data only.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import resource
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from tally import memory
from tally.db import journal
from tally.db import schema as t
from tally.db.bound_lists import among
from tally.db.row_rules import inventory_fault
from tally.db.transaction import transaction
from tally.placement.ledger.candidates.answer_cache import Changed, KeptAnswers
from tally.placement.ledger.candidates.snapshot import (
    INVENTORY_FIELDS,
    SHARING_TRAIT,
    ProviderRow,
    Stock,
    capacity_of,
    fitting,
)

LOG = logging.getLogger(__name__)
CHUNK = 500  # ids per IN list when reloading a set of providers
FITTING_KEPT = 32  # amounts per class whose fitting inventories are kept

_RP, _INV, _ALLOC = t.resource_providers, t.inventories, t.allocations
_RPT, _RPA, _AGG = (
    t.resource_provider_traits,
    t.resource_provider_aggregates,
    t.placement_aggregates,
)

Inventory = tuple[int, int, int, int]  # capacity, min_unit, max_unit, step_size


def rss_mb() -> float:
    """Resident memory of this process now, in MiB (the peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Index:
    """The providers of one database, as of the journal's `writers` (whose sum
    is `version`)."""

    def __init__(self, max_mb: int = 0) -> None:
        self.max_mb = max_mb  # 0: no cap
        self.enabled = True
        self.version: int | None = None  # the journal's total as of the index
        self.writers: dict[int, int] = {}  # the journal's vector as of the index
        self.grown_mb = 0.0  # resident memory the last full load added
        self.measure = rss_mb
        self._lock = threading.Lock()
        # what the index path keeps between searches, told what changed once per
        # load or catch-up (`_changed`, gathered meanwhile)
        self.kept = KeptAnswers(self.summary_of, self.uuid_of)
        self._changed = Changed()
        self._clear()

    def _clear(self) -> None:
        self.rows: dict[int, ProviderRow] = {}
        self.left_out: set[int] = set()  # provider rows misplaced in their tree (_left_out)
        self.by_uuid: dict[str, int] = {}
        self.root_of: dict[int, int] = {}
        self.roots: set[int] = set()
        self._sorted_roots: list[int] | None = None
        self.trees: dict[int, set[int]] = defaultdict(set)  # root -> its providers
        self.inventories: dict[int, dict[int, Inventory]] = {}  # provider -> class -> ...
        self.used: dict[int, dict[int, int]] = {}  # provider -> class -> used
        self.by_class: dict[int, dict[int, Stock]] = defaultdict(dict)  # class -> provider
        self._stock_lists: dict[int, list[Stock]] = {}  # class -> by provider id
        self._fitting: dict[int, dict[int, list[Stock]]] = {}  # class -> amount -> rows
        self.traits: dict[int, frozenset[int]] = {}  # provider -> trait ids
        self.holders: dict[int, set[int]] = defaultdict(set)  # trait -> providers
        self.aggregates: dict[int, frozenset[int]] = {}  # provider -> aggregate ids
        self.members: dict[int, set[int]] = defaultdict(set)  # aggregate -> providers
        self.aggregate_ids: dict[str, int] = {}
        self.class_ids: dict[str, int] = {}
        self.class_names: dict[int, str] = {}
        self.trait_ids: dict[str, int] = {}
        self.trait_names: dict[int, str] = {}
        self._changed.reloaded = True

    @contextlib.contextmanager
    def held(self, engine: sa.Engine) -> Iterator[bool]:
        """The index brought up to date, held for one search (`view.of` gives the
        search its questions); False when the index is off (over its memory cap):
        then the caller reads the database.

        The journal's total is read first, outside the lock (searches of other
        threads do not wait on this one's round trip) and outside any transaction:
        every write acknowledged before this request is in it. When the index is at
        that total it answers as it is; otherwise it catches up in a read
        transaction (which reads the writers' versions again: another thread may
        have caught up past it meanwhile, or the database may have been reset)."""
        seen = journal.peek(engine) if self.enabled else None
        with self._lock:
            if self.enabled and seen != self.version:
                with transaction(engine) as conn:
                    self._catch_up(conn)
            yield self.enabled

    # -- keeping up with the journal ------------------------------------------

    def _catch_up(self, conn: sa.Connection) -> None:
        """Replay the journal since `writers` (a reload is idempotent: a catch-up
        the database failed is replayed whole next time), or load everything. Any
        other failure leaves what the index holds unknown: the next one loads it
        whole, rather than failing the same way until the worker restarts. What
        changed is told to the kept answers at the end, whatever happened."""
        try:
            self._catch_up_or_load(conn)
        finally:
            changed, self._changed = self._changed, Changed()
            self.kept.changed(changed)

    def _catch_up_or_load(self, conn: sa.Connection) -> None:
        if self.version is not None:  # (caught up by another thread meanwhile: nothing new)
            found = journal.since(conn, self.writers)
            if found is not None and journal.EVERYTHING not in found.providers:
                try:
                    self._apply(conn, found)
                except sa.exc.DBAPIError:
                    raise
                except Exception:
                    LOG.exception("candidates index: catching up failed; loading it whole next")
                    self.version = None
                    raise
                return
        self._load_everything(conn)

    def _apply(self, conn: sa.Connection, found: journal.CaughtUp) -> None:
        changed = found.providers
        if journal.NAMES in changed:
            self._load_names(conn)
            self._changed.everything = True  # a renamed class shows in every summary
        changed.discard(journal.NAMES)
        if changed:
            self._reload(conn, changed, found.usage_only)
        self.writers = found.seen
        self.version = found.total

    def _load_everything(self, conn: sa.Connection) -> None:
        self._clear()
        before = self.measure()
        writers = journal.vector(conn)  # read first: what commits during the load shows later
        self._load_names(conn)
        self._load(conn, None)
        self.writers = writers
        self.version = sum(writers.values())
        memory.hand_back()  # (the rows as read: PostgreSQL's driver held 7 MiB of them)
        self.grown_mb = self.measure() - before
        LOG.info(
            "candidates index loaded: %d providers at ledger total %d (%+.0f MiB)",
            len(self.rows),
            self.version,
            self.grown_mb,
        )
        if self.max_mb and self.grown_mb > self.max_mb:
            LOG.warning(
                "candidates index needs more than candidates_index_max_mb=%d MiB: "
                "searching the database instead until restart",
                self.max_mb,
            )
            self.enabled = False
            self._clear()

    def _load_names(self, conn: sa.Connection) -> None:
        classes = conn.execute(sa.select(t.resource_classes.c.id, t.resource_classes.c.name))
        self.class_names = dict(classes.all())
        self.class_ids = {name: rc for rc, name in self.class_names.items()}
        traits = conn.execute(sa.select(t.traits.c.id, t.traits.c.name))
        self.trait_names = dict(traits.all())
        self.trait_ids = {name: tr for tr, name in self.trait_names.items()}

    def _reload(self, conn: sa.Connection, ids: set[int], usage_only: set[int]) -> None:
        """Read these providers again; of those in `usage_only` (held, and changed
        only by claims), just their usage."""
        uuids = {rp: self.rows[rp][0] for rp in ids if rp in self.rows}
        marking = self.kept.keeps_answers()
        touched = self._anchors_touched(ids) if marking else set()
        quick = sorted(usage_only & uuids.keys())
        for start in range(0, len(quick), CHUNK):
            self._load_usage(conn, quick[start : start + CHUNK])
        ordered = sorted(ids - set(quick))
        for start in range(0, len(ordered), CHUNK):
            self._load(conn, ordered[start : start + CHUNK])
        rows = self.rows
        if any(rp not in rows or rows[rp][0] != uuid for rp, uuid in uuids.items()):
            self._changed.ids_reused = True  # deleted (SQLite may give its id to another)
        if marking:
            self._changed.anchors |= touched | self._anchors_touched(ids)

    def _anchors_touched(self, ids: set[int]) -> set[int]:
        """The trees whose candidates these providers take part in: their own,
        and for a sharing provider every tree it shares into."""
        sharing = self.trait_ids.get(SHARING_TRAIT)
        found = set()
        for rp in ids:
            row = self.rows.get(rp)
            if row is None:
                continue
            found.add(row[2])
            if sharing in self.traits.get(rp, ()):
                for agg in self.aggregates.get(rp, ()):
                    found.update([self.root_of[member] for member in self.members[agg]])
        return found

    def _drop(self, rp: int) -> None:
        """Forget provider row `rp` and everything held of it. Its uuid stays
        when it already names another row (made again since: a uuid is a name,
        the id is the provider)."""
        self.left_out.discard(rp)
        row = self.rows.pop(rp, None)
        if row is not None:
            if self.by_uuid.get(row[0]) == rp:
                del self.by_uuid[row[0]]
            del self.root_of[rp]
            self.roots.discard(rp)
            self._sorted_roots = None
            tree = self.trees.get(row[2])
            if tree is not None:
                tree.discard(rp)
                if not tree:
                    del self.trees[row[2]]
        for rc in self.inventories.pop(rp, {}):
            self.by_class[rc].pop(rp, None)
            self._patch(rc, rp, None)
        self.used.pop(rp, None)
        for trait in self.traits.pop(rp, ()):
            self.holders[trait].discard(rp)
        for agg in self.aggregates.pop(rp, ()):
            self.members[agg].discard(rp)
        self._changed.providers.add(rp)

    def _load(self, conn: sa.Connection, ids: list[int] | None) -> None:
        """Read the given providers (None: all) into the index, changing only what
        differs from what it holds (the kept lists of a class are patched only where
        a provider's stock row changed).

        A provider is its row id: every row that went (deleted) or is no longer
        the one held (its uuid, parent or root changed: SQLite hands a deleted
        row's id to the next provider) is dropped before any is entered, so a uuid
        deleted and made again in one catch-up (a new id) names the new row only,
        whatever order the rows come in."""
        read = _Read(conn, ids, self.class_names)
        batch = {row[0]: tuple(row[1:]) for row in read.providers}
        loaded = self.rows
        gone = set() if ids is None else set(ids) - batch.keys()
        gone.update(rp for rp, row in batch.items() if loaded.get(rp, row) != row)
        for rp in sorted(gone):
            self._drop(rp)

        present = []
        for rp, (uuid, parent, root) in batch.items():
            why = _misplaced(rp, parent, root, batch, loaded)
            if why is not None:
                self._leave_out(rp, uuid, why)
                continue
            if rp not in loaded:
                self._enter(rp, uuid, parent, root)
            self._changed.providers.add(rp)
            present.append(rp)
        if len(present) < len(batch):
            self._drop_orphans()
            present = [rp for rp in present if rp in loaded]
        self.aggregate_ids.update(read.aggregate_ids)
        for rp in present:
            self._restock(rp, read.inventories.get(rp, {}), read.used.get(rp, {}))
            _relink(rp, read.traits.get(rp), self.traits, self.holders)
            _relink(rp, read.aggregates.get(rp), self.aggregates, self.members)

    def _drop_orphans(self) -> None:
        """Leave out the providers whose parent was left out, and theirs (a summary
        names its parent: a tree is served from its root down, or not at all)."""
        rows = self.rows
        while orphans := [
            rp for rp, row in rows.items() if row[1] is not None and row[1] not in rows
        ]:
            for rp in orphans:
                self._leave_out(rp, rows[rp][0], f"its parent ({rows[rp][1]}) is left out")

    def _leave_out(self, rp: int, uuid: str, why: str) -> None:
        _left_out(uuid, why)
        self._drop(rp)
        self.left_out.add(rp)

    def _load_usage(self, conn: sa.Connection, ids: list[int]) -> None:
        """Read the usage of providers the index holds (changed only by claims: the
        journal says so; a deletion since would be noted as more)."""
        read = _Read(conn, ids, self.class_names, usage_only=True)
        self._changed.providers.update(ids)
        for rp in ids:
            self._restock(rp, self.inventories.get(rp, {}), read.used.get(rp, {}))

    def _enter(self, rp: int, uuid: str, parent: int | None, root: int) -> None:
        self.left_out.discard(rp)
        self.rows[rp] = (uuid, parent, root)
        self.by_uuid[uuid] = rp
        self.root_of[rp] = root
        self.trees[root].add(rp)
        if parent is None:
            self.roots.add(rp)
            self._sorted_roots = None

    def _restock(self, rp: int, inventories: dict[int, Inventory], used: dict[int, int]) -> None:
        """The stock rows of one provider from its inventories and usage as read,
        patched where they differ from the ones held."""
        held = self.inventories.get(rp)
        for rc in held.keys() - inventories.keys() if held else ():
            self.by_class[rc].pop(rp, None)
            self._patch(rc, rp, None)
        _keep(self.inventories, rp, inventories)
        _keep(self.used, rp, used)
        root = self.rows[rp][2]
        for rc, (capacity, low, high, step) in inventories.items():
            stock = (rp, root, capacity, used.get(rc, 0), low, high, step)
            of_class = self.by_class[rc]
            if of_class.get(rp) != stock:
                of_class[rp] = stock
                self._patch(rc, rp, stock)

    def _patch(self, rc: int, rp: int, stock: Stock | None) -> None:
        """Bring the kept lists of class `rc` up to date for provider `rp` (None:
        it has no inventory of the class any more). A claim changes a provider
        or two: patching costs a search in each list, not a rebuild."""
        kept = self._stock_lists.get(rc)
        if kept is not None:
            _put(kept, rp, stock)
        for amount, rows in self._fitting.get(rc, {}).items():
            _put(rows, rp, stock if stock is not None and fitting([stock], amount) else None)

    # -- reading ----------------------------------------------------------------

    def sorted_roots(self) -> list[int]:
        """Every root provider, in id order (kept between searches)."""
        if self._sorted_roots is None:
            self._sorted_roots = sorted(self.roots)
        return self._sorted_roots

    def stock_list(self, rc: int) -> list[Stock]:
        """Every inventory of a class, in provider id order (kept between searches)."""
        found = self._stock_lists.get(rc)
        if found is None:
            rows = self.by_class.get(rc, {})
            found = self._stock_lists[rc] = [rows[rp] for rp in sorted(rows)]
        return found

    def fitting(self, rc: int, amount: int) -> list[Stock]:
        """The inventories of a class one allocation of `amount` fits in, in
        provider id order (kept for the last FITTING_KEPT amounts of each class)."""
        by_amount = self._fitting.setdefault(rc, {})
        found = by_amount.get(amount)
        if found is None:
            if len(by_amount) >= FITTING_KEPT:
                del by_amount[next(iter(by_amount))]  # the oldest
            found = by_amount[amount] = fitting(self.stock_list(rc), amount)
        return found

    def fitting_kept(self, rc: int, amount: int) -> list[Stock] | None:
        """`fitting` when the index keeps it, else None (nothing kept)."""
        return self._fitting.get(rc, {}).get(amount)

    def uuid_of(self, rp: int) -> str:
        return self.rows[rp][0]

    def summary_of(self, rp: int) -> dict[str, Any]:
        """A provider's summary with every class it has, as the answer shows it."""
        _, parent, root = self.rows[rp]
        used = self.used.get(rp, {})
        names = self.class_names
        return {
            "resources": {
                names[rc]: {"capacity": inv[0], "used": used.get(rc, 0)}
                for rc, inv in self.inventories.get(rp, {}).items()
            },
            "traits": [self.trait_names[tr] for tr in sorted(self.traits.get(rp, ()))],
            "parent_provider_uuid": self.rows[parent][0] if parent is not None else None,
            "root_provider_uuid": self.rows[root][0],
        }


def _put(rows: list[Stock], rp: int, stock: Stock | None) -> None:
    """Replace, insert or (None) remove the row of `rp` in a list in provider order."""
    i = bisect.bisect_left(rows, (rp,))  # (a 1-tuple sorts first among rp's rows; no key call)
    if i < len(rows) and rows[i][0] == rp:
        if stock is None:
            del rows[i]
        else:
            rows[i] = stock
    elif stock is not None:
        rows.insert(i, stock)


_PROVIDERS = sa.select(_RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id, _RP.c.root_provider_id)
_INVENTORIES = sa.select(_INV.c.resource_provider_id, _INV.c.resource_class_id, *INVENTORY_FIELDS)
_USAGE = sa.select(
    _ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id, sa.func.sum(_ALLOC.c.used)
).group_by(_ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id)
_TRAITS = sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id)
_LINKS = sa.select(_RPA.c.resource_provider_id, _RPA.c.aggregate_id, _AGG.c.uuid).join(
    _AGG, _AGG.c.id == _RPA.c.aggregate_id
)


class _Read:
    """What the database holds of some providers (None: all of them), in the
    index's shapes; inventories against the ledger's rules left out. `usage_only`:
    their usage alone."""

    def __init__(
        self,
        conn: sa.Connection,
        ids: list[int] | None,
        class_names: dict[int, str],
        *,
        usage_only: bool = False,
    ) -> None:
        def rows(query: sa.Select, column: sa.ColumnElement) -> list[tuple]:
            if ids is not None:  # (a chunk: never more than one IN list takes)
                query = query.where(among(column, ids, conn.dialect.name))
            result = conn.execute(query)
            try:
                return result.cursor.fetchall()
            finally:
                result.close()

        # One object for equal values: a cloud's hosts are much alike (the same
        # inventory records, trait sets and aggregates on thousands of providers).
        alike: dict[Any, Any] = {}
        self.providers = [] if usage_only else rows(_PROVIDERS, _RP.c.id)
        self.used: dict[int, dict[int, int]] = {}
        for rp, rc, used in rows(_USAGE, _ALLOC.c.resource_provider_id):
            self.used.setdefault(rp, {})[rc] = int(used or 0)
        self.inventories: dict[int, dict[int, Inventory]] = {}
        self.traits: dict[int, frozenset[int]] = {}
        self.aggregates: dict[int, frozenset[int]] = {}
        self.aggregate_ids: dict[str, int] = {}
        if usage_only:
            return
        for rp, rc, total, reserved, ratio, low, high, step in rows(
            _INVENTORIES, _INV.c.resource_provider_id
        ):
            fault = inventory_fault(total, reserved, ratio, low, high, step)
            if fault is not None or rc not in class_names:
                why = fault[0] if fault else "a class that does not exist"
                named = next((row[1] for row in self.providers if row[0] == rp), rp)
                _left_out(named, f"{why} (class id {rc})")
                continue
            record = (capacity_of(total, reserved, ratio), low, high, step)
            self.inventories.setdefault(rp, {})[rc] = alike.setdefault(record, record)
        for rp, held in self.inventories.items():  # (never changed in place: replaced)
            self.inventories[rp] = alike.setdefault(tuple(held.items()), held)
        traits: dict[int, set[int]] = {}
        for rp, trait in rows(_TRAITS, _RPT.c.resource_provider_id):
            traits.setdefault(rp, set()).add(trait)
        self.traits = _alike(traits, alike)
        aggregates: dict[int, set[int]] = {}
        for rp, agg, uuid in rows(_LINKS, _RPA.c.resource_provider_id):
            aggregates.setdefault(rp, set()).add(agg)
            self.aggregate_ids[uuid] = agg
        self.aggregates = _alike(aggregates, alike)


_NONE: frozenset[int] = frozenset()


def _alike(sets: dict[int, set[int]], alike: dict[Any, Any]) -> dict[int, frozenset[int]]:
    """Each provider's set as a frozenset, one object for equal ones."""
    return {rp: alike.setdefault(f, f) for rp, f in ((rp, frozenset(s)) for rp, s in sets.items())}


def _keep(by_provider: dict[int, Any], rp: int, value: dict | frozenset) -> None:
    """Hold `value` for `rp`, or nothing when it is empty."""
    if value:
        by_provider[rp] = value
    else:
        by_provider.pop(rp, None)


def _relink(
    rp: int,
    now: frozenset[int] | None,
    by_provider: dict[int, frozenset[int]],
    holders: dict[int, set[int]],
) -> None:
    """Bring `rp`'s set (traits, aggregates) and the reverse map up to what was read."""
    before = by_provider.get(rp, _NONE)
    now = now or _NONE
    if before != now:
        for gone in before - now:
            holders[gone].discard(rp)
        for new in now - before:
            holders[new].add(rp)
        _keep(by_provider, rp, now)


def _misplaced(
    rp: int,
    parent: int | None,
    root: int,
    batch: dict[int, tuple[str, int | None, int]],
    held: dict[int, ProviderRow],
) -> str | None:
    """Why a provider row read is not in its place in a tree, or None: it is its
    own root without a parent, or its parent exists and has the same root, and its
    root exists (the database path's `_PLACED`, snapshot.py: both leave out the
    same rows). A child hanging under another tree's root would mix two trees."""
    if root not in batch and root not in held:
        return f"its root ({root}) does not exist"
    if parent is None:
        return None if root == rp else f"it has no parent but its root is another ({root})"
    found = batch.get(parent) or held.get(parent)
    if found is None:
        return f"its parent ({parent}) does not exist"
    if found[2] != root:
        return f"its root ({root}) is not its parent's ({found[2]}): two trees mixed"
    return None


def _left_out(provider: object, why: str) -> None:
    """A stored row the API would never have let in: served without it."""
    LOG.warning(
        "provider %s left out of allocation candidates: %s (tally db check lists such rows)",
        provider,
        why,
    )
