"""What would make a query that found nothing fit: the verdict's closest misses
(`GET /tally/v1/allocation_candidates/why`) joined with what the doctor knows of
those trees. Each hint is one action on one tree that, taken, removes one of the
reasons that tree missed, and says what it frees there:

  - holds the audit frees (orphans, stale migration holds, the part of a double
    allocation off its host), or a finding's fix gives back (`tally heal` for a hold
    misplaced by a failed move, confirming a finished resize);
  - a live migration in flight (hung, or not yet known to be) whose destination
    claim holds the room: aborting it frees it;
  - a provider left by a deleted compute service, keeping the name the service's new
    provider needs: freed and deleted, the service reports a new one;
  - a compute service that is down (nothing is scheduled there; an evacuated
    server's hold there goes when nova-compute starts again) or disabled;
  - a device whose `reserved` is its `total` (a one-time device used up), an
    allocation ratio, one missing trait or aggregate.

A tree with several reasons needs a hint for each. Hints that set the books right
come first, then those that bring back a host or a device, then the conditional
ones (a trait, an aggregate), and last oversubscribing: in each, the verdict's order.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.errors import ClientError
from tally.clients.placement import PlacementClient
from tally.doctor import audit as audits
from tally.doctor.cloud import Books
from tally.doctor.drain import enable_command
from tally.doctor.fill import DISABLED

_RESOURCE = re.compile(r"^resources(?P<s>[^=]*)=(?P<rc>[A-Z0-9_]+):(?P<n>\d+): ")
_TRAIT = re.compile(r"^required(?P<s>[^=]*)=(?P<t>[A-Z0-9_]+): not met$")
_AGGREGATE = re.compile(r"^member_of(?P<s>[^=]*)=(?P<a>[0-9a-f-]{36}): not met$")
# the order hints come in: set the books right, bring a host or device back, the
# conditional ones, then oversubscribing
BOOKS, RESTORE, CONDITIONAL, OVERSUBSCRIBE = range(4)
# an evacuation in one of these is undone at the source when nova-compute starts there
EVACUATED = ("accepted", "pre-migrating", "done")


@dataclasses.dataclass(frozen=True)
class Hint:
    tree: str  # root provider uuid
    name: str | None
    reason: str  # the verdict's reason it answers
    text: str
    command: str | None  # None: an operator action with no command to print


@dataclasses.dataclass(frozen=True)
class _Stock:
    """One provider of the tree with `rc` in its inventory."""

    provider: dict[str, Any]
    record: dict[str, Any]
    used: int

    @property
    def capacity(self) -> int:
        return _capacity(self.record)

    def fits(self, asked: int, freed: int = 0) -> bool:
        return self.used - freed + asked <= self.capacity

    def free_after(self, freed: int) -> int:
        return self.capacity - self.used + freed


def fit_hints(
    verdict: Mapping[str, Any],
    placement: PlacementClient,
    compute: ComputeClient | None = None,
) -> list[Hint]:
    """Hints for the verdict's closest misses: those that set the books right first,
    oversubscribing last (see the module's docstring)."""
    found: list[tuple[int, Hint]] = []
    for miss in verdict.get("closest", ()):
        tree = _Tree(placement, compute, miss["root"], miss.get("name"))
        for reason in miss["reasons"]:
            ranked = tree.hint(reason)
            if ranked is not None:
                found.append(ranked)
    return [hint for _, hint in sorted(found, key=lambda ranked: ranked[0])]


def _capacity(record: Mapping[str, Any], reserved: int | None = None) -> int:
    """(total - reserved) x allocation_ratio, with the record's `reserved` or another."""
    kept = record["reserved"] if reserved is None else reserved
    return int((record["total"] - kept) * record["allocation_ratio"])


class _Tree:
    """One tree's providers, inventories, usages, audit and compute service, read
    when first asked."""

    def __init__(
        self, placement: PlacementClient, compute: ComputeClient | None, root: str, name: str | None
    ) -> None:
        self.placement, self.compute, self.root, self.name = placement, compute, root, name
        self._providers: list[dict[str, Any]] | None = None
        self._freed: dict[str, dict[str, list[audits.Write]]] | None = None
        self._audit: audits.Audit | None = None
        self._service: dict[str, Any] | None = None
        self._service_read = False

    def providers(self) -> list[dict[str, Any]]:
        if self._providers is None:
            self._providers = self.placement.get("/resource_providers", {"in_tree": self.root})[
                "resource_providers"
            ]
        return self._providers

    def hint(self, reason: str) -> tuple[int, Hint] | None:
        if self.leaked():  # no scheduler places anything here
            m = _RESOURCE.match(reason)
            return self._replaced(reason) if m and self.service() else None
        if m := _RESOURCE.match(reason):
            rc, asked = m["rc"], int(m["n"])
            if not self.down():
                return self._resource(reason, rc, asked)
            if (restart := self._down(reason, rc, asked)) is not None:
                return RESTORE, restart
            ranked = self._resource(reason, rc, asked)
            return None if ranked is None else (ranked[0], self._also_down(ranked[1]))
        if m := _TRAIT.match(reason):
            return CONDITIONAL, self._trait(reason, m["t"])
        if reason.startswith("required") and f"=!{DISABLED}: not met" in reason:
            return RESTORE, self._disabled(reason)
        if m := _AGGREGATE.match(reason):
            return CONDITIONAL, self._aggregate(reason, m["a"])
        return None

    def _make(self, reason: str, text: str, command: str | None) -> Hint:
        return Hint(self.root, self.name, reason, text, command)

    # -- a class without room -------------------------------------------------

    def stock(self, rc: str, asked: int) -> list[_Stock]:
        """The providers of the tree with `rc`, where `asked` is within min/max unit."""
        found = []
        for p in self.providers():
            inventory = self.placement.get(f"/resource_providers/{p['uuid']}/inventories")
            record = inventory["inventories"].get(rc)
            if record is not None and record["min_unit"] <= asked <= record["max_unit"]:
                used = int(self.placement.usages(p["uuid"]).get(rc, 0))
                found.append(_Stock(p, record, used))
        return found

    def _resource(self, reason: str, rc: str, asked: int) -> tuple[int, Hint] | None:
        """The first of, on any provider of the tree with room for the amount: holds
        the audit frees, a finding's fix, a move in flight, a used-up device, the
        ratio."""
        stock = self.stock(rc, asked)
        ways = (
            (BOOKS, self._freed_room),
            (BOOKS, self._fixed_room),
            (BOOKS, self._in_flight),
            (RESTORE, self._used_up),
            (OVERSUBSCRIBE, self._ratio),
        )
        for rank, way in ways:
            for s in stock:
                if hint := way(reason, rc, asked, s):
                    return rank, hint
        return None

    def _freed_room(self, reason: str, rc: str, asked: int, s: _Stock) -> Hint | None:
        writes = self.freed().get(s.provider["uuid"], {}).get(rc, [])
        freed = sum(w.freed[s.provider["uuid"]][rc] for w in writes)
        if not freed or not s.fits(asked, freed):
            return None
        who = ", ".join(f"{w.kind} {w.target}" for w in writes)
        text = (
            f"{self._named(s.provider)}: the audit frees the {freed} {rc} held here by {who}; "
            f"then {s.free_after(freed)} are free"
        )
        return self._make(reason, text, f"tally audit --provider {self.root} --delete --apply")

    def _fixed_room(self, reason: str, rc: str, asked: int, s: _Stock) -> Hint | None:
        report = self.audit()
        for finding in () if report is None else report.findings:
            freed = _fix_frees(finding, report.books).get(s.provider["uuid"], {}).get(rc, 0)
            if freed and finding.fix and s.fits(asked, freed):
                text = (
                    f"{self._named(s.provider)}: the audit finds {finding.kind} "
                    f"{finding.consumer_uuid} holding {freed} {rc} here ({finding.reason}); "
                    f"its fix frees them; then {s.free_after(freed)} are free"
                )
                return self._make(reason, text, finding.fix)
        return None

    def _used_up(self, reason: str, rc: str, asked: int, s: _Stock) -> Hint | None:
        total, reserved = s.record["total"], s.record["reserved"]
        if not reserved or reserved != total or s.used + asked > _capacity(s.record, 0):
            return None
        text = (
            f"{self._named(s.provider)}: {rc} has reserved = total ({total}): a one-time "
            "device used up; once it is made ready again"
        )
        command = (
            f"tally provider inventory set {s.provider['uuid']} --resource {rc}:reserved=0 --amend"
        )
        return self._make(reason, text, command)

    def _ratio(self, reason: str, rc: str, asked: int, s: _Stock) -> Hint | None:
        room = s.record["total"] - s.record["reserved"]
        if room <= 0:
            return None
        ratio = math.ceil((s.used + asked) / room * 100) / 100
        if ratio <= s.record["allocation_ratio"]:
            return None
        text = (
            f"{self._named(s.provider)}: {rc} allocation_ratio {s.record['allocation_ratio']} "
            f"-> {ratio} would make room (oversubscribing it)"
        )
        command = (
            f"tally provider inventory set {s.provider['uuid']} "
            f"--resource {rc}:allocation_ratio={ratio} --amend"
        )
        return self._make(reason, text, command)

    def _in_flight(self, reason: str, rc: str, asked: int, s: _Stock) -> Hint | None:
        """A live migration whose destination claim holds the room: aborting it frees
        it (its server keeps its source). Said stuck past the audit's patience."""
        report = self.audit()
        if report is None:
            return None
        cloud, books, rp = report.cloud, report.books, s.provider["uuid"]
        for m in cloud.migrations:
            if m.over or m.kind != "live-migration" or m.dest_host != self.name:
                continue
            freed = books.holdings.get(m.server, {}).get(rp, {}).get(rc, 0)
            command = audits.settle_command(m, cloud)
            if not freed or command is None or not s.fits(asked, freed):
                continue
            server = cloud.servers.get(m.server)
            who = server.label if server else m.server
            age = dt.datetime.now(dt.UTC) - m.updated_at if m.updated_at else None
            since = f", unchanged for {audits.duration(age)}" if age is not None else ""
            stuck = age is not None and age > audits.patience(cloud, audits.STUCK_AFTER)
            text = (
                f"{self._named(s.provider)}: live migration {m.id} of {who} is {m.status}{since}"
                + (" (stuck)" if stuck else "")
                + f", and its destination claim holds {freed} {rc} here; "
                + ("aborting it frees them" if stuck else "if it is hung, aborting it frees them")
                + f" (the server stays on {m.source_host}); then {s.free_after(freed)} are free"
            )
            return self._make(reason, text, command)
        return None

    def audit(self) -> audits.Audit | None:
        """The audit of this tree (None without a compute API to audit against)."""
        if self._audit is None and self.compute is not None:
            try:
                self._audit = audits.audit(self.placement, self.compute, provider=self.root)
            except ClientError:
                self.compute = None
        return self._audit

    def freed(self) -> dict[str, dict[str, list[audits.Write]]]:
        """Per provider of the tree and class, the writes of `tally audit --delete`
        that free some there."""
        if self._freed is None:
            self._freed = {}
            report = self.audit()
            for write in () if report is None else audits.remove(self.placement, report).writes:
                for rp, held in write.freed.items():
                    for rc in held:
                        self._freed.setdefault(rp, {}).setdefault(rc, []).append(write)
        return self._freed

    # -- the compute service --------------------------------------------------

    def service(self) -> dict[str, Any] | None:
        """The nova-compute service of the host named as the tree (None: none, or no
        compute API to ask)."""
        if not self._service_read and self.compute is not None and self.name:
            self._service_read = True
            params = {"host": self.name, "binary": "nova-compute"}
            try:
                found = self.compute.get("/os-services", params)["services"]
            except ClientError:
                found = []
            self._service = found[0] if found else None
        return self._service

    def leaked(self) -> bool:
        """A provider no compute service reports (its service was deleted)."""
        report = self.audit()
        return report is not None and self.root in report.leaked_providers

    def down(self) -> bool:
        service = self.service()
        return service is not None and service.get("state") == "down"

    def _replaced(self, reason: str) -> tuple[int, Hint]:
        """The provider of a deleted compute service, whose host runs a compute service
        again: that one cannot report its provider while this one has the name."""
        writes = [w for by_rc in self.freed().values() for ws in by_rc.values() for w in ws]
        who = ", ".join(sorted({f"{w.kind} {w.target}" for w in writes})) or "nothing"
        text = (
            f"{self.name}: provider {self.root} is left from a deleted compute service, held "
            f"by {who}; {self.name}'s compute service now cannot report its own provider under "
            "that name. The audit frees what is held here and deletes it; the service reports "
            "a new provider at its next periodic update"
        )
        return BOOKS, self._make(
            reason, text, f"tally audit --provider {self.root} --delete --apply"
        )

    def _down(self, reason: str, rc: str, asked: int) -> Hint | None:
        """A host whose compute service is down, where servers evacuated from it keep
        holds that nova-compute releases when it starts there again; None unless that
        makes the room."""
        for s in self.stock(rc, asked):
            released = self._evacuated(rc, s.provider["uuid"])
            freed = sum(released.values())
            if freed and s.fits(asked, freed):
                who = ", ".join(f"{label}: {n}" for label, n in released.items())
                text = (
                    f"{self._named(s.provider)}: {self._down_words()}; when nova-compute starts "
                    f"there it releases the {freed} {rc} that servers evacuated from it still "
                    f"hold here ({who}); then {s.free_after(freed)} are free"
                )
                command = self._up_command()
                if command is None:
                    text += f"; restart nova-compute on {self.name}"
                return self._make(reason, text, command)
        return None

    def _down_words(self) -> str:
        forced = " (forced down)" if (self.service() or {}).get("forced_down") else ""
        return f"its compute service is down{forced}: nothing is scheduled there until it is up"

    def _up_command(self) -> str | None:
        """Unset forced down once nova-compute runs again (None: restart it there)."""
        if (self.service() or {}).get("forced_down"):
            return f"openstack compute service set --up {self.name} nova-compute"
        return None

    def _also_down(self, hint: Hint) -> Hint:
        """A hint for a tree whose host is down: it makes room, and the host must be
        up too before anything is scheduled there."""
        then = self._up_command() or f"restart nova-compute on {self.name}"
        text = f"{hint.text}; and {self.name}: {self._down_words()} ({then})"
        return dataclasses.replace(hint, text=text)

    def _evacuated(self, rc: str, rp: str) -> dict[str, int]:
        """What servers evacuated from this host still hold of `rc` on `rp`, by server."""
        report = self.audit()
        if report is None:
            return {}
        cloud, books = report.cloud, report.books
        found: dict[str, int] = {}
        for m in cloud.migrations:
            if m.kind != "evacuation" or m.source_host != self.name or m.status not in EVACUATED:
                continue
            n = books.holdings.get(m.server, {}).get(rp, {}).get(rc, 0)
            if n:
                server = cloud.servers.get(m.server)
                found[server.label if server else m.server] = n
        return found

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
            enable_command(host),
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


def _fix_frees(finding: audits.Finding, books: Books) -> dict[str, dict[str, int]]:
    """What running the finding's fix frees, by provider, beyond what `tally audit
    --delete` frees: heal moves a misplaced server's hold to its host (freeing where it
    was), confirming a finished resize frees its source. A stale hold heal takes back
    stays where it is (as its server's), and an abort frees the destination, which the
    server holds (see `_Tree._in_flight`)."""
    if finding.kind == audits.MISPLACED and finding.host_provider is not None:
        held = finding.allocations.items()
        return {rp: dict(r) for rp, r in held if books.root(rp) != finding.host_provider}
    if finding.kind == audits.STUCK and finding.fix and " resize confirm " in finding.fix:
        return {rp: dict(r) for rp, r in finding.allocations.items()}
    return {}
