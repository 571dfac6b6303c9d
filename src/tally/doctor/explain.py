"""Why would this inventory change be refused, and what makes it succeed?

The inventory pre-check (`inventory_check.check_change`) says which classes fall
short and who holds them; the audit classifies each holder against the compute
API. From both comes an ordered plan: settle the moves in flight (abort a stuck
live migration, confirm a finished resize), free orphans and stale migration holds,
and, the way that needs no cleanup, the largest safe `reserved` (which
nova-compute rewrites from its own configuration at its next update).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import audit as audits
from tally.doctor.inventory_check import InventoryCheck, Suggestion, check_change

RESERVED_WARNING = (
    "nova-compute rewrites `reserved` from its own configuration (reserved_host_cpus, "
    "reserved_host_memory_mb, reserved_host_disk_mb) at its next update: set it there too"
)


@dataclasses.dataclass(frozen=True)
class Holder:
    """A consumer holding a refused class on the provider, with its audit class."""

    consumer_uuid: str
    kind: str
    held: dict[str, int]  # class -> amount on this provider
    reason: str
    server: str | None = None


@dataclasses.dataclass(frozen=True)
class Explanation:
    check: InventoryCheck
    holders: tuple[Holder, ...] = ()
    plan: tuple[Suggestion, ...] = ()

    @property
    def refused(self) -> bool:
        return not self.check.ok

    def as_dict(self) -> dict[str, Any]:
        return {
            "refused": self.refused,
            "check": self.check.as_dict(),
            "holders": [dataclasses.asdict(h) for h in self.holders],
            "plan": [dataclasses.asdict(s) for s in self.plan],
        }


def explain_change(
    placement: PlacementClient,
    compute: ComputeClient,
    provider: str,
    asked: Mapping[str, Mapping[str, Any]],
) -> Explanation:
    """Judge `asked` (the provider's whole inventory after the change) and, when
    refused, classify who holds the capacity and plan the way out."""
    current = placement.inventories(provider)
    check = check_change(placement, provider, asked, current)
    if check.ok:
        return Explanation(check)
    report = audits.audit(placement, compute, provider=provider)
    refused = {c.resource_class for c in check.refused}
    holders = tuple(
        Holder(
            consumer_uuid=f.consumer_uuid,
            kind=f.kind,
            held={rc: n for rc, n in f.allocations.get(provider, {}).items() if rc in refused},
            reason=f.reason,
            server=f.server,
        )
        for f in report.consumers
        if set(f.allocations.get(provider, {})) & refused
    )
    return Explanation(check, holders, tuple(plan(check, report, provider)))


def plan(check: InventoryCheck, report: audits.Audit, provider: str) -> list[Suggestion]:
    """The ordered steps: moves first (what they hold comes back by itself), then
    the removable holds, then what is left of the shortfall, then `reserved`."""
    steps = []
    seen = set()
    for f in report.consumers:
        moving = f.kind == audits.MIGRATING or (f.kind == audits.LIVE and f.migration_status)
        if not moving or f.server in seen:
            continue
        seen.add(f.server)
        if f.migration_status == "finished":
            steps.append(
                Suggestion(
                    f"confirm the finished resize of {f.server} (releases its migration hold)",
                    f"openstack server resize confirm {f.server}",
                )
            )
        else:
            steps.append(
                Suggestion(
                    f"the move of {f.server} is {f.migration_status}: "
                    "wait for it, or abort it if it is stuck (the abort releases its claim)",
                    f"openstack server migration abort {f.server} {f.migration_id}",
                )
            )
    freed = [f for f in report.findings if audits.removable(report, f)]
    if freed:
        kinds = ", ".join(sorted({f.kind for f in freed}))
        steps.append(
            Suggestion(
                f"free {len(freed)} consumer(s) left behind ({kinds}) on this provider",
                f"tally audit --provider {provider} --delete --apply",
            )
        )
    for f in report.findings:
        if f.kind == audits.LEAKED_HOST:
            steps.append(
                Suggestion(
                    f"{f.consumer_uuid}: {f.reason}; once its part there is freed (and the "
                    "leaked provider deleted), give it allocations on the provider its "
                    "compute reports now",
                    f"tally heal --instance {f.consumer_uuid} --apply",
                )
            )
        elif f.kind == audits.DOUBLE_ALLOCATION and not audits.removable(report, f):
            steps.append(
                Suggestion(
                    f"{f.consumer_uuid}: {f.reason}; free the part on the provider that is "
                    "not its host (`tally audit --provider THAT --delete --apply`)"
                )
            )
    steps += _after_cleanup(check, report, provider)
    for s in check.suggestions:
        if s.command and "--amend" in s.command:
            steps.append(Suggestion(f"{s.text}; {RESERVED_WARNING}", s.command))
    return steps


def _after_cleanup(check: InventoryCheck, report: audits.Audit, provider: str) -> list[Suggestion]:
    """The shortfall the live servers alone still cause, per refused class."""
    live = [f for f in report.consumers if f.kind in (audits.LIVE, audits.MIGRATING)]
    steps = []
    for change in check.refused:
        rc = change.resource_class
        held = sum(f.allocations.get(provider, {}).get(rc, 0) for f in live)
        if change.capacity_asked is not None and held > change.capacity_asked:
            steps.append(
                Suggestion(
                    f"live servers alone hold {held} {rc}, more than the {change.capacity_asked} "
                    "asked: move some away first",
                    "tally drain HOST",
                )
            )
    return steps
