"""Are the books true? The audit compares Placement with the compute API.

Every consumer holding allocations (on one provider, or everywhere), and every
server that should hold some, gets one class:

  live               a server holding exactly its host's provider tree (or moving)
  migrating          the hold of a move still in progress
  stuck-migration    a move whose state has not changed for `stuck_after` (from its
                     updated_at; on the lab, whose moves step by themselves, for
                     LAB_STEPS of its steps if that is sooner)
  orphan             no server, no migration: deleted uncleanly
  stale-migration    the hold of a move that is over (completed, error, ...)
  double-allocation  a server holding its host and another compute node, no move going
  misplaced          a server holding a node that is not its host's, and not its host
  unallocated        a server on a host holding nothing at all (heal's work)
  leaked-host        a server holding a provider no compute service reports
  unverified         (compute < 2.59) a hold that no server or listed move explains
  offloaded          a shelved-offloaded server still holding (Nova released it all)

`remove` frees what is safe to free without the compute API: orphans, stale
migration holds, what offloaded servers hold, the part of a double allocation off
the server's host, and what servers hold on a leaked provider, which is then
deleted; each consumer's rest is written back with its consumer generation.
Misplaced and unallocated servers are heal's; stuck moves are the compute API's
(abort or confirm).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from tally.clients import allocations as allocs
from tally.clients.allocations import Allocations
from tally.clients.compute import ComputeClient
from tally.clients.errors import ClientError
from tally.clients.placement import PlacementClient
from tally.doctor.cloud import (
    NOTHING_HELD,
    Books,
    Cloud,
    host_provider,
    matched_migration,
    read_books,
    read_cloud,
)
from tally.doctor.traces import Histories, Trace
from tally.progress import Progress, quiet

LIVE, MIGRATING, STUCK = "live", "migrating", "stuck-migration"
ORPHAN, STALE_MIGRATION = "orphan", "stale-migration"
DOUBLE_ALLOCATION, MISPLACED, UNALLOCATED = "double-allocation", "misplaced", "unallocated"
LEAKED_HOST, UNVERIFIED, OFFLOADED = "leaked-host", "unverified", "offloaded"
KINDS = (LIVE, MIGRATING, STUCK, ORPHAN, STALE_MIGRATION, DOUBLE_ALLOCATION, MISPLACED)
KINDS += (UNALLOCATED, LEAKED_HOST, UNVERIFIED, OFFLOADED)
FINDINGS = KINDS[2:]
STUCK_AFTER = dt.timedelta(minutes=5)
LAB_STEPS = 3  # a lab move that has not stepped for this many steps is stuck


@dataclasses.dataclass(frozen=True)
class Finding:
    """One consumer (or allocation-less server) and its class."""

    consumer_uuid: str
    kind: str
    allocations: Allocations
    reason: str
    server: str | None = None  # the instance (of a migration, its instance)
    host: str | None = None  # the server's compute host
    host_provider: str | None = None  # the root provider of that host, if any
    migration_id: int | str | None = None  # the compute API's id of the move
    fix: str | None = None  # the command that resolves it
    taken_back: bool = False  # a stale hold heal gives back to its server (not freed)
    history: Trace | None = None  # when, and by which request, its hold was written

    @property
    def problem(self) -> bool:
        return self.kind in FINDINGS


@dataclasses.dataclass(frozen=True)
class Write:
    """One write of `remove`: free part of a consumer, or delete a provider."""

    target: str  # consumer or provider uuid
    kind: str
    freed: Allocations  # provider -> what is (or would be) removed there
    kept: Allocations
    delete_provider: bool = False
    applied: bool = False
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class Audit:
    consumers: tuple[Finding, ...]
    books: Books
    cloud: Cloud
    leaked_providers: tuple[str, ...] = ()  # roots no compute service reports
    provider: str | None = None  # the one audited, if only one
    writes: tuple[Write, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(c for c in self.consumers if c.problem)

    @property
    def all_fixed(self) -> bool:
        """Everything found was fixed by the writes applied."""
        fixed = {w.target for w in self.writes if w.applied}
        return self._covered(fixed) and not any(w.error for w in self.writes)

    @property
    def all_planned(self) -> bool:
        """Everything found has a write, applied or (a dry run) not."""
        return self._covered({w.target for w in self.writes})

    def _covered(self, targets: set[str]) -> bool:
        wanted = {f.consumer_uuid for f in self.findings} | set(self.leaked_providers)
        return bool(wanted) and wanted <= targets

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(KINDS, 0)
        for consumer in self.consumers:
            found[consumer.kind] += 1
        return found


def audit(
    placement: PlacementClient,
    compute: ComputeClient,
    provider: str | None = None,
    progress: Progress = quiet,
    stuck_after: dt.timedelta = STUCK_AFTER,
    now: dt.datetime | None = None,
) -> Audit:
    """Classify every consumer (or those on `provider`, and the servers of its host)."""
    cloud = read_cloud(compute, progress)
    books = read_books(placement, provider, progress)
    judge = _Judge(cloud, books, placement, stuck_after, now or dt.datetime.now(dt.UTC))
    if provider is not None:  # also the servers of its host, and those of its moves
        related = [s.id for s in cloud.servers.values() if judge.host_provider(s) == provider]
        related += [m.server for m in cloud.migrations if m.uuid in books.holdings]
        for server in dict.fromkeys(s for s in related if s not in books.holdings):
            if held := books.holdings_of(placement, server):
                books.holdings[server] = held
    found = [judge.consumer(c, a) for c, a in sorted(books.holdings.items())]
    found = traced(Histories(placement), found, progress)
    for server in cloud.servers.values():
        if server.id in books.holdings or not server.host or server.status in NOTHING_HELD:
            continue
        rp = judge.host_provider(server)
        if provider is None or rp == provider:
            found.append(judge.unallocated(server, rp))
    in_use = {books.root(rp) for held in books.holdings.values() for rp in held}
    leaked = sorted(r for r in in_use if r in books.providers and not judge.reported(r))
    return Audit(tuple(found), books, cloud, tuple(leaked), provider)


def traced(histories: Histories, found: list[Finding], progress: Progress = quiet) -> list[Finding]:
    """Each finding that holds something, with when and by which request its hold
    was written (the claim history, where the Placement keeps one)."""
    wanted = [n for n, f in enumerate(found) if f.problem and f.allocations]
    traced = list(found)
    for done, n in enumerate(wanted):
        progress("read the claim history", done, len(wanted))
        f = found[n]
        traced[n] = dataclasses.replace(f, history=histories.trace(f.consumer_uuid, f.allocations))
    return traced


class _Judge:
    def __init__(
        self,
        cloud: Cloud,
        books: Books,
        placement: PlacementClient,
        stuck_after: dt.timedelta,
        now: dt.datetime,
    ) -> None:
        self.cloud, self.books, self.placement = cloud, books, placement
        self.stuck_after, self.now = patience(cloud, stuck_after), now

    def host_provider(self, server: Any) -> str | None:
        return host_provider(self.cloud, self.books, server)

    def reported(self, root: str) -> bool:
        """Is this root a compute node the compute API lists? By uuid from 2.53; by
        name before (a re-created service has a new node uuid under the same name)."""
        if root in self.books.sharing:
            return True
        if any(self.cloud.nodes.values()):
            return root in self.cloud.nodes.values()
        return self.books.name(root) in self.cloud.nodes

    def consumer(self, consumer: str, held: Allocations) -> Finding:
        migration = self.cloud.migration(consumer) or self._matched_migration(consumer, held)
        if migration is not None:
            return self.move(consumer, held, migration)
        server = self.cloud.servers.get(consumer)
        if server is not None:
            return self.server(server, held)
        if self.cloud.migrations and not any(m.uuid for m in self.cloud.migrations):
            kind = self._consumer_type(consumer)
            if kind not in ("INSTANCE", None):
                reason = f"a {kind} hold no listed move explains (compute lists no uuids)"
                return Finding(consumer, UNVERIFIED, held, reason)
        return Finding(consumer, ORPHAN, held, "no server, no migration", fix=self._free(held))

    def move(self, consumer: str, held: Allocations, m: Any) -> Finding:
        server = self.cloud.servers.get(m.server)
        common = {"server": m.server, "migration_id": m.id}
        if server is not None:
            common.update(host=server.host, host_provider=self.host_provider(server))
        if m.over:
            why = f"migration {m.id} is {m.status}: its hold was never released"
            back = server is not None and self._takes_back(server, held)
            fix = f"tally heal --instance {m.server} --apply" if back else self._free(held)
            return Finding(consumer, STALE_MIGRATION, held, why, fix=fix, taken_back=back, **common)
        age = self.now - m.updated_at if m.updated_at else None
        if age is not None and age > self.stuck_after:
            why = f"migration {m.id} ({m.kind or 'move'}) {m.status}, unchanged for {duration(age)}"
            return Finding(consumer, STUCK, held, why, fix=settle_command(m, self.cloud), **common)
        return Finding(consumer, MIGRATING, held, f"migration {m.id} {m.status}", **common)

    def server(self, server: Any, held: Allocations) -> Finding:
        host_rp = self.host_provider(server)
        roots = self.books.compute_roots(held)
        gone = sorted(r for r in roots if not self.reported(r))
        common = {"server": server.id, "host": server.host, "host_provider": host_rp}
        moving = self.cloud.moves_of(server.id, over=False)
        names = ", ".join(sorted(self.books.name(r) for r in roots))
        if server.status == "SHELVED_OFFLOADED":  # Nova released all at the offload
            why = f"shelved and offloaded, yet holds {names}: Nova holds nothing until unshelve"
            return Finding(server.id, OFFLOADED, held, why, fix=self._free(held), **common)
        if gone:
            where = ", ".join(self.books.name(r) for r in gone)
            why = f"holds {where}, which no compute service reports (its service was deleted)"
            return Finding(server.id, LEAKED_HOST, held, why, fix=self._free(held, gone), **common)
        if moving:
            return Finding(server.id, LIVE, held, f"moving ({moving[0].status})", **common)
        if host_rp is None or host_rp not in roots:
            fix, first = self._heal(server, host_rp)
            why = f"held on {names}, but it runs on {server.host}{first}"
            return Finding(server.id, MISPLACED, held, why, fix=fix, **common)
        if len(roots) > 1:
            why = f"held on {names} with no move in progress; it runs on {server.host}"
            extra = sorted(roots - {host_rp})
            return Finding(
                server.id, DOUBLE_ALLOCATION, held, why, fix=self._free(held, extra), **common
            )
        return Finding(server.id, LIVE, held, f"server on {server.host}", **common)

    def unallocated(self, server: Any, host_rp: str | None) -> Finding:
        why = f"{server.status} on {server.host} but holds nothing"
        fix, first = self._heal(server, host_rp)
        why += first
        return Finding(server.id, UNALLOCATED, {}, why, server.id, server.host, host_rp, fix=fix)

    def _heal(self, server: Any, host_rp: str | None) -> tuple[str | None, str]:
        """Heal's command for `server`, once its host has a provider again; until
        then the step that comes first (free and delete the leaked provider by
        the host's name, then bring the service back), as `explain` orders them,
        with the words that say so."""
        if host_rp is not None:
            return f"tally heal --instance {server.id} --apply", ""
        why = f" ({server.host} has no resource provider: its compute service is gone"
        leaked = self.books.by_name(server.node or server.host)
        if leaked is not None and not self.reported(leaked):
            fix = f"tally audit --provider {leaked} --delete --apply"
            return fix, why + f"; first free and delete its old provider {leaked})"
        action, fix = restore_host(self.cloud, server.host)
        return fix, why + f"; {action}, then heal it)"

    def _takes_back(self, server: Any, stale: Allocations) -> bool:
        """Will heal give this stale hold back to its server? When the server holds
        nothing on its host and the stale hold is there (a failed move's source)."""
        host_rp = self.host_provider(server)
        own = self.books.holdings.get(server.id, {})
        return (
            host_rp is not None
            and host_rp not in self.books.compute_roots(own)
            and host_rp in self.books.compute_roots(stale)
        )

    def _free(self, held: Allocations, roots: list[str] | None = None) -> str:
        """The audit command freeing a consumer's part on (the first of) `roots`."""
        rps = [rp for rp in held if roots is None or self.books.root(rp) in roots]
        return f"tally audit --provider {self.books.root(rps[0])} --delete --apply" if rps else ""

    def _consumer_type(self, consumer: str) -> str | None:
        if not self.placement.at_least("1.38"):
            return None
        return self.books.consumer(self.placement, consumer).get("consumer_type")

    def _matched_migration(self, consumer: str, held: Allocations) -> Any:
        return matched_migration(self.cloud, self.books, self.placement, consumer, held)


def restore_host(cloud: Cloud, host: str) -> tuple[str, str | None]:
    """What brings back the compute service of `host`, so that it reports a provider
    again, and the command for it (None: the operator's hands, on the host)."""
    if cloud.lab:
        return f"re-create the compute service of {host}", f"tally lab host add {host}"
    return f"restart nova-compute on {host}: it reports its provider again at start", None


def settle_command(m: Any, cloud: Cloud) -> str | None:
    """The compute command that ends a move in flight: confirm a finished resize or
    cold migration, abort a running live migration (compute 2.24; a queued or
    preparing one from 2.65). None when the compute API cannot (see `unsettled`)."""
    if m.status == "finished":
        return f"openstack server resize confirm {m.server}"
    if unsettled(m, cloud) is None:
        version = "2.65" if m.status != "running" else "2.24"
        return (
            f"openstack --os-compute-api-version {version} server migration abort {m.server} {m.id}"
        )
    return None


def unsettled(m: Any, cloud: Cloud) -> str | None:
    """Why this compute API cannot abort the live migration `m` (None: it can)."""
    have = tuple(int(n) for n in cloud.version.split("."))
    if m.status == "running" and have < (2, 24) or m.status != "running" and have < (2, 65):
        need = "2.24" if m.status == "running" else "2.65"
        return f"aborting it needs compute {need}; this compute API speaks {cloud.version}"
    if m.kind != "live-migration":
        return f"a {m.kind or 'move'} cannot be aborted: wait for it to end or confirm it"
    if m.status not in ("queued", "preparing", "running"):
        return f"a live migration {m.status} cannot be aborted"
    return None


def patience(cloud: Cloud, stuck_after: dt.timedelta) -> dt.timedelta:
    """How long a move may keep its state: `stuck_after`, or on the lab (whose moves
    step by themselves every `lab_step` seconds) LAB_STEPS steps if that is sooner."""
    if cloud.lab_step > 0:
        return min(stuck_after, dt.timedelta(seconds=LAB_STEPS * cloud.lab_step + 1))
    return stuck_after


def duration(age: dt.timedelta) -> str:
    """`45s`, `12m`, `4h 30m`, `3d 02h`."""
    seconds = max(0, int(age.total_seconds()))
    minutes, hours = seconds // 60, seconds // 3600
    if seconds < 60:
        return f"{seconds}s"
    if minutes < 60:
        return f"{minutes}m"
    return f"{hours}h {minutes % 60:02d}m" if hours < 48 else f"{hours // 24}d {hours % 24:02d}h"


# ---------------------------------------------------------------- removal


def remove(
    placement: PlacementClient, report: Audit, apply: bool = False, progress: Progress = quiet
) -> Audit:
    """Free what is safe to free (only on `report.provider` when one was audited),
    then delete the leaked providers left empty: a dry run unless `apply`."""
    freed = [f for f in report.findings if removable(report, f)]
    scope = [p for p in report.leaked_providers if report.provider in (None, p)]
    phase, total = "write" if apply else "plan the writes", len(freed) + len(scope)
    writes = []
    for finding in freed:
        progress(phase, len(writes), total)
        writes.append(_free_one(placement, report, finding, apply))
    for rp in scope:
        progress(phase, len(writes), total)
        writes.append(_delete_provider(placement, rp, apply, failed=any(w.error for w in writes)))
    progress(phase, len(writes), total)
    return dataclasses.replace(report, writes=tuple(writes))


def removable(report: Audit, finding: Finding) -> bool:
    if finding.kind in (ORPHAN, OFFLOADED):
        return True
    if finding.kind == STALE_MIGRATION:  # unless heal takes it back for its server
        return not finding.taken_back
    if finding.kind in (DOUBLE_ALLOCATION, LEAKED_HOST):
        return bool(_freed_part(report, finding))
    return False


def _freed_part(report: Audit, finding: Finding) -> Allocations:
    books, scope = report.books, report.provider
    if finding.kind in (ORPHAN, STALE_MIGRATION, OFFLOADED):
        wanted = set(finding.allocations)
    elif finding.kind == LEAKED_HOST:
        leaked = set(report.leaked_providers)
        wanted = {rp for rp in finding.allocations if books.root(rp) in leaked}
    else:  # a double allocation: what is off its host's tree (sharing providers stay)
        wanted = {
            rp
            for rp in finding.allocations
            if books.root(rp) != finding.host_provider and books.root(rp) not in books.sharing
        }
    return {
        rp: r
        for rp, r in finding.allocations.items()
        if rp in wanted and scope in (None, rp, books.root(rp))
    }


def _free_one(placement: PlacementClient, report: Audit, finding: Finding, apply: bool) -> Write:
    freed = _freed_part(report, finding)
    kept = {rp: r for rp, r in finding.allocations.items() if rp not in freed}
    write = Write(finding.consumer_uuid, finding.kind, freed, kept)
    if not apply:
        return write

    def drop(current: allocs.Consumer) -> allocs.Consumer:
        rest = {rp: r for rp, r in current.allocations.items() if rp not in freed}
        return dataclasses.replace(current, allocations=rest)

    try:
        placement.require("1.28", "removing allocations with the consumer generation")
        allocs.update(placement, finding.consumer_uuid, drop)
    except ClientError as exc:
        return dataclasses.replace(write, error=str(exc))
    return dataclasses.replace(write, applied=True)


def _delete_provider(placement: PlacementClient, rp: str, apply: bool, failed: bool) -> Write:
    write = Write(rp, "leaked-provider", {}, {}, delete_provider=True)
    if not apply:
        return write
    if failed:
        return dataclasses.replace(write, error="not deleted: freeing its allocations failed")
    try:  # refused (409) while anything still holds it
        placement.delete(f"/resource_providers/{rp}")
    except ClientError as exc:
        return dataclasses.replace(write, error=str(exc))
    return dataclasses.replace(write, applied=True)
