"""`Sandboxes`: what the sandbox routes ask of the ledger, one method each."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from tally.placement.error_types import NotFound
from tally.placement.ledger import candidates as search
from tally.placement.ledger import inventory
from tally.placement.ledger import usages as live_usages
from tally.placement.ledger.candidates import why as why_module
from tally.placement.ledger.candidates.index import Index
from tally.placement.ledger.sandbox import changes as changing
from tally.placement.ledger.sandbox import commit as committing
from tally.placement.ledger.sandbox import reads, store
from tally.placement.ledger.sandbox.changes import Change
from tally.placement.ledger.sandbox.overlay import Overlay, amounts
from tally.placement.ledger.sandbox.trial import Trial
from tally.placement.ledger.sandbox.view import SandboxView


@dataclasses.dataclass
class Sandboxes:
    """The sandboxes of one database, as one app serves them."""

    engine: sa.Engine
    index: Index | None
    kept: store.Kept
    options: search.Options
    rules: inventory.Rules
    ttl_seconds: int
    max_mb: int
    retries: int = 10

    # -- the sandbox itself ------------------------------------------------------

    def create(self, ttl_seconds: int | None) -> dict[str, Any]:
        ttl = self.ttl_seconds if ttl_seconds is None else min(ttl_seconds, self.ttl_seconds)
        return _shown(store.create(self.engine, ttl))

    def listing(self) -> dict[str, Any]:
        return {"sandboxes": [_shown(row) for row in store.listing(self.engine)]}

    def show(self, sandbox: str) -> dict[str, Any]:
        return _shown(store.read(self.engine, sandbox))

    def delete(self, sandbox: str) -> None:
        store.delete(self.engine, sandbox)
        self.kept.forget(sandbox)

    def change(self, sandbox: str, changes: list[Change]) -> dict[str, Any]:
        """Apply `changes` in order; their steps (each with its verdict). All or
        none of them are kept: 507 past `sandbox_max_mb`, 409 when another request
        extended the sandbox meanwhile."""
        row = store.read(self.engine, sandbox)
        overlay = Overlay(row.revision, row.steps)
        first = 1 + max((step["change"] for step in row.steps), default=0)
        trial = Trial(self.engine, self.index, overlay, None, sandbox, self.options, self.rules)
        made = changing.apply(trial, changes, first, self.max_mb * 2**20)
        overlay.revision = store.save(self.engine, sandbox, row.revision, overlay.steps)
        self.kept.keep(sandbox, overlay, trial.patch)
        return {"revision": overlay.revision, "steps": made}

    def commit(self, sandbox: str) -> dict[str, Any]:
        written = committing.commit(self.engine, sandbox, self.rules, self.retries)
        self.kept.forget(sandbox)
        return {"committed": True, "steps_written": written}

    # -- reads inside ------------------------------------------------------------

    def _overlay(self, sandbox: str) -> Overlay:
        return store.read_overlay(self.engine, sandbox, self.kept)

    @contextlib.contextmanager
    def _view(self, sandbox: str) -> Iterator[SandboxView]:
        """The sandbox over the index, held for one read (its patch kept after)."""
        overlay = self._overlay(sandbox)
        trial = Trial(
            self.engine,
            self.index,
            overlay,
            self.kept.patch(sandbox),
            sandbox,
            self.options,
            self.rules,
        )
        with trial.view() as view:
            yield view
        self.kept.keep_patch(sandbox, trial.patch)

    def candidates(self, sandbox: str, request: search.CandidateRequest) -> bytes:
        """GET /allocation_candidates inside (the newest microversion's body)."""
        with self._view(sandbox) as view:
            return bytes(search.answer_over(view, request, self.options))

    def why(self, sandbox: str, request: search.CandidateRequest) -> dict[str, Any]:
        """GET /tally/v1/allocation_candidates/why inside."""
        with self._view(sandbox) as view:
            verdict = why_module.explain(view, request, self.options)
            uuids = {m.root: view.rows[m.root][0] for m in verdict.closest}
            added = view.patch.overlay.added
        names = search.provider_names(self.engine, uuids.values())
        names.update({u: added[u]["name"] for u in uuids.values() if u in added})
        return verdict.as_dict(uuids.__getitem__, lambda rp: names.get(uuids[rp]))

    def usages(self, sandbox: str, uuid: str) -> dict[str, Any]:
        """GET /resource_providers/{uuid}/usages inside (a provider made in the
        sandbox shows generation 0)."""
        with self._view(sandbox) as view:
            rp = view.provider(uuid)
            if rp is None:
                raise NotFound(f"No resource provider with uuid {uuid} found")
            used, names = view.used_of(rp), view.class_names_by_id()
            found = {names[rc]: used.get(rc, 0) for rc in view.inventories_of(rp)}
        generation = reads.generations(self.engine, [uuid]).get(uuid, 0)
        return {"resource_provider_generation": generation, "usages": found}

    def amounts(self, sandbox: str) -> dict[str, Any]:
        """GET /tally/v1/amounts inside: the live amounts with the overlay laid on."""
        overlay = self._overlay(sandbox)
        delta = overlay.delta
        providers: dict[str, dict[str, Any]] = {}
        for a in live_usages.amounts(self.engine):
            providers.setdefault(a.provider, {})[a.resource_class] = a
        used = {u: {rc: a.used for rc, a in held.items()} for u, held in providers.items()}
        shown: dict[str, dict[str, Any]] = {}
        for uuid in providers.keys() | overlay.inventories.keys():
            if overlay.exists(uuid) is False:
                continue
            changed = overlay.inventories.get(uuid)
            records = changed.now if changed else providers[uuid]
            classes = {}
            for rc in sorted(records):
                r = records[rc]
                n = used.get(uuid, {}).get(rc, 0) + delta.get(uuid, {}).get(rc, 0)
                classes[rc] = {
                    "total": r.total,
                    "reserved": r.reserved,
                    "allocation_ratio": r.allocation_ratio,
                    "capacity": r.capacity,
                    "used": n,
                }
            if classes:
                shown[uuid] = classes
        order = [*providers, *overlay.added]  # (by provider id, as outside)
        return {"providers": {u: shown[u] for u in order if u in shown}}

    def diff(self, sandbox: str) -> dict[str, Any]:
        """Per provider the sandbox changed: usage, inventories and traits before ->
        after, removed or not; and the steps refused, with why."""
        overlay = self._overlay(sandbox)
        delta = overlay.delta
        live: dict[str, dict[str, int]] = {}
        for a in live_usages.amounts(self.engine):
            live.setdefault(a.provider, {})[a.resource_class] = a.used
        touched = (
            delta.keys()
            | overlay.inventories.keys()
            | overlay.traits.keys()
            | overlay.removed
            | overlay.added.keys()
        )
        providers: dict[str, dict[str, Any]] = {}
        for uuid in sorted(touched):
            entry: dict[str, Any] = {
                "removed": uuid in overlay.removed,
                "added": uuid in overlay.added,
            }
            moved = {rc: n for rc, n in delta.get(uuid, {}).items() if n}
            if moved:
                before = live.get(uuid, {})
                entry["usages"] = {
                    rc: {"before": before.get(rc, 0), "after": before.get(rc, 0) + n}
                    for rc, n in sorted(moved.items())
                }
            if uuid in overlay.inventories:
                changed = overlay.inventories[uuid]
                entry["inventories"] = {
                    "before": amounts(changed.before),
                    "after": amounts(changed.now),
                }
            if uuid in overlay.traits:
                changed = overlay.traits[uuid]
                entry["traits"] = {"before": sorted(changed.before), "after": sorted(changed.now)}
            providers[uuid] = entry
        failed = [
            {k: step[k] for k in ("change", "kind", "subject", "error")}
            for step in overlay.steps
            if not step["applied"]
        ]
        applied = overlay.version
        return {"providers": providers, "applied": applied, "failed": failed}


def _shown(row: store.Row) -> dict[str, Any]:
    return {
        "id": row.id,
        "created_at": row.created_at.isoformat(),
        "expires_at": row.expires_at.isoformat(),
        "revision": row.revision,
        "steps": len(row.steps),
    }
