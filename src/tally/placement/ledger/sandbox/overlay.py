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
        {"op": "delete", "provider"},
     "reads": {"providers": {uuid: generation}, "consumers": {uuid: generation | null}}}

`Overlay` folds the applied ones into the changes over the live state: each
consumer's allocations as first read and as now, each provider's inventories and
traits as first read and as now, the providers removed, and the first generation
read of every provider and consumer (what a commit checks). Nothing here reads
the database or the index: `patch.py` lays it over the index.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tally.placement.ledger.inventory_record import FIELDS, Record

Allocations = dict[str, dict[str, int]]  # provider uuid -> class -> amount


@dataclasses.dataclass
class Consumer:
    """A consumer the sandbox changed: its allocations as first read and as now."""

    uuid: str
    project_id: str
    user_id: str
    consumer_type: str | None
    before: Allocations
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
        self.inventories: dict[str, Changed] = {}  # provider -> {class: Record}
        self.traits: dict[str, Changed] = {}  # provider -> frozenset of names
        self.removed: set[str] = set()
        self.providers_read: dict[str, int] = {}
        self.consumers_read: dict[str, int | None] = {}
        self.version = 0  # steps folded so far (what `patch.py` keys its work on)
        for step in steps or ():
            self.add(step)

    def add(self, step: dict[str, Any]) -> None:
        """Fold one more step in (a refused one is only kept, to be shown)."""
        self.steps.append(step)
        if not step["applied"]:
            return
        self.version += 1
        reads = step["reads"]
        for uuid, generation in reads["providers"].items():
            self.providers_read.setdefault(uuid, generation)
        for uuid, generation in reads["consumers"].items():
            self.consumers_read.setdefault(uuid, generation)
        write = step["write"]
        op = write["op"]
        if op == "allocations":
            held = self.consumers.get(write["consumer"])
            if held is None:
                held = self.consumers[write["consumer"]] = Consumer(
                    write["consumer"], "", "", None, write["before"], {}
                )
            held.project_id, held.user_id = write["project_id"], write["user_id"]
            held.consumer_type = write["consumer_type"] or held.consumer_type
            held.now = write["allocations"]
        elif op == "inventories":
            now = records(write["inventories"])
            found = self.inventories.get(write["provider"])
            if found is None:
                self.inventories[write["provider"]] = Changed(records(write["before"]), now)
            else:
                found.now = now
        elif op == "traits":
            now = frozenset(write["traits"])
            found = self.traits.get(write["provider"])
            if found is None:
                self.traits[write["provider"]] = Changed(frozenset(write["before"]), now)
            else:
                found.now = now
        elif op == "delete":
            self.removed.add(write["provider"])
        else:
            raise ValueError(f"unknown sandbox write {op!r}")

    def allocations_of(self, consumer: str) -> Allocations | None:
        """The consumer's allocations in the sandbox (None: as live)."""
        held = self.consumers.get(consumer)
        return None if held is None else held.now

    def approx_bytes(self) -> int:
        """A bound on what this overlay and its patch (patch.py) hold in a worker:
        per consumer, provider and allocation changed (measured by bench/sandbox.py)."""
        allocations = sum(
            len(res)
            for c in self.consumers.values()
            for res in (*c.before.values(), *c.now.values())
        )
        providers = len(self.inventories) + len(self.traits) + len(self.removed)
        return (
            200 * len(self.consumers) + 120 * allocations + 700 * providers + 400 * len(self.steps)
        )


def records(amounts: dict[str, dict[str, Any]]) -> dict[str, Record]:
    """{class: {field: value}} as Records."""
    return {rc: Record(rc, **{k: v[k] for k in FIELDS if k in v}) for rc, v in amounts.items()}


def amounts(found: dict[str, Record]) -> dict[str, dict[str, Any]]:
    """Records as {class: {field: value}} (JSON)."""
    return {rc: r.amounts() for rc, r in found.items()}
