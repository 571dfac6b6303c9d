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
over: a step whose search's reads came in newer is tried again (trial.py).
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any

from tally.placement.error_types import BadRequest
from tally.placement.ledger.candidates.request import CandidateRequest
from tally.placement.ledger.sandbox import claims, provider_changes
from tally.placement.ledger.sandbox.trial import Trial

CAP_EVERY = 64  # steps between two checks of the overlay's size
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


def apply(
    trial: Trial, changes: list[Change], first: int, max_bytes: int = 0
) -> list[dict[str, Any]]:
    """Apply `changes` in order (numbered from `first`); the steps they made.
    507 as soon as the overlay would take more than `max_bytes` (0: no cap)."""
    named = [c.consumer for c in changes if c.consumer] + [
        uuid for c in changes for uuid in c.consumers
    ]
    trial.prefetch(named)
    made: list[dict[str, Any]] = []
    for n, change in enumerate(changes, first):
        for kind, subject, run in _steps(trial, change):
            step = trial.step(n, kind, subject, run)
            trial.overlay.add(step)
            made.append(step)
            if max_bytes and len(made) % CAP_EVERY == 0:
                trial.check_size(max_bytes)
    if max_bytes:
        trial.check_size(max_bytes)
    with trial.view():  # (the patch folds the last step: it may be kept)
        pass
    return made


def _steps(trial: Trial, change: Change) -> Iterator[tuple[str, str, Callable[[], dict]]]:
    """(kind, subject, the step's write) of each step of a change, made lazily:
    a step sees the ones before it."""
    kind = change.kind
    if kind == "move":
        yield kind, change.consumer, lambda: claims.move(trial, change.consumer, change.to)
    elif kind == "resize":
        yield kind, change.consumer, lambda: claims.resize(trial, change.consumer, change.resources)
    elif kind == "boot":
        uuids = list(change.consumers) or [str(uuidlib.uuid4()) for _ in range(change.count)]
        for uuid in uuids:
            yield kind, uuid, lambda uuid=uuid: claims.boot(trial, uuid, change)
    elif kind == "inventory":
        yield kind, change.provider, lambda: provider_changes.inventory(trial, change)
    elif kind == "remove":
        for uuid in provider_changes.removal_order(trial, change.provider, change.tree):
            yield kind, uuid, lambda uuid=uuid: provider_changes.remove(trial, uuid)
    elif kind == "disable":
        yield kind, change.provider, lambda: provider_changes.disable(trial, change.provider)
    elif kind == "drain":
        yield "disable", change.provider, lambda: provider_changes.disable(trial, change.provider)
        consumers = provider_changes.consumers_of_tree(trial, change.provider)
        trial.prefetch(consumers)
        for consumer in consumers:
            yield "move", consumer, lambda c=consumer: claims.move(trial, c, "anywhere")
    elif kind == "add" and change.template is not None:
        yield from provider_changes.copies(trial, change.template, change.count)
    elif kind == "add":
        uuid = change.provider or str(uuidlib.uuid4())
        member = provider_changes.Member(uuid, change.parent, change.inventories, change.traits, [])
        yield kind, uuid, lambda: provider_changes.add(trial, member, change.name or uuid)
    else:
        raise BadRequest(f"Unknown change kind {kind!r}: one of {', '.join(KINDS)}")
