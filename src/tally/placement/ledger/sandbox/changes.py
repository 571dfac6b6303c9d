"""The changes tried in a sandbox, each turned into steps: the writes the real API
would be asked for, judged by the ledger's own rules over the sandbox's state.

    move      consumer -> a tree (`to`: a provider's uuid) or "anywhere": the first
              candidate of the search for the consumer's resources (summed per
              class, limit=16; anywhere: `root_required=!COMPUTE_STATUS_DISABLED` and
              another root than the consumer's), then its allocations replaced by it
    resize    consumer's amounts per class changed on the provider holding it
    boot      `count` new consumers of a query's shape, each where the search puts
              it (its first candidate)
    inventory one class of a provider set (total, reserved, allocation_ratio,
              min_unit, max_unit, step_size): its whole inventory replaced
    remove    a provider, or its whole tree (deepest first, then by uuid)
    disable   COMPUTE_STATUS_DISABLED added to a provider's traits
    drain     disable a host, then move every consumer in its tree anywhere (by uuid)
    add       a provider (uuid, name, parent, inventories, traits), or `count` copies
              of the tree under `template` (each provider as it is in the sandbox:
              inventories, traits, aggregates), parents first

A step's verdict is the real write's: applied, or refused with the status, code
and detail the API would answer (the claim check `allocations.judge`, the
capacity guard `capacity_guard.judge`, the delete's, the create's and the
inventory record's checks), or 409 `tally.sandbox.no_host` when the search finds
no candidate.

What a step read (what a commit checks, overlay.py): the generations of the
providers and consumers it writes; for a move or a boot also every provider of
each tree its search compared before it chose (the trees the walk came to, up to
and including the chosen candidate's, with the sharing providers sharing into
them: a change there could change the choice), and those trees' membership; for
a copy of a template, the template's providers. Each is read once a request
(`reads.Reader`), at or before the version of the index the step was judged
over: a step whose search's reads came in newer is tried again (`STEP_TRIES`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import sqlalchemy as sa

from tally.placement.error_types import (
    BadRequest,
    CannotDeleteParent,
    ConcurrentUpdate,
    Conflict,
    DuplicateName,
    InsufficientStorage,
    NotFound,
    ProviderInUse,
    ServiceUnavailable,
    TallyError,
)
from tally.placement.ledger import allocations, capacity_guard, inventory
from tally.placement.ledger import candidates as search
from tally.placement.ledger.candidates import view as views
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.candidates.request import CandidateRequest, RequestGroup
from tally.placement.ledger.candidates.snapshot import Candidate
from tally.placement.ledger.inventory_record import Record
from tally.placement.ledger.sandbox import reads
from tally.placement.ledger.sandbox.overlay import Allocations, Overlay, amounts
from tally.placement.ledger.sandbox.patch import Patch, SandboxView, patch_of

DISABLED = "COMPUTE_STATUS_DISABLED"
# The code of a step refused because the search found no candidate: a sandbox's
# verdict, never an API error (so not among Placement's codes, errors.py).
NO_HOST = "tally.sandbox.no_host"
CAP_EVERY = 64  # steps between two checks of the overlay's size
MOVE_LIMIT = 16  # candidates a move looks at (the first of another root wins)
STEP_TRIES = 5  # a step whose reads came in newer than its index is tried again
KINDS = ("move", "resize", "boot", "inventory", "remove", "disable", "drain", "add")


@dataclasses.dataclass
class Change:
    """One change asked for (the handler checked its shape against the schema)."""

    kind: str
    consumer: str | None = None  # move, resize
    to: str | None = None  # move: a provider's uuid (its tree) or "anywhere"
    resources: dict[str, int] | None = None  # resize
    request: CandidateRequest | None = None  # boot: the shape, as a candidates query
    count: int = 1  # boot, add (of a template)
    consumers: list[str] = dataclasses.field(default_factory=list)  # boot: their uuids
    project_id: str = "sandbox"  # boot
    user_id: str = "sandbox"  # boot
    consumer_type: str = "INSTANCE"  # boot
    provider: str | None = None  # inventory, remove, disable, drain; add: its uuid
    resource_class: str | None = None  # inventory
    amounts: dict[str, Any] = dataclasses.field(default_factory=dict)  # inventory
    tree: bool = False  # remove
    name: str | None = None  # add (default: its uuid)
    parent: str | None = None  # add
    inventories: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # add
    traits: list[str] = dataclasses.field(default_factory=list)  # add
    template: str | None = None  # add: copy the tree under this provider


class _Row(NamedTuple):
    """An inventory with its usage, as `allocations.judge` reads one."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used_now: int


class _Newer(Exception):
    """What a step read came in newer than the index it judged over: try again."""


@dataclasses.dataclass
class _Claim:
    """A consumer's new allocations, with what the index said of them."""

    write: allocations.ConsumerWrite
    before: Allocations
    provider_ids: dict[str, int]
    class_ids: dict[str, int]
    released: collections.Counter
    used: dict[int, dict[int, int]]


@dataclasses.dataclass(frozen=True)
class _Member:
    """A provider of a template's tree, as a copy makes it."""

    uuid: str
    parent: str | None
    inventories: dict[str, dict[str, Any]]
    traits: list[str]
    aggregates: list[str]


class Trial:
    """Changes applied to one sandbox's overlay (in this worker, for one request)."""

    def __init__(
        self,
        engine: sa.Engine,
        index: Index | None,
        overlay: Overlay,
        patch: Patch | None,
        sandbox: str,
        options: search.Options,
        rules: inventory.Rules,
    ) -> None:
        self.engine, self.index, self.overlay = engine, index, overlay
        self.patch, self.sandbox = patch, sandbox
        self.options, self.rules = options, rules
        self.reader = reads.Reader(engine)
        self.version: int | None = None  # of the index the last view held
        self._reads: dict[str, Any] = _no_reads()

    @contextlib.contextmanager
    def view(self) -> Iterator[SandboxView]:
        """The sandbox over the index brought up to date, held for one search."""
        if self.index is None:
            raise ServiceUnavailable(
                "Sandboxes need the candidates index (candidates_index_max_mb)."
            )
        with views.of(self.index, self.engine) as view:
            if view is None:
                raise ServiceUnavailable(
                    "Sandboxes need the candidates index, which is off in this worker "
                    "(over candidates_index_max_mb)."
                )
            self.patch = patch_of(self.overlay, self.index, self.patch)
            self.version = self.patch.index_version
            yield SandboxView(self.index, self.patch)

    # -- changes -> steps ------------------------------------------------------

    def apply(self, changes: list[Change], first: int, max_bytes: int = 0) -> list[dict[str, Any]]:
        """Apply `changes` in order (numbered from `first`); the steps they made.
        507 as soon as the overlay would take more than `max_bytes` (0: no cap)."""
        named = [c.consumer for c in changes if c.consumer] + [
            uuid for c in changes for uuid in c.consumers
        ]
        self._prefetch(named)
        made: list[dict[str, Any]] = []
        for n, change in enumerate(changes, first):
            for kind, subject, run in self._steps(change):
                step = self._step(n, kind, subject, run)
                self.overlay.add(step)
                made.append(step)
                if max_bytes and len(made) % CAP_EVERY == 0:
                    self.check_size(max_bytes)
        if max_bytes:
            self.check_size(max_bytes)
        with self.view():  # (the patch folds the last step: it may be kept)
            pass
        return made

    def _prefetch(self, consumers: list[str]) -> None:
        """Read these consumers and the providers they hold, in one go each (a
        read before any step's index is one at or before it: see reads.py)."""
        reader = self.reader
        reader.load_consumers(u for u in consumers if u not in self.overlay.consumers)
        held = {rp for u in consumers if (c := reader.consumers.get(u)) for rp in c.allocations}
        reader.load_providers(held)

    def check_size(self, max_bytes: int) -> None:
        size = self.overlay.approx_bytes()
        if size > max_bytes:
            raise InsufficientStorage(
                f"Sandbox {self.sandbox} would take more than about {size / 2**20:.1f} MiB "
                f"with these changes, past sandbox_max_mb={max_bytes // 2**20}: none of them "
                "was kept."
            )

    def _steps(self, change: Change) -> Iterator[tuple[str, str, Callable[[], dict]]]:
        """(kind, subject, the step's write) of each step of a change, made lazily:
        a step sees the ones before it."""
        kind = change.kind
        if kind == "move":
            yield kind, change.consumer, lambda: self._move(change.consumer, change.to)
        elif kind == "resize":
            yield kind, change.consumer, lambda: self._resize(change.consumer, change.resources)
        elif kind == "boot":
            uuids = list(change.consumers) or [str(uuidlib.uuid4()) for _ in range(change.count)]
            for uuid in uuids:
                yield kind, uuid, lambda uuid=uuid: self._boot(uuid, change)
        elif kind == "inventory":
            yield kind, change.provider, lambda: self._inventory(change)
        elif kind == "remove":
            for uuid in self._removal_order(change.provider, change.tree):
                yield kind, uuid, lambda uuid=uuid: self._remove(uuid)
        elif kind == "disable":
            yield kind, change.provider, lambda: self._disable(change.provider)
        elif kind == "drain":
            yield "disable", change.provider, lambda: self._disable(change.provider)
            consumers = self._consumers_of_tree(change.provider)
            self._prefetch(consumers)
            for consumer in consumers:
                yield "move", consumer, lambda c=consumer: self._move(c, "anywhere")
        elif kind == "add" and change.template is not None:
            yield from self._copies(change.template, change.count)
        elif kind == "add":
            uuid = change.provider or str(uuidlib.uuid4())
            member = _Member(uuid, change.parent, change.inventories, change.traits, [])
            yield kind, uuid, lambda: self._add(member, change.name or uuid)
        else:
            raise BadRequest(f"Unknown change kind {kind!r}: one of {', '.join(KINDS)}")

    def _step(self, n: int, kind: str, subject: str, run: Callable[[], dict]) -> dict[str, Any]:
        step: dict[str, Any] = {"change": n, "kind": kind, "subject": subject}
        for _ in range(STEP_TRIES):
            self._reads = _no_reads()
            try:
                write = run()
            except _Newer:
                continue
            except TallyError as exc:
                error = {"status": exc.status, "code": exc.code, "detail": exc.detail}
                return {**step, "applied": False, "error": error, "write": None, "reads": {}}
            return {**step, "applied": True, "error": None, "write": write, "reads": self._new()}
        raise ConcurrentUpdate(
            f"The live cloud changed under step {subject} of change {n} {STEP_TRIES} times "
            "while it was tried: none of these changes was kept; ask again."
        )

    def _new(self) -> dict[str, Any]:
        """This step's reads that no applied step before it had (overlay.py)."""
        overlay, found = self.overlay, self._reads
        return {
            "providers": {
                u: g for u, g in found["providers"].items() if u not in overlay.providers_read
            },
            "consumers": {
                u: g for u, g in found["consumers"].items() if u not in overlay.consumers_read
            },
            "trees": sorted(set(found["trees"]) - overlay.trees_read),
        }

    def _fresh(self, version: int | None) -> None:
        """What was just read (None: nothing) is as of the index the step held."""
        if version is not None and version != self.version:
            raise _Newer()

    # -- consumers -------------------------------------------------------------

    def _consumer(self, uuid: str) -> tuple[Allocations, str, str, int | None]:
        """A consumer's allocations in the sandbox, owner and generation (read)."""
        overlay = self.overlay
        held = overlay.consumers.get(uuid)
        if held is not None:
            found = held.now, held.project_id, held.user_id, overlay.consumers_read[uuid]
        else:
            self.reader.load_consumers([uuid])
            live = self.reader.consumers.get(uuid)
            found = (
                ({}, "", "", None)
                if live is None
                else (
                    {rp: dict(res) for rp, res in live.allocations.items()},
                    live.project_id or "",
                    live.user_id or "",
                    live.generation,
                )
            )
        if not found[0]:
            raise NotFound(f"Consumer {uuid} holds no allocations.")
        self._reads["consumers"][uuid] = found[3]
        return found

    def _move(self, uuid: str, to: str) -> dict:
        held, project, user, generation = self._consumer(uuid)
        shape: collections.Counter = collections.Counter()
        for resources in held.values():
            shape.update(resources)
        group = RequestGroup("", resources=dict(sorted(shape.items())))
        request = CandidateRequest([group], limit=MOVE_LIMIT)
        if to == "anywhere":  # (a disabled compute host's root carries the trait)
            request.root_forbidden = frozenset({DISABLED})
        else:
            group.in_tree = to
        self.reader.load_providers(held)  # (read before: the providers it leaves)
        walked: list[int] = []
        with self.view() as view:
            rows, root_of = view.rows, view.root_of()
            roots = {view.root_uuid(u) for u in held} - {None}

            def elsewhere(candidate: Candidate) -> bool:
                return (
                    to != "anywhere"
                    or not {rows[root_of[rp]][0] for rp, _, _ in candidate[0]} & roots
                )

            ctx, found = search.first_over(view, request, self.options, elsewhere, walked)
            chosen = next((c for c in found if elsewhere(c)), None)
            if chosen is None:
                where = "anywhere" if to == "anywhere" else f"in the tree of {to}"
                raise Conflict(
                    f"No allocation candidate for consumer {uuid} ({_shape(shape)}) {where}.",
                    code=NO_HOST,
                )
            new = _allocations(view, chosen)
            trees, sharing = _compared(view, ctx, walked, chosen)
            claim = self._prepare(view, uuid, project, user, None, generation, held, new)
        self._fresh(self.reader.load_providers([*new, *sharing], trees))
        return self._claim(claim, trees, sharing)

    def _resize(self, uuid: str, resources: dict[str, int]) -> dict:
        held, project, user, generation = self._consumer(uuid)
        new = {rp: dict(res) for rp, res in held.items()}
        for rc, amount in resources.items():
            holders = [rp for rp, res in held.items() if rc in res]
            if len(holders) != 1:
                raise BadRequest(
                    f"Consumer {uuid} holds {rc} on {len(holders)} providers: a resize "
                    "changes a class held on one."
                )
            if amount:
                new[holders[0]][rc] = amount
            else:
                del new[holders[0]][rc]
        new = {rp: res for rp, res in new.items() if res}
        self.reader.load_providers(held)
        with self.view() as view:
            claim = self._prepare(view, uuid, project, user, None, generation, held, new)
        return self._claim(claim)

    def _boot(self, uuid: str, change: Change) -> dict:
        assert change.request is not None
        request = dataclasses.replace(change.request, limit=1)
        self._reads["consumers"][uuid] = None
        self.reader.load_consumers([uuid])
        if uuid in self.overlay.consumers or self.reader.consumers.get(uuid) is not None:
            raise BadRequest(f"Consumer {uuid} exists: a boot makes a new one.")
        walked: list[int] = []
        with self.view() as view:
            ctx, found = search.first_over(view, request, self.options, walked=walked)
            if not found:
                raise Conflict(
                    f"No allocation candidate for a new consumer {uuid} "
                    f"({_shape(_amounts_of(request))}).",
                    code=NO_HOST,
                )
            new = _allocations(view, found[0])
            trees, sharing = _compared(view, ctx, walked, found[0])
            claim = self._prepare(
                view, uuid, change.project_id, change.user_id, change.consumer_type, None, {}, new
            )
        self._fresh(self.reader.load_providers([*new, *sharing], trees))
        return self._claim(claim, trees, sharing)

    def _prepare(
        self,
        view: SandboxView,
        uuid: str,
        project: str,
        user: str,
        consumer_type: str | None,
        generation: int | None,
        before: Allocations,
        new: Allocations,
    ) -> _Claim:
        """What the index says of the consumer's new allocations (its names
        checked as `PUT /allocations/{uuid}` checks them)."""
        write = allocations.ConsumerWrite(uuid, project, user, new, True, generation, consumer_type)
        provider_ids = {u: rp for u in new if (rp := view.provider(u)) is not None}
        class_ids = dict(view.class_ids_by_name())
        allocations.check_named([write], provider_ids, class_ids)
        released: collections.Counter = collections.Counter()
        for rp_uuid, resources in before.items():
            rp = view.provider(rp_uuid)
            for rc, amount in resources.items():
                if rp is not None and rc in class_ids:
                    released[(rp, class_ids[rc])] += amount
        used = {provider_ids[u]: view.used_of(provider_ids[u]) for u in new}
        return _Claim(write, before, provider_ids, class_ids, released, used)

    def _claim(self, claim: _Claim, trees: list[str] = (), sharing: list[str] = ()) -> dict:
        """Judge the consumer's new allocations as `PUT /allocations/{uuid}` would."""
        write, provider_ids, class_ids = claim.write, claim.provider_ids, claim.class_ids
        new = write.allocations
        records = self._records(list(new))
        rows = {
            (provider_ids[u], class_ids[rc]): _Row(
                **r.amounts(), used_now=claim.used[provider_ids[u]].get(class_ids[rc], 0)
            )
            for u in new
            for rc, r in records.get(u, {}).items()
            if rc in class_ids
        }
        allocations.judge([write], provider_ids, class_ids, claim.released, rows)
        compared = {u for root in trees for u in self.reader.trees.get(root, ())}
        self._read_providers({*claim.before, *new, *compared, *sharing})
        self._reads["trees"] = sorted(trees)
        return {
            "op": "allocations",
            "consumer": write.uuid,
            "project_id": write.project_id,
            "user_id": write.user_id,
            "consumer_type": write.consumer_type,
            "allocations": new,
            "before": claim.before,
        }

    # -- providers ---------------------------------------------------------------

    def _read_providers(self, uuids: set[str]) -> None:
        """Note the generations of these providers (the first read; null: none)."""
        overlay, reader = self.overlay, self.reader
        found = self._reads["providers"]
        for uuid in uuids:
            if uuid in overlay.providers_read:
                found[uuid] = overlay.providers_read[uuid]
            elif uuid in overlay.added:
                found[uuid] = None
            else:
                found[uuid] = reader.generation(uuid)

    def _records(self, uuids: list[str]) -> dict[str, dict[str, Record]]:
        """The providers' inventory records in the sandbox."""
        changed, reader = self.overlay.inventories, self.reader
        reader.load_providers(u for u in uuids if u not in changed)
        found: dict[str, dict[str, Record]] = {}
        for uuid in uuids:
            if uuid in changed:
                found[uuid] = dict(changed[uuid].now)
            elif (known := reader.providers.get(uuid)) is not None:
                found[uuid] = dict(known.records)
        return found

    def _provider(self, view: SandboxView, uuid: str, missing: str | None = None) -> int:
        rp = view.provider(uuid)
        if rp is None:
            raise NotFound(missing or f"No resource provider with uuid {uuid} found")
        return rp

    def _inventory(self, change: Change) -> dict:
        uuid, rc = change.provider, change.resource_class
        self.reader.load_providers([uuid])
        with self.view() as view:
            rp = self._provider(view, uuid)
            used = view.used_of(rp)
            class_ids, names = view.class_ids_by_name(), view.class_names_by_id()
        before = self._records([uuid]).get(uuid, {})
        old = before.get(rc)
        if old is None and "total" not in change.amounts:
            raise BadRequest(f"Inventory of {rc} on {uuid} is new: its total is required.")
        record = Record(rc, **{**(old.amounts() if old else {}), **change.amounts})
        after = {name: dataclasses.replace(r) for name, r in before.items()}
        after[rc] = record
        self._check_inventories(uuid, after, class_ids)
        usage = {names[c]: (c, n, 1) for c, n in used.items() if n}
        capacity_guard.judge(
            uuid,
            before,
            after,
            usage,
            self.rules.over_capacity == "refuse",
            capacity_guard.UPDATE_CONFLICT,
            lambda class_id: self._holders(uuid, names[class_id]),
        )
        self._read_providers({uuid})
        return {
            "op": "inventories",
            "provider": uuid,
            "inventories": amounts(after),
            "before": amounts(before),
        }

    def _check_inventories(self, uuid: str, records: dict[str, Record], class_ids: Any) -> None:
        """400 as `PUT .../inventories` answers: a record without a usable
        inventory, then a class that does not exist."""
        for r in records.values():
            inventory.check_record(uuid, r, self.rules, "update")
        unknown = sorted(name for name in records if name not in class_ids)
        if unknown:
            raise BadRequest(
                f"Unknown resource class in inventory for resource provider {uuid}: "
                + ", ".join(unknown)
            )

    def _holders(
        self, uuid: str, rc: str
    ) -> tuple[tuple[capacity_guard.ShortfallHolder, ...], int]:
        """Who holds class `rc` on provider `uuid` in the sandbox, largest first."""
        overlay = self.overlay
        held = {
            c: on[uuid][rc]
            for c, on in reads.holdings(self.engine, [uuid]).items()
            if c not in overlay.consumers and rc in on.get(uuid, {})
        }
        for c, consumer in overlay.consumers.items():
            amount = consumer.now.get(uuid, {}).get(rc)
            if amount:
                held[c] = amount
        largest = sorted(held.items(), key=lambda item: (-item[1], item[0]))
        largest = largest[: capacity_guard.CONSUMERS_SHOWN]
        owners = reads.owners(self.engine, [c for c, _ in largest])
        for c, _ in largest:
            if c not in owners:  # made in the sandbox
                made = overlay.consumers[c]
                owners[c] = (made.consumer_type, made.project_id)
        return (
            tuple(capacity_guard.ShortfallHolder(c, n, *owners[c]) for c, n in largest),
            len(held),
        )

    def _removal_order(self, uuid: str, tree: bool) -> list[str]:
        """The providers a removal deletes, deepest first then by uuid."""
        if not tree:
            return [uuid]
        with self.view() as view:
            rp = view.provider(uuid)
            if rp is None:
                return [uuid]  # (its step says 404)
            return [view.uuid_of(m) for m in view.subtree(rp)]

    def _remove(self, uuid: str) -> dict:
        self.reader.load_providers([uuid])
        with self.view() as view:
            rp = self._provider(
                view, uuid, f"No resource provider with uuid {uuid} found for delete"
            )
            if view.children(rp):
                raise CannotDeleteParent(
                    f"Unable to delete parent resource provider {uuid}: "
                    "It has child resource providers."
                )
            if any(view.used_of(rp).values()):
                raise ProviderInUse(
                    f"Unable to delete resource provider {uuid}: Resource provider has allocations."
                )
        self._read_providers({uuid})
        return {"op": "delete", "provider": uuid}

    def _disable(self, uuid: str) -> dict:
        self.reader.load_providers([uuid])
        with self.view() as view:
            rp = self._provider(view, uuid)
            before = view.trait_names_of(rp)
        self._read_providers({uuid})
        return {
            "op": "traits",
            "provider": uuid,
            "traits": sorted({*before, DISABLED}),
            "before": before,
        }

    def _consumers_of_tree(self, uuid: str) -> list[str]:
        """The consumers holding anything in the tree of provider `uuid`, by uuid."""
        with self.view() as view:
            rp = view.provider(uuid)
            if rp is None:
                return []
            tree = view.tree_uuids(rp)
        overlay = self.overlay
        found = {c for c in reads.holdings(self.engine, tree) if c not in overlay.consumers}
        found |= {c for c, held in overlay.consumers.items() if tree & held.now.keys()}
        return sorted(found)

    # -- providers made in the sandbox -------------------------------------------

    def _add(self, member: _Member, name: str, copied: str | None = None) -> dict:
        """A new provider, as `POST /resource_providers` then `PUT` of its
        inventories, traits and aggregates would make it (all or none). A copy of
        a template's provider (`copied`) is named by its new uuid (uuid4): the
        database is not asked whether either is taken."""
        uuid, parent = member.uuid, member.parent
        holder = None
        if copied is None:
            self.reader.load_providers([uuid, parent] if parent else [uuid])
            holder = reads.name_taken(self.engine, name)
        with self.view() as view:
            failed = f'Unable to create resource provider "{name}", {uuid}'
            if parent is not None:
                if parent == uuid:
                    raise BadRequest(
                        f"{failed}: parent provider UUID cannot be same as UUID. "
                        "Leave parent_provider_uuid out or null for a root provider."
                    )
                if view.provider(parent) is None:
                    raise BadRequest(f"{failed}: parent provider UUID does not exist.")
            clashes = []
            if view.provider(uuid) is not None:
                clashes.append(f"uuid: {uuid}")
            if self._named(view, name, holder):
                clashes.append(f"name: {name}")
            if clashes:
                raise DuplicateName(
                    f"Conflicting resource provider {', '.join(clashes)} already exists."
                )
            class_ids = view.class_ids_by_name()
            trait_ids = view.trait_ids_by_name()
        records = {rc: Record(rc, **a) for rc, a in member.inventories.items()}
        self._check_inventories(uuid, records, class_ids)
        missing = sorted(set(member.traits) - trait_ids.keys())
        if missing:
            raise BadRequest(f"No such trait {', '.join(missing)}")
        self._read_providers({uuid} | ({parent} if parent else set()))
        if copied is not None:
            self._read_providers({copied})
        return {
            "op": "add",
            "provider": uuid,
            "name": name,
            "parent": parent,
            "inventories": amounts(records),
            "traits": sorted(set(member.traits)),
            "aggregates": list(member.aggregates),
        }

    def _named(self, view: SandboxView, name: str, holder: str | None) -> bool:
        """Whether a provider of the sandbox is called `name` (`holder`: the live
        one the database found by that name)."""
        if holder is not None and view.provider(holder) is not None:
            if holder not in self.overlay.added:  # (not the live one made again)
                return True
        for uuid, made in self.overlay.added.items():  # (compared exactly)
            if made["name"] == name and view.provider(uuid) is not None:
                return True
        return False

    def _copies(self, template: str, count: int) -> Iterator[tuple[str, str, Callable]]:
        """The steps of `count` copies of the tree under `template`."""
        members = self._template(template)
        if members is None:
            missing = f"No resource provider with uuid {template} found"
            yield "add", template, lambda: _raise(NotFound(missing))
            return
        for _ in range(count):
            made = {m.uuid: str(uuidlib.uuid4()) for m in members}
            for m in members:
                copy = _Member(
                    made[m.uuid],
                    made.get(m.parent) if m.parent else None,
                    m.inventories,
                    m.traits,
                    m.aggregates,
                )
                yield "add", copy.uuid, lambda c=copy, m=m: self._add(c, c.uuid, m.uuid)

    def _template(self, uuid: str) -> list[_Member] | None:
        """The providers of the tree under `uuid` as they are in the sandbox,
        parents first (then by uuid); None when there is no such provider."""
        self.reader.load_providers([uuid])
        with self.view() as view:
            rp = view.provider(uuid)
            if rp is None:
                return None
            rows = view.rows

            def depth(m: int) -> int:
                return 0 if m == rp else 1 + depth(rows[m][1])

            ordered = sorted(view.subtree(rp), key=lambda m: (depth(m), rows[m][0]))
            found = [
                (
                    rows[m][0],
                    None if m == rp else rows[rows[m][1]][0],
                    view.trait_names_of(m),
                    view.aggregate_uuids_of(m),
                )
                for m in ordered
            ]
        records = self._records([u for u, *_ in found])
        return [
            _Member(u, parent, amounts(records.get(u, {})), traits, aggs)
            for u, parent, traits, aggs in found
        ]


def _no_reads() -> dict[str, Any]:
    return {"providers": {}, "consumers": {}, "trees": []}


def _raise(error: Exception) -> dict:
    raise error


def _allocations(view: SandboxView, candidate: Candidate) -> Allocations:
    """A candidate's allocations by provider uuid and class name."""
    rows, names = view.rows, view.class_names_by_id()
    found: Allocations = {}
    for rp, rc, amount in candidate[0]:
        found.setdefault(rows[rp][0], {})[names[rc]] = amount
    return found


def _compared(
    view: SandboxView, ctx: Any, walked: list[int], chosen: Candidate
) -> tuple[list[str], list[str]]:
    """The live trees (root uuids) a search compared before it chose `chosen`:
    those the walk came to (up to the chosen one's), and the chosen one's (a
    search in bulk compared every tree; only these are named); and the sharing
    providers sharing into them."""
    root_of, rows = view.root_of(), view.rows
    roots = set(walked) | {root_of[rp] for rp, _, _ in chosen[0]}
    sharing = set()
    for sp in sorted(ctx.sharing) if ctx is not None else ():
        if roots & ctx.anchors_of(sp):
            sharing.add(sp)
    return (
        sorted(rows[r][0] for r in roots if view.is_live(r)),
        sorted(rows[sp][0] for sp in sharing if view.is_live(sp)),
    )


def _shape(resources: dict[str, int]) -> str:
    return ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


def _amounts_of(request: CandidateRequest) -> dict[str, int]:
    found: collections.Counter = collections.Counter()
    for group in request.groups:
        found.update(group.resources)
    return dict(found)
