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

A step's verdict is the real write's: applied, or refused with the status, code
and detail the API would answer (the claim check `allocations.judge`, the
capacity guard `capacity_guard.judge`, the delete's and the inventory record's
checks), or 409 `tally.sandbox.no_host` when the search finds no candidate.
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
    Conflict,
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
KINDS = ("move", "resize", "boot", "inventory", "remove", "disable", "drain")


@dataclasses.dataclass
class Change:
    """One change asked for (the handler checked its shape against the schema)."""

    kind: str
    consumer: str | None = None  # move, resize
    to: str | None = None  # move: a provider's uuid (its tree) or "anywhere"
    resources: dict[str, int] | None = None  # resize
    request: CandidateRequest | None = None  # boot: the shape, as a candidates query
    count: int = 1  # boot
    consumers: list[str] = dataclasses.field(default_factory=list)  # boot: their uuids
    project_id: str = "sandbox"  # boot
    user_id: str = "sandbox"  # boot
    consumer_type: str = "INSTANCE"  # boot
    provider: str | None = None  # inventory, remove, disable, drain
    resource_class: str | None = None  # inventory
    amounts: dict[str, Any] = dataclasses.field(default_factory=dict)  # inventory
    tree: bool = False  # remove


class _Row(NamedTuple):
    """An inventory with its usage, as `allocations.judge` reads one."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used_now: int


class Trial:
    """Changes applied to one sandbox's overlay (in this worker, for one request)."""

    def __init__(
        self,
        engine: sa.Engine,
        index: Index | None,
        overlay: Overlay,
        patches: dict[str, Patch],
        sandbox: str,
        options: search.Options,
        rules: inventory.Rules,
    ) -> None:
        self.engine, self.index, self.overlay = engine, index, overlay
        self.patches, self.sandbox = patches, sandbox
        self.options, self.rules = options, rules

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
            yield SandboxView(
                self.index, patch_of(self.overlay, self.index, self.patches, self.sandbox)
            )

    # -- changes -> steps ------------------------------------------------------

    def apply(self, changes: list[Change], first: int, max_bytes: int = 0) -> list[dict[str, Any]]:
        """Apply `changes` in order (numbered from `first`); the steps they made.
        507 as soon as the overlay would take more than `max_bytes` (0: no cap)."""
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
        return made

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
            for consumer in self._consumers_of_tree(change.provider):
                yield "move", consumer, lambda c=consumer: self._move(c, "anywhere")
        else:
            raise BadRequest(f"Unknown change kind {kind!r}: one of {', '.join(KINDS)}")

    def _step(self, n: int, kind: str, subject: str, run: Callable[[], dict]) -> dict[str, Any]:
        self._reads: dict[str, dict] = {"providers": {}, "consumers": {}}
        step: dict[str, Any] = {"change": n, "kind": kind, "subject": subject}
        try:
            write = run()
        except TallyError as exc:
            error = {"status": exc.status, "code": exc.code, "detail": exc.detail}
            return {**step, "applied": False, "error": error, "write": None, "reads": self._reads}
        return {**step, "applied": True, "error": None, "write": write, "reads": self._reads}

    # -- consumers -------------------------------------------------------------

    def _consumer(self, uuid: str) -> tuple[Allocations, str, str, int | None]:
        """A consumer's allocations in the sandbox, owner and generation (read)."""
        overlay = self.overlay
        held = overlay.consumers.get(uuid)
        if held is not None:
            found = held.now, held.project_id, held.user_id, overlay.consumers_read[uuid]
        else:
            live = allocations.for_consumer(self.engine, uuid)
            found = (
                {rp: dict(a["resources"]) for rp, a in live.allocations.items()},
                live.project_id or "",
                live.user_id or "",
                live.generation,
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
        with self.view() as view:
            roots = {view.root_uuid(u) for u in held} - {None}
            found = search.search_over(view, request, self.options)
        for candidate in found.allocation_requests:
            chosen = candidate["allocations"]
            summaries = found.provider_summaries
            if to != "anywhere" or not {summaries[u]["root_provider_uuid"] for u in chosen} & roots:
                break
        else:
            where = "anywhere" if to == "anywhere" else f"in the tree of {to}"
            raise Conflict(
                f"No allocation candidate for consumer {uuid} ({_shape(shape)}) {where}.",
                code=NO_HOST,
            )
        new = {rp: dict(a["resources"]) for rp, a in chosen.items()}
        return self._claim(uuid, project, user, None, generation, held, new)

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
        return self._claim(uuid, project, user, None, generation, held, new)

    def _boot(self, uuid: str, change: Change) -> dict:
        assert change.request is not None
        request = dataclasses.replace(change.request, limit=1)
        self._reads["consumers"][uuid] = None
        if uuid in self.overlay.consumers or reads.consumer_generations(self.engine, [uuid]):
            raise BadRequest(f"Consumer {uuid} exists: a boot makes a new one.")
        with self.view() as view:
            found = search.search_over(view, request, self.options)
        if not found.allocation_requests:
            raise Conflict(
                f"No allocation candidate for a new consumer {uuid} "
                f"({_shape(_amounts_of(request))}).",
                code=NO_HOST,
            )
        chosen = found.allocation_requests[0]["allocations"]
        new = {rp: dict(a["resources"]) for rp, a in chosen.items()}
        return self._claim(
            uuid, change.project_id, change.user_id, change.consumer_type, None, {}, new
        )

    def _claim(
        self,
        uuid: str,
        project: str,
        user: str,
        consumer_type: str | None,
        generation: int | None,
        before: Allocations,
        new: Allocations,
    ) -> dict:
        """Judge the consumer's new allocations as `PUT /allocations/{uuid}` would."""
        write = allocations.ConsumerWrite(uuid, project, user, new, True, generation, consumer_type)
        with self.view() as view:
            provider_ids = {u: rp for u in new if (rp := view.provider(u)) is not None}
            class_ids = view.class_ids_by_name()
            allocations.check_named([write], provider_ids, class_ids)
            released: collections.Counter = collections.Counter()
            for rp_uuid, resources in before.items():
                rp = view.provider(rp_uuid)
                for rc, amount in resources.items():
                    if rp is not None and rc in class_ids:
                        released[(rp, class_ids[rc])] += amount
            used = {provider_ids[u]: view.used_of(provider_ids[u]) for u in new}
        records = self._records(list(new))
        rows = {
            (provider_ids[u], class_ids[rc]): _Row(
                **r.amounts(), used_now=used[provider_ids[u]].get(class_ids[rc], 0)
            )
            for u in new
            for rc, r in records.get(u, {}).items()
        }
        allocations.judge([write], provider_ids, class_ids, released, rows)
        self._read_providers({*before, *new})
        return {
            "op": "allocations",
            "consumer": uuid,
            "project_id": project,
            "user_id": user,
            "consumer_type": consumer_type,
            "allocations": new,
            "before": before,
        }

    # -- providers ---------------------------------------------------------------

    def _read_providers(self, uuids: set[str]) -> None:
        overlay, wanted = self.overlay, set(uuids)
        known = {u: overlay.providers_read[u] for u in wanted if u in overlay.providers_read}
        known.update(reads.generations(self.engine, wanted - known.keys()))
        self._reads["providers"].update(known)

    def _records(self, uuids: list[str]) -> dict[str, dict[str, Record]]:
        """The providers' inventory records in the sandbox."""
        changed = self.overlay.inventories
        found = reads.inventories(self.engine, [u for u in uuids if u not in changed])
        found.update({u: dict(changed[u].now) for u in uuids if u in changed})
        return found

    def _provider(self, view: SandboxView, uuid: str, missing: str | None = None) -> int:
        rp = view.provider(uuid)
        if rp is None:
            raise NotFound(missing or f"No resource provider with uuid {uuid} found")
        return rp

    def _inventory(self, change: Change) -> dict:
        uuid, rc = change.provider, change.resource_class
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
        for r in after.values():
            inventory.check_record(uuid, r, self.rules, "update")
        unknown = sorted(name for name in after if name not in class_ids)
        if unknown:
            raise BadRequest(
                f"Unknown resource class in inventory for resource provider {uuid}: "
                + ", ".join(unknown)
            )
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


def _shape(resources: dict[str, int]) -> str:
    return ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


def _amounts_of(request: CandidateRequest) -> dict[str, int]:
    found: collections.Counter = collections.Counter()
    for group in request.groups:
        found.update(group.resources)
    return dict(found)
