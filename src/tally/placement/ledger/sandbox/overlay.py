"""A sandbox's state: what its applied steps changed, by uuid and class name.

A step (a JSON object, stored as it is: `store.py`) is one write the sandbox
stands for, with its verdict and the generations it read:

    {"change": 3, "kind": "move", "subject": <consumer or provider uuid>,
     "applied": true | false, "error": null | {"status", "code", "detail"},
     "write": null | one of
        {"op": "allocations", "consumer", "project_id", "user_id", "consumer_type",
         "allocations": {rp: {class: n}}, "before": {rp: {class: n}}}
        {"op": "inventories", "provider", "inventories": {class: amounts},
         "before": {class: amounts}}
        {"op": "traits", "provider", "traits": [...], "before": [...]}
        {"op": "delete", "provider"}
        {"op": "add", "provider", "name", "parent": uuid | null,
         "inventories": {class: amounts}, "traits": [...], "aggregates": [...]},
     "reads": {"providers": {uuid: generation | null}, "consumers": {uuid: generation | null},
               "trees": [root uuid, ...]}}

A step's `reads` are what it read that no applied step before it had: the
generation of each provider and consumer (null: it did not exist), and the trees
whose every provider it read (a search's: see changes.py), whose membership a
commit checks too.

`Overlay` folds the applied ones into the changes over the live state: each
consumer's allocations as now and what they add up to per provider, each provider's inventories and
traits as first read and as now, the providers removed and added, and the first
generation read of every provider and consumer and the trees read (what a commit
checks). Nothing here reads the database or the index: `patch.py` lays it over
the index.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from tally.placement.ledger.inventory_record import FIELDS, Record

Allocations = dict[str, dict[str, int]]  # provider uuid -> class -> amount


@dataclasses.dataclass
class Consumer:
    """A consumer the sandbox changed: its owner and allocations as now."""

    uuid: str
    project_id: str
    user_id: str
    consumer_type: str | None
    now: Allocations


@dataclasses.dataclass
class Changed:
    """A provider's inventories or traits as first read and as now."""

    before: Any
    now: Any


class Overlay:
    """The applied steps of one sandbox, folded (see the module docstring)."""

    def __init__(self, revision: int = 0, steps: list[dict[str, Any]] | None = None) -> None:
        self.revision = revision  # the stored revision these steps are of
        self.steps: list[dict[str, Any]] = []
        self.consumers: dict[str, Consumer] = {}
        self.delta: dict[str, dict[str, int]] = {}  # provider -> class -> usage added (or freed)
        self.inventories: dict[str, Changed] = {}  # provider -> {class: Record}
        self.traits: dict[str, Changed] = {}  # provider -> frozenset of names
        self.removed: set[str] = set()
        self.added: dict[str, dict[str, Any]] = {}  # uuid -> its "add" write, in order
        self.providers_read: dict[str, int | None] = {}
        self.consumers_read: dict[str, int | None] = {}
        self.trees_read: set[str] = set()
        self.version = 0  # steps applied so far
        self.count = 0  # steps added so far (patch.py folds those it has not)
        self.compacted = False
        for step in steps or ():
            self.add(step)

    def add(self, step: dict[str, Any]) -> None:
        """Fold one more step in (a refused one is only kept, to be shown)."""
        if self.compacted:
            raise ValueError("a compacted overlay takes no more steps")
        self.steps.append(step)
        self.count += 1
        if not step["applied"]:
            return
        self.version += 1
        reads = step["reads"]
        for uuid, generation in reads["providers"].items():
            self.providers_read.setdefault(uuid, generation)
        for uuid, generation in reads["consumers"].items():
            self.consumers_read.setdefault(uuid, generation)
        self.trees_read.update(reads.get("trees", ()))
        write = step["write"]
        op = write["op"]
        if op == "allocations":
            held = self.consumers.get(write["consumer"])
            if held is None:
                held = self.consumers[write["consumer"]] = Consumer(
                    write["consumer"], "", "", None, {}
                )
            held.project_id = sys.intern(write["project_id"])
            held.user_id = sys.intern(write["user_id"])
            held.consumer_type = write["consumer_type"] or held.consumer_type
            held.now = _interned(write["allocations"])
            for allocations, sign in ((write["before"], -1), (held.now, 1)):
                for uuid, resources in allocations.items():
                    on = self.delta.setdefault(sys.intern(uuid), {})
                    for rc, n in resources.items():
                        on[sys.intern(rc)] = on.get(rc, 0) + sign * n
        elif op == "inventories":
            before, now = records(write["before"]), records(write["inventories"])
            self._set(self.inventories, write["provider"], before, now)
        elif op == "traits":
            before, now = frozenset(write["before"]), frozenset(write["traits"])
            self._set(self.traits, write["provider"], before, now)
        elif op == "delete":
            uuid = write["provider"]
            if self.added.pop(uuid, None) is None:
                self.removed.add(uuid)
            elif uuid not in self.removed:  # made and removed here: nothing to show
                self.inventories.pop(uuid, None)
                self.traits.pop(uuid, None)
        elif op == "add":  # (a live provider removed here may be made again: both kept)
            uuid = write["provider"]
            self.added[uuid] = write
            self.delta.pop(uuid, None)  # (what a live one of that uuid had: it went)
            self._set(self.inventories, uuid, {}, records(write["inventories"]))
            self._set(self.traits, uuid, frozenset(), frozenset(write["traits"]))
        else:
            raise ValueError(f"unknown sandbox write {op!r}")

    def compact(self) -> Overlay:
        """Keep only what the sandbox's reads ask of it (what changed, and the
        steps refused, to be shown), not the steps applied nor what they read
        (a commit and new changes read the stored steps again): what a worker
        keeps between requests."""
        self.steps = [
            {k: step[k] for k in ("change", "kind", "subject", "applied", "error")}
            for step in self.steps
            if not step["applied"]
        ]
        self.consumers = {}  # (what they add up to is in `delta`)
        self.providers_read, self.consumers_read, self.trees_read = {}, {}, set()
        self.compacted = True
        return self

    @staticmethod
    def _set(changed: dict[str, Changed], uuid: str, before: Any, now: Any) -> None:
        found = changed.get(uuid)
        if found is None:
            changed[uuid] = Changed(before, now)
        else:
            found.now = now

    def exists(self, uuid: str) -> bool | None:
        """Whether provider `uuid` exists in the sandbox: True (made here), False
        (removed here), None (as live)."""
        if uuid in self.added:
            return True
        return False if uuid in self.removed else None

    def allocations_of(self, consumer: str) -> Allocations | None:
        """The consumer's allocations in the sandbox (None: as live)."""
        held = self.consumers.get(consumer)
        return None if held is None else held.now

    def approx_bytes(self) -> int:
        """A bound on what this overlay and its patch (patch.py) hold in a worker:
        per consumer, provider and allocation changed (measured by bench/sandbox.py)."""
        allocations = sum(len(res) for c in self.consumers.values() for res in c.now.values())
        allocations += sum(map(len, self.delta.values()))
        providers = len(self.inventories) + len(self.traits) + len(self.removed) + len(self.added)
        return (
            200 * len(self.consumers)
            + 600 * len(self.delta)
            + 120 * allocations
            + 700 * providers
            + 400 * len(self.steps)
        )


def _interned(held: Allocations) -> Allocations:
    """Allocations with their uuids and class names interned: a worker keeps many
    that name the same few (one string each, not one per step as parsed)."""
    intern = sys.intern
    return {
        intern(uuid): {intern(rc): n for rc, n in resources.items()}
        for uuid, resources in held.items()
    }


def records(amounts: dict[str, dict[str, Any]]) -> dict[str, Record]:
    """{class: {field: value}} as Records."""
    return {rc: Record(rc, **{k: v[k] for k in FIELDS if k in v}) for rc, v in amounts.items()}


def amounts(found: dict[str, Record]) -> dict[str, dict[str, Any]]:
    """Records as {class: {field: value}} (JSON)."""
    return {rc: r.amounts() for rc, r in found.items()}
