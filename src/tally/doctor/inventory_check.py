"""Would this inventory change be refused? The operator's pre-check, over the public API.

Tally's capacity guard refuses an inventory write that lowers a class's capacity
below what is allocated from it, or removes a class that allocations hold.
Upstream Placement refuses only the removal and accepts the shrink, leaving the
provider over-committed. This module applies Tally's rule from the outside: it
reads the provider's inventories, usages and allocations, and each holding
consumer's allocations (for its project, type, and whether it also holds
allocations elsewhere, the mark of a move's double allocation), so it works
against any Placement. It also explains a 409 the server already gave, from the
`usage` member of Tally's error or, for upstream's bare message, from a fresh read.

Capacity is Placement's: `int((total - reserved) * allocation_ratio)`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from tally.amounts import capacity as capacity_of
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient

HOLDERS_SHOWN = 10  # consumers described per class; the rest are counted
Inventory = Mapping[str, Mapping[str, Any]]  # class -> {total, reserved, allocation_ratio, ...}


def capacity(record: Mapping[str, Any]) -> int:
    """What may be allocated from one inventory record."""
    total = int(record.get("total", 0))
    reserved = int(record.get("reserved", 0) or 0)
    return capacity_of(total, reserved, float(record.get("allocation_ratio", 1.0) or 1.0))


def largest_safe_reserved(total: int, allocation_ratio: float, used: int) -> int | None:
    """The largest `reserved` keeping capacity at or above `used`; None if even
    reserved 0 is too little."""
    if allocation_ratio <= 0:
        return None
    fits = lambda reserved: capacity_of(total, reserved, allocation_ratio) >= used  # noqa: E731
    reserved = min(total, total - math.ceil(used / allocation_ratio))
    while reserved >= 0 and not fits(reserved):
        reserved -= 1
    while reserved + 1 <= total and fits(reserved + 1):
        reserved += 1
    return reserved if reserved >= 0 else None


def smallest_safe_total(reserved: int, allocation_ratio: float, used: int) -> int | None:
    """The smallest `total` whose capacity (with this reserved and ratio) covers `used`."""
    if allocation_ratio <= 0:
        return None
    total = reserved + math.floor(used / allocation_ratio)
    while capacity_of(total, reserved, allocation_ratio) < used:
        total += 1
    return total


@dataclasses.dataclass(frozen=True)
class RefusedClassHolder:
    """A consumer holding some of a class the change is refused for, on the provider."""

    consumer: str
    amount: int
    consumer_type: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    other_providers: tuple[str, ...] = ()  # providers besides this one it holds allocations on

    @property
    def also_elsewhere(self) -> bool:
        return bool(self.other_providers)


@dataclasses.dataclass(frozen=True)
class ClassChange:
    """One class of the provider before and after the change."""

    resource_class: str
    used: int
    capacity_now: int | None  # None: the class is new
    capacity_asked: int | None  # None: the change removes the class
    refused: bool = False
    holders: tuple[RefusedClassHolder, ...] = ()  # of a refused class, largest first
    consumers: int = 0  # how many consumers hold it (holders lists the largest)
    total_asked: int | None = None
    reserved_asked: int | None = None
    allocation_ratio_asked: float | None = None
    safe_reserved: int | None = None  # largest reserved with capacity >= used (refused shrink)
    safe_total: int | None = None  # smallest total with capacity >= used, at the asked reserved

    @property
    def removed(self) -> bool:
        return self.capacity_asked is None

    @property
    def gap(self) -> int:
        """How much capacity is missing for what is used (0 when it fits)."""
        return max(0, self.used - (self.capacity_asked or 0))


@dataclasses.dataclass(frozen=True)
class Suggestion:
    text: str
    command: str | None = None


@dataclasses.dataclass(frozen=True)
class InventoryCheck:
    """The verdict on an inventory change, with what would resolve a refusal."""

    provider_uuid: str
    provider_name: str | None
    generation: int | None
    classes: tuple[ClassChange, ...]
    suggestions: tuple[Suggestion, ...] = ()
    server_detail: str | None = None  # the server's message, when explaining its 409

    @property
    def refused(self) -> tuple[ClassChange, ...]:
        return tuple(c for c in self.classes if c.refused)

    @property
    def ok(self) -> bool:
        return not self.refused

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ok"] = self.ok
        for item, change in zip(data["classes"], self.classes, strict=True):
            item.update(removed=change.removed, gap=change.gap)
        return data


# ---------------------------------------------------------------- entry points


def check_change(
    client: PlacementClient,
    provider_uuid: str,
    asked: Inventory,
    current: Mapping[str, Any] | None = None,
    holders_shown: int = HOLDERS_SHOWN,
) -> InventoryCheck:
    """Judge replacing the provider's whole inventory with `asked` (a removal is a
    class missing from it) by Tally's rule: refused when a class allocations hold
    is removed, or its capacity is lowered below what is used. `current` is the
    body of `GET .../inventories` when the caller has read it already."""
    if current is None:
        current = client.inventories(provider_uuid)
    now: Inventory = current["inventories"]
    used = client.usages(provider_uuid)
    refused = set()
    for rc, amount in used.items():
        if amount <= 0:
            continue
        new = capacity(asked[rc]) if rc in asked else None
        removed = new is None and rc in now
        lowered = new is not None and new < amount and new < _capacity_of(now, rc)
        if removed or lowered:
            refused.add(rc)
    return _report(client, provider_uuid, asked, now, used, refused, current, holders_shown)


def explain_refusal(
    client: PlacementClient,
    provider_uuid: str,
    asked: Inventory,
    error: PlacementError,
    holders_shown: int = HOLDERS_SHOWN,
) -> InventoryCheck:
    """Explain a 409 the server gave to an inventory change: the classes it names,
    with their usage and holders (from Tally's `usage` member, or read afresh for
    upstream's bare message), and the same suggestions as the pre-check."""
    current = client.inventories(provider_uuid)
    used = dict(client.usages(provider_uuid))
    account = {u["resource_class"]: u for u in error.usage or [] if "resource_class" in u}
    if account:
        used.update({rc: int(u.get("used", used.get(rc, 0))) for rc, u in account.items()})
        named = set(account)
    else:
        match = re.search(r"Inventory for '([^']*)'", error.detail)
        named = {rc.strip() for rc in match.group(1).split(",")} if match else set()
        named = named or {rc for rc, amount in used.items() if amount > 0}
    check = _report(
        client, provider_uuid, asked, current["inventories"], used, named, current, holders_shown
    )
    return dataclasses.replace(check, server_detail=error.detail)


# ---------------------------------------------------------------- internals


def _capacity_of(inventory: Inventory, rc: str) -> int:
    return capacity(inventory[rc]) if rc in inventory else 0


def _report(
    client: PlacementClient,
    rp: str,
    asked: Inventory,
    now: Inventory,
    used: Mapping[str, int],
    refused: set[str],
    current: Mapping[str, Any],
    holders_shown: int,
) -> InventoryCheck:
    held = client.provider_allocations(rp) if refused else {}
    ranked = {rc: _ranked(held, rc) for rc in refused}
    wanted = {c for holders in ranked.values() for c, _ in holders[:holders_shown]}
    details = {consumer: _consumer(client, consumer) for consumer in sorted(wanted)}
    classes = []
    for rc in sorted(set(now) | set(asked) | refused):
        record = asked.get(rc)
        change = ClassChange(
            resource_class=rc,
            used=int(used.get(rc, 0)),
            capacity_now=_capacity_of(now, rc) if rc in now else None,
            capacity_asked=capacity(record) if record is not None else None,
            total_asked=int(record["total"]) if record and "total" in record else None,
            reserved_asked=int(record.get("reserved", 0)) if record else None,
            allocation_ratio_asked=float(record.get("allocation_ratio", 1.0)) if record else None,
        )
        if rc in refused:
            change = _refused(change, ranked[rc], details, rp, holders_shown)
        classes.append(change)
    name = None
    if refused:
        name = client.provider(rp).get("name")
    return InventoryCheck(
        provider_uuid=rp,
        provider_name=name,
        generation=current.get("resource_provider_generation"),
        classes=tuple(classes),
        suggestions=tuple(_suggestions(rp, [c for c in classes if c.refused])),
    )


def _ranked(held: Mapping[str, Mapping[str, int]], rc: str) -> list[tuple[str, int]]:
    """(consumer, amount) of the class on the provider, largest first."""
    found = [(c, int(res[rc])) for c, res in held.items() if res.get(rc)]
    return sorted(found, key=lambda item: (-item[1], item[0]))


def _consumer(client: PlacementClient, consumer: str) -> dict[str, Any]:
    try:
        return client.consumer_allocations(consumer)
    except PlacementError:  # gone since we read the provider's allocations
        return {}


def _refused(
    change: ClassChange,
    holders: list[tuple[str, int]],
    details: Mapping[str, Mapping[str, Any]],
    rp: str,
    shown: int,
) -> ClassChange:
    described = []
    for consumer, amount in holders[:shown]:
        body = details.get(consumer, {})
        providers = body.get("allocations") or {}
        described.append(
            RefusedClassHolder(
                consumer=consumer,
                amount=amount,
                consumer_type=body.get("consumer_type"),
                project_id=body.get("project_id"),
                user_id=body.get("user_id"),
                other_providers=tuple(sorted(p for p in providers if p != rp)),
            )
        )
    safe_reserved = safe_total = None
    if not change.removed and change.total_asked is not None:
        ratio = change.allocation_ratio_asked or 1.0
        safe_reserved = largest_safe_reserved(change.total_asked, ratio, change.used)
        safe_total = smallest_safe_total(change.reserved_asked or 0, ratio, change.used)
    return dataclasses.replace(
        change,
        refused=True,
        holders=tuple(described),
        consumers=len(holders),
        safe_reserved=safe_reserved,
        safe_total=safe_total,
    )


def _suggestions(rp: str, refused: list[ClassChange]) -> list[Suggestion]:
    """What resolves a refusal: a safe `reserved` (or total) per class, then freeing
    consumers confirmed gone, after an audit."""
    found = [_class_suggestion(rp, change) for change in refused]
    holders = {h.consumer: h for c in refused for h in c.holders}
    for holder in holders.values():
        why = "confirmed gone (deleted server, finished migration)"
        if holder.also_elsewhere:
            why += "; it also holds allocations on another provider, as a moving server does"
        found.append(
            Suggestion(
                f"free {holder.consumer} here only if it is {why}",
                f"tally provider allocation unset {holder.consumer} --provider {rp}",
            )
        )
    if refused:
        found.append(
            Suggestion(
                "confirm which consumers are orphans (no server, no migration) before "
                "freeing anything",
                f"tally audit --provider {rp}",
            )
        )
    return found


def _class_suggestion(rp: str, change: ClassChange) -> Suggestion:
    rc = change.resource_class
    if change.removed:
        return Suggestion(
            f"{rc} cannot be removed while consumers hold {change.used} of it: "
            "move or free those allocations first, or keep the inventory"
        )
    if change.safe_reserved is not None:
        return Suggestion(
            f"reserve at most {change.safe_reserved} {rc}: capacity stays at or above "
            f"the {change.used} used, and nothing needs cleaning up",
            f"tally provider inventory set {rp} --amend "
            f"--resource {rc}={change.total_asked}:{change.safe_reserved}",
        )
    if change.safe_total is None:
        return Suggestion(f"give {rc} a capacity of at least the {change.used} used")
    return Suggestion(
        f"a total of at least {change.safe_total} {rc} (reserved "
        f"{change.reserved_asked}) covers the {change.used} used",
        f"tally provider inventory set {rp} --amend "
        f"--resource {rc}={change.safe_total}:{change.reserved_asked}",
    )
