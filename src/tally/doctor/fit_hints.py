"""What would make a query that found nothing fit: the verdict's closest misses
(`GET /tally/v1/allocation_candidates/why`) joined with what the doctor knows of
those trees. Each hint is one action on one tree that, taken, removes one of the
reasons that tree missed: holds the audit can free (orphans, stale migrations,
leaked hosts) or its findings' fixes give back (a hold misplaced by a failed move:
`tally heal`), a device whose `reserved` is its `total` (a one-time device used
up), an allocation ratio, a compute service that is disabled, one missing trait
or aggregate. A tree with several reasons needs a hint for each.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.errors import ClientError
from tally.clients.placement import PlacementClient
from tally.doctor import audit as audits
from tally.doctor.fill import DISABLED

_RESOURCE = re.compile(r"^resources(?P<s>[^=]*)=(?P<rc>[A-Z0-9_]+):(?P<n>\d+): ")
_TRAIT = re.compile(r"^required(?P<s>[^=]*)=(?P<t>[A-Z0-9_]+): not met$")
_AGGREGATE = re.compile(r"^member_of(?P<s>[^=]*)=(?P<a>[0-9a-f-]{36}): not met$")


@dataclasses.dataclass(frozen=True)
class Hint:
    tree: str  # root provider uuid
    name: str | None
    reason: str  # the verdict's reason it answers
    text: str
    command: str | None  # None: an operator action with no command to print


def fit_hints(
    verdict: Mapping[str, Any],
    placement: PlacementClient,
    compute: ComputeClient | None = None,
) -> list[Hint]:
    """Hints for the verdict's closest misses, in their order."""
    found: list[Hint] = []
    for miss in verdict.get("closest", ()):
        tree = _Tree(placement, compute, miss["root"], miss.get("name"))
        for reason in miss["reasons"]:
            hint = tree.hint(reason)
            if hint is not None:
                found.append(hint)
    return found


def _capacity(record: Mapping[str, Any]) -> int:
    return int((record["total"] - record["reserved"]) * record["allocation_ratio"])


class _Tree:
    """One tree's providers, inventories and usages, read when first asked."""

    def __init__(
        self, placement: PlacementClient, compute: ComputeClient | None, root: str, name: str | None
    ) -> None:
        self.placement, self.compute, self.root, self.name = placement, compute, root, name
        self._providers: list[dict[str, Any]] | None = None
        self._freed: dict[str, dict[str, int]] | None = None
        self._audit: audits.Audit | None = None

    def providers(self) -> list[dict[str, Any]]:
        if self._providers is None:
            self._providers = self.placement.get("/resource_providers", {"in_tree": self.root})[
                "resource_providers"
            ]
        return self._providers

    def hint(self, reason: str) -> Hint | None:
        if m := _RESOURCE.match(reason):
            return self._resource(reason, m["rc"], int(m["n"]))
        if m := _TRAIT.match(reason):
            return self._trait(reason, m["t"])
        if reason.startswith("required") and f"=!{DISABLED}: not met" in reason:
            return self._disabled(reason)
        if m := _AGGREGATE.match(reason):
            return self._aggregate(reason, m["a"])
        return None

    def _make(self, reason: str, text: str, command: str | None) -> Hint:
        return Hint(self.root, self.name, reason, text, command)

    # -- a class without room -------------------------------------------------

    def _resource(self, reason: str, rc: str, asked: int) -> Hint | None:
        """The first of: holds the audit frees, a used-up device, the ratio."""
        stock = []
        for p in self.providers():
            inventory = self.placement.get(f"/resource_providers/{p['uuid']}/inventories")
            record = inventory["inventories"].get(rc)
            if record is not None:
                used = self.placement.usages(p["uuid"]).get(rc, 0)
                stock.append((p, record, int(used)))
        for p, record, used in stock:
            if not record["min_unit"] <= asked <= record["max_unit"]:
                continue
            capacity = _capacity(record)
            freed = self.freed().get(p["uuid"], {}).get(rc, 0)
            if freed and used - freed + asked <= capacity:
                return self._make(
                    reason,
                    f"{self._named(p)}: the audit frees {freed} {rc} held by consumers no server "
                    f"owns; then {capacity - used + freed} are free",
                    f"tally audit --provider {self.root} --delete --apply",
                )
        for p, record, used in stock:
            for finding in self.findings():
                held = finding.allocations.get(p["uuid"], {}).get(rc, 0)
                if held and finding.fix and used - held + asked <= _capacity(record):
                    return self._make(
                        reason,
                        f"{self._named(p)}: the audit finds {finding.kind} {finding.consumer_uuid} "
                        f"holding {held} {rc} here ({finding.reason}); its fix",
                        finding.fix,
                    )
        for p, record, used in stock:
            total, reserved = record["total"], record["reserved"]
            if (
                reserved
                and reserved == total
                and used + asked <= total * record["allocation_ratio"]
            ):
                return self._make(
                    reason,
                    f"{self._named(p)}: {rc} has reserved = total ({total}): a one-time device "
                    "used up; once it is made ready again",
                    f"tally provider inventory set {p['uuid']} --resource {rc}:reserved=0 --amend",
                )
        for p, record, used in stock:
            room = record["total"] - record["reserved"]
            if room > 0 and record["min_unit"] <= asked <= record["max_unit"]:
                ratio = math.ceil((used + asked) / room * 100) / 100
                if ratio > record["allocation_ratio"]:
                    return self._make(
                        reason,
                        f"{self._named(p)}: {rc} allocation_ratio {record['allocation_ratio']} "
                        f"-> {ratio} would make room (oversubscribing it)",
                        f"tally provider inventory set {p['uuid']} "
                        f"--resource {rc}:allocation_ratio={ratio} --amend",
                    )
        return None

    def audit(self) -> audits.Audit | None:
        """The audit of this tree (None without a compute API to audit against)."""
        if self._audit is None and self.compute is not None:
            try:
                self._audit = audits.audit(self.placement, self.compute, provider=self.root)
            except ClientError:
                self.compute = None
        return self._audit

    def findings(self) -> tuple[audits.Finding, ...]:
        report = self.audit()
        return () if report is None else report.findings

    def freed(self) -> dict[str, dict[str, int]]:
        """Per provider of the tree, what `tally audit --delete` would free."""
        if self._freed is None:
            self._freed = {}
            report = self.audit()
            for write in () if report is None else audits.remove(self.placement, report).writes:
                for rp, held in write.freed.items():
                    mine = self._freed.setdefault(rp, {})
                    for rc, n in held.items():
                        mine[rc] = mine.get(rc, 0) + n
        return self._freed

    # -- traits, services, aggregates -----------------------------------------

    def _trait(self, reason: str, trait: str) -> Hint:
        root = self.placement.get(f"/resource_providers/{self.root}/traits")["traits"]
        words = " ".join(f"--trait {t}" for t in sorted({*root, trait}))
        return self._make(
            reason,
            f"{self._named()} lacks {trait} (if the host has it)",
            f"tally provider trait set {self.root} {words}",
        )

    def _disabled(self, reason: str) -> Hint:
        host = self.name or self.root
        return self._make(
            reason,
            f"{host}: its compute service is disabled (COMPUTE_STATUS_DISABLED)",
            f"openstack compute service set --enable {host} nova-compute",
        )

    def _aggregate(self, reason: str, aggregate: str) -> Hint:
        held = self.placement.get(f"/resource_providers/{self.root}/aggregates")["aggregates"]
        words = " ".join(f"--aggregate {a}" for a in sorted({*held, aggregate}))
        return self._make(
            reason,
            f"{self._named()} is not in aggregate {aggregate} (if the project may use it)",
            f"tally provider aggregate set {self.root} {words}",
        )

    def _named(self, provider: Mapping[str, Any] | None = None) -> str:
        if provider is None or provider["uuid"] == self.root:
            return self.name or self.root
        return f"{provider.get('name') or provider['uuid']} (in {self.name or self.root})"
