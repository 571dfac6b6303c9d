"""Why would this inventory change be refused, and what makes it succeed?

The inventory pre-check (`inventory_check.check_change`) says which classes fall
short and who holds them; the audit classifies every holder against the compute API.
From both comes a plan whose steps are computed one after another on the usage each
step leaves on the provider:

  1. settle the moves in flight (abort a live migration, confirm a finished resize);
  2. heal the servers accounted where they do not run (take back what a failed move
     holds on their host), and give servers of this host that hold nothing their
     flavor here (the books must be true, even when that adds usage);
  3. free what is safe to free here (orphans, stale migration holds, a double
     allocation's part off its host, servers' parts on a leaked provider);
  4. a leaked provider: once freed it is deleted; the compute service is re-created
     (it reports a new provider under the host's name) and its servers healed there;
  5. if live servers alone still hold more than asked: drain the host;
  6. retry the refused change.

Each step carries the exact command that performs it; running them in order is the
way out. Alternatives that change the request instead (a smaller `reserved`) are
listed apart.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import audit as audits
from tally.doctor import drain as drains
from tally.doctor.cloud import server_claims
from tally.doctor.heal import rewritten
from tally.doctor.inventory_check import InventoryCheck, check_change, largest_safe_reserved
from tally.doctor.traces import Histories, Trace

RESERVED_WARNING = (
    "nova-compute rewrites `reserved` from its own configuration (reserved_host_cpus, "
    "reserved_host_memory_mb, reserved_host_disk_mb) at its next update: set it there too"
)


@dataclasses.dataclass(frozen=True)
class ClassifiedHolder:
    """A consumer holding a refused class on the provider, classified as `tally
    audit` does (`kind`, `reason`), with its server and the trace of its hold."""

    consumer: str
    kind: str
    held: dict[str, int]  # class -> amount on this provider
    reason: str
    server: str | None = None
    history: Trace | None = None  # when, and by which request, its hold here was written


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the plan and the usage it leaves on the provider."""

    text: str
    command: str | None
    usage_after: dict[str, int]


@dataclasses.dataclass(frozen=True)
class Explanation:
    check: InventoryCheck
    holders: tuple[ClassifiedHolder, ...] = ()
    steps: tuple[Step, ...] = ()
    alternatives: tuple[Step, ...] = ()

    @property
    def refused(self) -> bool:
        return not self.check.ok

    def as_dict(self) -> dict[str, Any]:
        return {
            "refused": self.refused,
            "provider": self.check.provider_uuid,
            "provider_name": self.check.provider_name,
            "check": self.check.as_dict(),
            "holders": [dataclasses.asdict(h) for h in self.holders],
            "steps": [dataclasses.asdict(s) for s in self.steps],
            "alternatives": [dataclasses.asdict(s) for s in self.alternatives],
        }


def explain_change(
    placement: PlacementClient,
    compute: ComputeClient,
    provider: str,
    asked: Mapping[str, Mapping[str, Any]],
    retry: str,
    stuck_after: dt.timedelta = audits.STUCK_AFTER,
) -> Explanation:
    """Judge `asked` (the provider's whole inventory after the change); when refused,
    classify who holds the capacity and plan the way out, ending with `retry` (the
    command that makes the change)."""
    current = placement.inventories(provider)
    check = check_change(placement, provider, asked, current)
    if check.ok:
        return Explanation(check)
    report = audits.audit(placement, compute, provider=provider, stuck_after=stuck_after)
    refused = {c.resource_class for c in check.refused}
    histories = Histories(placement)
    holders = tuple(
        ClassifiedHolder(
            f.consumer_uuid,
            f.kind,
            {rc: n for rc, n in f.allocations.get(provider, {}).items() if rc in refused},
            f.reason,
            f.server,
            histories.trace(f.consumer_uuid, (provider,)),
        )
        for f in report.consumers
        if set(f.allocations.get(provider, {})) & refused
    )
    planner = _Planner(placement, compute, report, check, provider, asked)
    return Explanation(check, holders, *planner.plan(retry))


class _Planner:
    def __init__(
        self,
        placement: PlacementClient,
        compute: ComputeClient,
        report: audits.Audit,
        check: InventoryCheck,
        provider: str,
        asked: Mapping[str, Mapping[str, Any]],
    ) -> None:
        self.placement, self.compute, self.report = placement, compute, report
        self.check, self.rp, self.asked = check, provider, asked
        self.books, self.cloud = report.books, report.cloud
        self.usage = dict(placement.usages(provider))
        self.steps: list[Step] = []
        self.done: set[str] = set()  # consumers an earlier step already settled

    def plan(self, retry: str) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
        self._settle_moves()
        self._heal_misplaced()
        self._free_safe()
        self._replace_leaked()
        if not self._fits():
            self._drain()
        text = "retry the change"
        if self._leaked:  # the provider is gone; its host reports a new one by that name
            text += f" on the provider {self._host} reports now (found by its name)"
            retry = retry.replace(self.rp, self._host or self.rp, 1)
        if any(c.reserved_asked for c in self.check.refused) and self._host in self.cloud.nodes:
            text += f"; {RESERVED_WARNING}"
        self._step(text, retry, {})
        return tuple(self.steps), tuple(self._alternatives())

    # ------------------------------------------------------------ the steps

    def _settle_moves(self) -> None:
        for m in self.cloud.migrations:
            if m.over or m.server in self.done:
                continue
            server = self.cloud.servers.get(m.server)
            holds_here = self.rp in self.books.holdings.get(m.uuid or "", {}) or (
                self.rp in self.books.holdings.get(m.server, {})
            )
            if not holds_here:
                continue
            self.done |= {m.server, m.uuid or ""}
            command = audits.settle_command(m, self.cloud)
            who = server.label if server else m.server
            if command is None:
                why = audits.unsettled(m, self.cloud)
                text = f"the move {m.id} of {who} is {m.status} and {why}: wait for it to end"
                self._step(text, None, {})
            elif "confirm" in command:
                freed = self.books.holdings.get(m.uuid or "", {}).get(self.rp, {})
                self._step(f"confirm the finished resize of {who}", command, _neg(freed))
            else:  # an abort gives the source back to the server, frees the destination
                at_dest = self.books.name(self.rp) == m.dest_host
                freed = self.books.holdings.get(m.server, {}).get(self.rp, {}) if at_dest else {}
                text = f"abort the live migration {m.id} of {who} ({m.status})"
                self._step(text, command, _neg(freed))

    def _heal_misplaced(self) -> None:
        for f in self.report.consumers:
            if f.kind not in (audits.MISPLACED, audits.UNALLOCATED) or f.server in self.done:
                continue
            if f.kind == audits.UNALLOCATED and f.host_provider is None:
                continue  # its host lost its provider: see _replace_leaked
            self.done.add(f.server or "")
            server = self.cloud.servers[f.server or ""]
            stale = self._stale_hold(f)
            change: dict[str, int] = _neg(f.allocations.get(self.rp, {}))
            if f.host_provider == self.rp and stale is None:  # its flavor comes here
                wanted = server_claims(self.compute, server)
                for rc, n in rewritten(self.books, f.allocations, self.rp, wanted)[self.rp].items():
                    change[rc] = change.get(rc, 0) + n
            self.done.add(stale or "")  # a stale hold taken back stays, as the server's
            where = self.books.name(f.host_provider or "") if f.host_provider else server.host
            text = f"heal {server.label}: account it on {where}, where it runs"
            if stale:
                text += f" (it takes back what its failed move {stale} holds there)"
            self._step(text, f"tally heal --instance {server.id} --apply", change)

    def _free_safe(self) -> None:
        plan = audits.remove(self.placement, self.report, apply=False)
        writes = [w for w in plan.writes if w.target not in self.done and not w.delete_provider]
        if not writes:
            return
        freed: dict[str, int] = {}
        for write in writes:
            for rc, n in write.freed.get(self.rp, {}).items():
                freed[rc] = freed.get(rc, 0) + n
        kinds = ", ".join(sorted({w.kind for w in writes}))
        names = ", ".join(sorted(w.target for w in writes))
        text = f"free what {len(writes)} consumer(s) hold here ({kinds}: {names})"
        if self._leaked:
            text += f", then delete the leaked provider {self.books.name(self.rp)}"
        self._step(text, f"tally audit --provider {self.rp} --delete --apply", _neg(freed))

    def _replace_leaked(self) -> None:
        if not self._leaked:
            return
        host = self._host
        self._step(*audits.restore_host(self.cloud, host or ""), {})
        stranded = [
            s
            for s in self.cloud.servers.values()
            if s.host == host and s.id not in self.done and s.status not in ("SHELVED_OFFLOADED",)
        ]
        if stranded:
            names = ", ".join(s.label for s in stranded)
            text = f"give {names} their flavor on the new provider of {host}"
            gained: dict[str, int] = {}
            for server in stranded:
                for rc, n in server_claims(self.compute, server).items():
                    gained[rc] = gained.get(rc, 0) + n
            self._step(text, "tally heal --apply", gained)

    def _drain(self) -> None:
        text = (
            f"live servers alone still hold more than asked: move them off {self._host}; "
            + drains.stays_disabled(self._host or self.rp)
        )
        self._step(text, f"tally drain {self._host} --apply", _neg(self.usage))

    def _alternatives(self) -> list[Step]:
        """Instead of the plan: the largest `reserved` that fits what is held now."""
        found = []
        for change in self.check.refused:
            rc, record = change.resource_class, self.asked.get(change.resource_class)
            if record is None:
                continue
            total, ratio = int(record["total"]), float(record.get("allocation_ratio", 1.0))
            safe = largest_safe_reserved(total, ratio, change.used)
            if safe is None:
                continue
            command = (
                f"tally provider inventory set {self.rp} --amend --resource {rc}={total}:{safe}"
            )
            text = (
                f"reserve at most {safe} {rc} instead: it fits the {change.used} held now, "
                f"with nothing cleaned up; {RESERVED_WARNING}"
            )
            found.append(Step(text, command, {rc: change.used}))
        return found

    # ------------------------------------------------------------ the state

    @property
    def _leaked(self) -> bool:
        return self.rp in self.report.leaked_providers

    @property
    def _host(self) -> str | None:
        return self.books.name(self.rp)

    def _stale_hold(self, finding: audits.Finding) -> str | None:
        for f in self.report.consumers:
            if f.kind == audits.STALE_MIGRATION and f.server == finding.server and f.taken_back:
                return f.consumer_uuid
        return None

    def _step(self, text: str, command: str | None, change: Mapping[str, int]) -> None:
        for rc, n in change.items():
            self.usage[rc] = max(0, self.usage.get(rc, 0) + n)
        self.steps.append(Step(text, command, dict(self.usage)))

    def _fits(self) -> bool:
        for change in self.check.refused:
            used = self.usage.get(change.resource_class, 0)
            if used > (change.capacity_asked or 0):
                return False
        return True


def _neg(resources: Mapping[str, int]) -> dict[str, int]:
    return {rc: -n for rc, n in resources.items()}
