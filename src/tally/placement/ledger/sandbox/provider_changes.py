"""The steps on providers (changes.py): an inventory set, a removal, a disable,
a provider added, copies of a template's tree; each judged as the real write
would be (the capacity guard, the delete's and the create's checks).
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any

from tally.placement.error_types import (
    BadRequest,
    CannotDeleteParent,
    DuplicateName,
    NotFound,
    ProviderInUse,
)
from tally.placement.ledger import capacity_guard
from tally.placement.ledger.inventory_record import Record
from tally.placement.ledger.sandbox import reads
from tally.placement.ledger.sandbox.claims import DISABLED
from tally.placement.ledger.sandbox.overlay import amounts
from tally.placement.ledger.sandbox.trial import Trial
from tally.placement.ledger.sandbox.view import SandboxView


@dataclasses.dataclass(frozen=True)
class Member:
    """A provider of a template's tree, as a copy makes it."""

    uuid: str
    parent: str | None
    inventories: dict[str, dict[str, Any]]
    traits: list[str]
    aggregates: list[str]


def inventory(trial: Trial, change: Any) -> dict:
    uuid, rc = change.provider, change.resource_class
    trial.reader.load_providers([uuid])
    with trial.view() as view:
        rp = trial.provider(view, uuid)
        used = view.used_of(rp)
        class_ids, names = view.class_ids_by_name(), view.class_names_by_id()
    before = trial.records([uuid]).get(uuid, {})
    old = before.get(rc)
    if old is None and "total" not in change.amounts:
        raise BadRequest(f"Inventory of {rc} on {uuid} is new: its total is required.")
    record = Record(rc, **{**(old.amounts() if old else {}), **change.amounts})
    after = {name: dataclasses.replace(r) for name, r in before.items()}
    after[rc] = record
    trial.check_inventories(uuid, after, class_ids)
    usage = {names[c]: (c, n, 1) for c, n in used.items() if n}
    capacity_guard.judge(
        uuid,
        before,
        after,
        usage,
        trial.rules.over_capacity == "refuse",
        capacity_guard.UPDATE_CONFLICT,
        lambda class_id: _holders(trial, uuid, names[class_id]),
    )
    trial.read_providers({uuid})
    return {
        "op": "inventories",
        "provider": uuid,
        "inventories": amounts(after),
        "before": amounts(before),
    }


def _holders(
    trial: Trial, uuid: str, rc: str
) -> tuple[tuple[capacity_guard.ShortfallHolder, ...], int]:
    """Who holds class `rc` on provider `uuid` in the sandbox, largest first."""
    overlay = trial.overlay
    held = {
        c: on[uuid][rc]
        for c, on in reads.holdings(trial.engine, [uuid]).items()
        if c not in overlay.consumers and rc in on.get(uuid, {})
    }
    for c, consumer in overlay.consumers.items():
        amount = consumer.now.get(uuid, {}).get(rc)
        if amount:
            held[c] = amount
    largest = sorted(held.items(), key=lambda item: (-item[1], item[0]))
    largest = largest[: capacity_guard.CONSUMERS_SHOWN]
    owners = reads.owners(trial.engine, [c for c, _ in largest])
    for c, _ in largest:
        if c not in owners:  # made in the sandbox
            made = overlay.consumers[c]
            owners[c] = (made.consumer_type, made.project_id)
    return (
        tuple(capacity_guard.ShortfallHolder(c, n, *owners[c]) for c, n in largest),
        len(held),
    )


def removal_order(trial: Trial, uuid: str, tree: bool) -> list[str]:
    """The providers a removal deletes, deepest first then by uuid."""
    if not tree:
        return [uuid]
    with trial.view() as view:
        rp = view.provider(uuid)
        if rp is None:
            return [uuid]  # (its step says 404)
        return [view.uuid_of(m) for m in view.subtree(rp)]


def remove(trial: Trial, uuid: str) -> dict:
    trial.reader.load_providers([uuid])
    with trial.view() as view:
        rp = trial.provider(view, uuid, f"No resource provider with uuid {uuid} found for delete")
        if view.children(rp):
            raise CannotDeleteParent(
                f"Unable to delete parent resource provider {uuid}: "
                "It has child resource providers."
            )
        if any(view.used_of(rp).values()):
            raise ProviderInUse(
                f"Unable to delete resource provider {uuid}: Resource provider has allocations."
            )
    trial.read_providers({uuid})
    return {"op": "delete", "provider": uuid}


def disable(trial: Trial, uuid: str) -> dict:
    trial.reader.load_providers([uuid])
    with trial.view() as view:
        rp = trial.provider(view, uuid)
        before = view.trait_names_of(rp)
    trial.read_providers({uuid})
    return {
        "op": "traits",
        "provider": uuid,
        "traits": sorted({*before, DISABLED}),
        "before": before,
    }


def consumers_of_tree(trial: Trial, uuid: str) -> list[str]:
    """The consumers holding anything in the tree of provider `uuid`, by uuid."""
    with trial.view() as view:
        rp = view.provider(uuid)
        if rp is None:
            return []
        tree = view.tree_uuids(rp)
    overlay = trial.overlay
    found = {c for c in reads.holdings(trial.engine, tree) if c not in overlay.consumers}
    found |= {c for c, held in overlay.consumers.items() if tree & held.now.keys()}
    return sorted(found)


def add(trial: Trial, member: Member, name: str, copied: str | None = None) -> dict:
    """A new provider, as `POST /resource_providers` then `PUT` of its
    inventories, traits and aggregates would make it (all or none). A copy of
    a template's provider (`copied`) is named by its new uuid (uuid4): the
    database is not asked whether either is taken."""
    uuid, parent = member.uuid, member.parent
    holder = None
    if copied is None:
        trial.reader.load_providers([uuid, parent] if parent else [uuid])
        holder = reads.name_taken(trial.engine, name)
    with trial.view() as view:
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
        if _named(trial, view, name, holder):
            clashes.append(f"name: {name}")
        if clashes:
            raise DuplicateName(
                f"Conflicting resource provider {', '.join(clashes)} already exists."
            )
        class_ids = view.class_ids_by_name()
        trait_ids = view.trait_ids_by_name()
    records = {rc: Record(rc, **a) for rc, a in member.inventories.items()}
    trial.check_inventories(uuid, records, class_ids)
    missing = sorted(set(member.traits) - trait_ids.keys())
    if missing:
        raise BadRequest(f"No such trait {', '.join(missing)}")
    trial.read_providers({uuid} | ({parent} if parent else set()))
    if copied is not None:
        trial.read_providers({copied})
    return {
        "op": "add",
        "provider": uuid,
        "name": name,
        "parent": parent,
        "inventories": amounts(records),
        "traits": sorted(set(member.traits)),
        "aggregates": list(member.aggregates),
    }


def _named(trial: Trial, view: SandboxView, name: str, holder: str | None) -> bool:
    """Whether a provider of the sandbox is called `name` (`holder`: the live
    one the database found by that name)."""
    if holder is not None and view.provider(holder) is not None:
        if holder not in trial.overlay.added:  # (not the live one made again)
            return True
    for uuid, made in trial.overlay.added.items():  # (compared exactly)
        if made["name"] == name and view.provider(uuid) is not None:
            return True
    return False


def copies(trial: Trial, template: str, count: int) -> Iterator[tuple[str, str, Callable]]:
    """The steps of `count` copies of the tree under `template`."""
    members = _template(trial, template)
    if members is None:
        missing = f"No resource provider with uuid {template} found"
        yield "add", template, lambda: _raise(NotFound(missing))
        return
    for _ in range(count):
        made = {m.uuid: str(uuidlib.uuid4()) for m in members}
        for m in members:
            copy = Member(
                made[m.uuid],
                made.get(m.parent) if m.parent else None,
                m.inventories,
                m.traits,
                m.aggregates,
            )
            yield "add", copy.uuid, lambda c=copy, m=m: add(trial, c, c.uuid, m.uuid)


def _template(trial: Trial, uuid: str) -> list[Member] | None:
    """The providers of the tree under `uuid` as they are in the sandbox,
    parents first (then by uuid); None when there is no such provider."""
    trial.reader.load_providers([uuid])
    with trial.view() as view:
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
    records = trial.records([u for u, *_ in found])
    return [
        Member(u, parent, amounts(records.get(u, {})), traits, aggs)
        for u, parent, traits, aggs in found
    ]


def _raise(error: Exception) -> dict:
    raise error
