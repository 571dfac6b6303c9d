"""The capacity guard of an inventory write (see tally.placement.ledger.inventory):
which classes a write would leave short, and the 409 that names their holders."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tally.db import schema as t
from tally.placement.error_types import InventoryInUse

if TYPE_CHECKING:
    from tally.placement.ledger.inventory_record import Record

log = logging.getLogger("tally.placement.inventory")

UPDATE_CONFLICT = "update conflict: "  # upstream's opening of a refused PUT
CONSUMERS_SHOWN = 5  # consumers named per class in an in-use error; the rest are counted


@dataclasses.dataclass(frozen=True)
class ShortfallHolder:
    """A consumer holding some of the class a write would leave short."""

    consumer: str
    amount: int
    consumer_type: str | None
    project_id: str | None

    def line(self) -> str:
        kind = f"type {self.consumer_type}" if self.consumer_type else "unknown type"
        project = f"project {self.project_id}" if self.project_id else "unknown project"
        return f"  {self.amount} by consumer {self.consumer} ({kind}, {project})"

    def as_dict(self) -> dict[str, Any]:
        """As the error's `usage` member lists it (the consumer under `uuid`)."""
        return {
            "uuid": self.consumer,
            "amount": self.amount,
            "consumer_type": self.consumer_type,
            "project_id": self.project_id,
        }


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """A class the write would leave short: `removed`, or lowered below usage."""

    resource_class: str
    used: int
    capacity: int
    removed: bool
    holders: tuple[ShortfallHolder, ...]
    consumers: int

    def summary(self) -> str:
        if self.removed:
            return f"{self.used} used, the inventory cannot be removed"
        return f"{self.used} used, new capacity {self.capacity}"

    def held(self) -> str:
        """`, held by N consumers (largest <uuid>: N)`."""
        plural = "s" if self.consumers != 1 else ""
        first = self.holders[0] if self.holders else None
        largest = f" (largest {first.consumer}: {first.amount})" if first else ""
        return f", held by {self.consumers} consumer{plural}{largest}"

    def lines(self) -> list[str]:
        plural = "s" if self.consumers != 1 else ""
        head = f"{self.resource_class} is held by {self.consumers} consumer{plural}"
        lines = [f"{head}, largest first:"]
        lines += [holder.line() for holder in self.holders]
        rest = self.consumers - len(self.holders)
        if rest > 0:
            lines.append(f"  and {rest} more consumer{'s' if rest != 1 else ''}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "resource_class": self.resource_class,
            "used": self.used,
            "capacity": self.capacity,
            "removed": self.removed,
            "consumers": [h.as_dict() for h in self.holders],
            "more_consumers": self.consumers - len(self.holders),
        }


def guard(
    conn: sa.Connection,
    provider: sa.Row,
    before: dict[str, Record],
    after: dict[str, Record],
    usage: dict[str, tuple[int, int, int]],
    refuse_lowering: bool,
    opening: str,
) -> list[str]:
    """Refuse the write if it takes away what allocations hold; else the
    classes it leaves over capacity (to warn about once written). `usage`: class
    name -> (class id, used, allocation rows) on the provider, read after it was
    locked."""
    return judge(
        provider.uuid,
        before,
        after,
        usage,
        refuse_lowering,
        opening,
        lambda class_id: _holders(conn, provider.id, class_id),
    )


def judge(
    provider_uuid: str,
    before: dict[str, Record],
    after: dict[str, Record],
    usage: dict[str, tuple[int, int, int]],
    refuse_lowering: bool,
    opening: str,
    holders: Callable[[int], tuple[tuple[ShortfallHolder, ...], int]],
) -> list[str]:
    """`guard` with the holders of a class told by `holders(class id)` (the
    largest CONSUMERS_SHOWN, largest first then by uuid, and how many there are):
    the write path reads them in its transaction, a sandbox (ledger.sandbox) from
    its overlay."""
    removed = [rc for rc in before if rc not in after and usage.get(rc, (0, 0, 0))[2] > 0]
    over = [
        rc
        for rc, new in after.items()
        if new is not before.get(rc) and usage.get(rc, (0, 0, 0))[1] > new.capacity
    ]
    lowered = [
        rc for rc in over if after[rc].capacity < (before[rc].capacity if rc in before else 0)
    ]
    refused = removed + (lowered if refuse_lowering else [])
    if not refused:
        return over
    refused.sort(key=lambda rc: usage[rc][0])
    shortfalls = [_shortfall(rc, usage[rc], after.get(rc), holders) for rc in refused]
    error = _in_use(provider_uuid, shortfalls, opening)
    log.warning(
        "Refused inventory change on resource provider %s: %s",
        provider_uuid,
        "; ".join(f"{s.resource_class} {s.summary()}" for s in shortfalls),
    )
    raise error


def _holders(
    conn: sa.Connection, provider_id: int, class_id: int
) -> tuple[tuple[ShortfallHolder, ...], int]:
    """The largest holders of a class on a provider, and how many hold it."""
    a, c, ct = t.allocations, t.consumers, t.consumer_types
    held = (a.c.resource_provider_id == provider_id, a.c.resource_class_id == class_id)
    amount = sa.func.sum(a.c.used).label("amount")
    rows = conn.execute(
        sa.select(a.c.consumer_id, amount, ct.c.name, c.c.project_id)
        .select_from(
            a.outerjoin(c, c.c.uuid == a.c.consumer_id).outerjoin(
                ct, ct.c.id == c.c.consumer_type_id
            )
        )
        .where(*held)
        .group_by(a.c.consumer_id, ct.c.name, c.c.project_id)
        .order_by(amount.desc(), a.c.consumer_id)
        .limit(CONSUMERS_SHOWN)
    ).all()
    consumers = conn.execute(
        sa.select(sa.func.count(sa.distinct(a.c.consumer_id))).where(*held)
    ).scalar_one()
    return tuple(ShortfallHolder(r[0], int(r[1]), r[2], r[3]) for r in rows), int(consumers)


def _shortfall(
    rc: str,
    usage: tuple[int, int, int],
    new: Record | None,
    holders: Callable[[int], tuple[tuple[ShortfallHolder, ...], int]],
) -> Shortfall:
    largest, consumers = holders(usage[0])
    return Shortfall(
        resource_class=rc,
        used=usage[1],
        capacity=new.capacity if new is not None else 0,
        removed=new is None,
        holders=largest,
        consumers=consumers,
    )


def _in_use(uuid: str, shortfalls: list[Shortfall], opening: str) -> InventoryInUse:
    """409 naming, per class, the usage, the capacity asked for and the largest
    holders; the same facts as data in the error's `usage` member.

    Clients that show one line of a detail show its last (osc-placement keeps
    `detail.split('\\n')[-1]`), and clients that match upstream's sentence match
    that line too: so the last line carries the essentials on its own, opening
    with upstream's words for the path, and the holders' list stands above it."""
    names = ", ".join(s.resource_class for s in shortfalls)
    one = len(shortfalls) == 1
    summary = "; ".join(
        s.summary() if one else f"{s.resource_class} {s.summary()}" for s in shortfalls
    )
    essentials = "; ".join(
        (s.summary() if one else f"{s.resource_class} {s.summary()}") + s.held() for s in shortfalls
    )
    sentence = f"Inventory for '{names}' on resource provider '{uuid}' in use"
    lines = [f"{sentence}: {summary}"]
    for shortfall in shortfalls:
        lines += shortfall.lines()
    if any(not s.removed for s in shortfalls):
        lines.append(
            "Free those allocations first (or set over_capacity = allow to accept "
            "an over-committed provider)."
        )
    lines.append(f"{opening}{sentence}. {essentials}.")
    return InventoryInUse("\n".join(lines), usage=[s.as_dict() for s in shortfalls])
