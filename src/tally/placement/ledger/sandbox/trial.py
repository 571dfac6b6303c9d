"""A trial of changes in a sandbox (for one request in one worker): the sandbox
over the index (`view`), each step run and judged (`step`: the kinds are in
claims.py and provider_changes.py), and what the steps read of the database
(`reads.Reader`) noted as the step's `reads` (overlay.py).

A step judges over the index at one version and may use what was read of the
database at or before it: a commit then finds whatever moved since in the
generations. What a step reads after its search (a move's or boot's chosen
providers and the trees it compared, not known before) must be of that version
too: when it came in newer (another writer committed in between), the step is
tried again over the moved index, STEP_TRIES times; then the request is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from tally.placement.error_types import (
    BadRequest,
    ConcurrentUpdate,
    InsufficientStorage,
    NotFound,
    ServiceUnavailable,
    TallyError,
)
from tally.placement.ledger import candidates as search
from tally.placement.ledger import inventory
from tally.placement.ledger.candidates import view as views
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.inventory_record import Record
from tally.placement.ledger.sandbox import reads
from tally.placement.ledger.sandbox.overlay import Allocations, Overlay
from tally.placement.ledger.sandbox.patch import Patch, patch_of
from tally.placement.ledger.sandbox.view import SandboxView

STEP_TRIES = 5  # a step whose reads came in newer than its index is tried again


class _Newer(Exception):
    """What a step read came in newer than the index it judged over: try again."""


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
        self.reads: dict[str, Any] = _no_reads()

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

    # -- steps -----------------------------------------------------------------

    def step(self, n: int, kind: str, subject: str, run: Callable[[], dict]) -> dict[str, Any]:
        step: dict[str, Any] = {"change": n, "kind": kind, "subject": subject}
        for _ in range(STEP_TRIES):
            self.reads = _no_reads()
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
        overlay, found = self.overlay, self.reads
        return {
            "providers": {
                u: g for u, g in found["providers"].items() if u not in overlay.providers_read
            },
            "consumers": {
                u: g for u, g in found["consumers"].items() if u not in overlay.consumers_read
            },
            "trees": sorted(set(found["trees"]) - overlay.trees_read),
        }

    def fresh(self, version: int | None) -> None:
        """What was just read (None: nothing) is as of the index the step held."""
        if version is not None and version != self.version:
            raise _Newer()

    def check_size(self, max_bytes: int) -> None:
        size = self.overlay.approx_bytes()
        if size > max_bytes:
            raise InsufficientStorage(
                f"Sandbox {self.sandbox} would take more than about {size / 2**20:.1f} MiB "
                f"with these changes, past sandbox_max_mb={max_bytes // 2**20}: none of them "
                "was kept."
            )

    # -- what steps read -----------------------------------------------------

    def prefetch(self, consumers: list[str]) -> None:
        """Read these consumers and the providers they hold, in one go each (a
        read before any step's index is one at or before it: see reads.py)."""
        reader = self.reader
        reader.load_consumers(u for u in consumers if u not in self.overlay.consumers)
        held = {rp for u in consumers if (c := reader.consumers.get(u)) for rp in c.allocations}
        reader.load_providers(held)

    def consumer(self, uuid: str) -> tuple[Allocations, str, str, int | None]:
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
        self.reads["consumers"][uuid] = found[3]
        return found

    def read_providers(self, uuids: set[str]) -> None:
        """Note the generations of these providers (the first read; null: none)."""
        overlay, reader = self.overlay, self.reader
        found = self.reads["providers"]
        for uuid in uuids:
            if uuid in overlay.providers_read:
                found[uuid] = overlay.providers_read[uuid]
            elif uuid in overlay.added:
                found[uuid] = None
            else:
                found[uuid] = reader.generation(uuid)

    def records(self, uuids: list[str]) -> dict[str, dict[str, Record]]:
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

    def provider(self, view: SandboxView, uuid: str, missing: str | None = None) -> int:
        rp = view.provider(uuid)
        if rp is None:
            raise NotFound(missing or f"No resource provider with uuid {uuid} found")
        return rp

    def check_inventories(self, uuid: str, records: dict[str, Record], class_ids: Any) -> None:
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


def _no_reads() -> dict[str, Any]:
    return {"providers": {}, "consumers": {}, "trees": []}
