"""Who holds allocations, and should they? The audit, over the public APIs only.

Every consumer holding allocations (on one provider, or everywhere) is classified
against the compute API:

  live               a server that exists, holding its own host (or moving)
  migrating          the uuid of a move still in progress (never an orphan)
  orphan             no server, no migration: deleted uncleanly
  stale-migration    the uuid of a migration that is over (completed, error, ...)
  double-allocation  a server whose holds (its own, and those of its finished
                     migrations) span more than one compute root, with no move going
  leaked-host        a server whose allocations sit on a provider no compute service
                     reports any more (the service was deleted without draining)

All resource classes count, sharing providers too (they are not compute roots).

The reads: Placement's providers (with roots and the sharing ones) and each
provider's allocations; the compute API's servers, migrations and hypervisors,
each listed once, paged. No per-consumer request, so a large cloud is fast.
`remove` frees orphans and stale migration holds (and, on a named provider that
is not the server's host, a double allocation's extra part; on a named leaked
provider, what servers hold there, then the provider itself, so the re-created
compute service can report its own), writing the rest of each consumer back
with its consumer generation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient

LIVE = "live"
MIGRATING = "migrating"
ORPHAN = "orphan"
STALE_MIGRATION = "stale-migration"
DOUBLE_ALLOCATION = "double-allocation"
LEAKED_HOST = "leaked-host"
FINDINGS = (ORPHAN, STALE_MIGRATION, DOUBLE_ALLOCATION, LEAKED_HOST)
REMOVABLE = (ORPHAN, STALE_MIGRATION)
# a migration in one of these is over: what it still holds is left behind
MIGRATION_OVER = (
    "completed",
    "confirmed",
    "reverted",
    "cancelled",
    "aborted",
    "error",
    "failed",
    "done",
)
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
PAGE = 1000

Progress = Callable[[int, int], None]
Allocations = dict[str, dict[str, int]]  # provider -> {class: amount}


def held_by(allocations: Mapping[str, Mapping[str, Any]]) -> Allocations:
    """A consumer's allocations as Placement returns them, as provider -> resources."""
    return {rp: dict(a["resources"]) for rp, a in allocations.items()}


def allocations_body(
    held: Allocations, generation: int | None, project_id: str | None, user_id: str | None
) -> dict[str, Any]:
    """The PUT /allocations/{consumer} body (1.28+) writing `held`."""
    return {
        "allocations": {rp: {"resources": r} for rp, r in held.items()},
        "consumer_generation": generation,
        "project_id": project_id,
        "user_id": user_id,
    }


@dataclasses.dataclass(frozen=True)
class Finding:
    """One consumer and its class."""

    consumer_uuid: str
    kind: str
    allocations: Allocations
    reason: str
    server: str | None = None  # the instance (of a migration consumer, its instance)
    host: str | None = None  # the server's compute host
    migration_status: str | None = None
    migration_id: int | str | None = None  # the compute API's id of a migration

    @property
    def problem(self) -> bool:
        return self.kind in FINDINGS


@dataclasses.dataclass(frozen=True)
class Removal:
    consumer_uuid: str
    kind: str
    freed: Allocations  # provider -> what is (or would be) removed there
    kept: Allocations
    applied: bool = False
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class Audit:
    consumers: tuple[Finding, ...]
    providers: dict[str, str]  # uuid -> name of every provider seen
    leaked_providers: tuple[str, ...] = ()  # roots no compute service reports
    provider: str | None = None  # the one audited, if only one
    removals: tuple[Removal, ...] = ()
    deleted_provider: str | None = None  # the leaked provider, deleted once emptied

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(c for c in self.consumers if c.problem)

    @property
    def clean(self) -> bool:
        failed = any(r.error for r in self.removals)
        done = self.removals and all(r.applied for r in self.removals)
        return not failed and (not self.findings or bool(done) and self._only_removable())

    def _only_removable(self) -> bool:
        return all(removable(self, f) for f in self.findings)

    def counts(self) -> dict[str, int]:
        found = {kind: 0 for kind in (LIVE, MIGRATING, *FINDINGS)}
        for consumer in self.consumers:
            found[consumer.kind] += 1
        return found

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["counts"] = self.counts()
        data["clean"] = self.clean
        return data


@dataclasses.dataclass
class Cloud:
    """What the compute API says: servers, migrations, compute nodes."""

    servers: dict[str, dict[str, Any]]  # uuid -> {host, status}
    migrations: dict[str, dict[str, Any]]  # migration uuid -> {status, instance_uuid, ...}
    hypervisors: dict[str, str]  # provider uuid (or id) -> hostname

    def reports(self, provider: str, name: str | None) -> bool:
        """Is this root a compute node the compute API knows? By uuid (hypervisor ids
        are provider uuids from compute 2.53); by name only with older integer ids,
        since a re-created service has a new node uuid under the same name."""
        if any("-" in rp for rp in self.hypervisors):
            return provider in self.hypervisors
        return name in self.hypervisors.values()

    def active_moves(self, server: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.migrations.values()
            if m.get("instance_uuid") == server and m.get("status") not in MIGRATION_OVER
        ]

    def stale_moves(self, server: str) -> list[str]:
        return [
            uuid
            for uuid, m in self.migrations.items()
            if m.get("instance_uuid") == server and m.get("status") in MIGRATION_OVER
        ]


# ---------------------------------------------------------------- reads


def paged(compute: ComputeClient, path: str, key: str, params: dict[str, Any]) -> list[dict]:
    found: list[dict] = []
    marker = None
    while True:
        page = compute.get(
            path, {**params, "limit": PAGE, **({"marker": marker} if marker else {})}
        )
        items = page.get(key) or []
        found += items
        more = f"{key}_links" in page or len(items) >= PAGE  # a server's limit may be lower
        if not items or not more:
            return found
        marker = items[-1].get("uuid") or items[-1].get("id")


def read_cloud(compute: ComputeClient) -> Cloud:
    servers = paged(compute, "/servers/detail", "servers", {"all_tenants": 1})
    migrations = paged(compute, "/os-migrations", "migrations", {})
    hypervisors = compute.get("/os-hypervisors").get("hypervisors") or []
    return Cloud(
        servers={
            s["id"]: {"host": s.get("OS-EXT-SRV-ATTR:host"), "status": s.get("status")}
            for s in servers
        },
        migrations={m["uuid"]: m for m in migrations if m.get("uuid")},
        hypervisors={str(h["id"]): h["hypervisor_hostname"] for h in hypervisors},
    )


def read_holdings(
    placement: PlacementClient, provider: str | None, progress: Progress | None = None
) -> tuple[dict[str, Allocations], dict[str, dict[str, Any]], set[str]]:
    """(consumer -> its allocations, provider uuid -> {name, root}, sharing uuids).
    Audited all at once, each provider's allocations are read; for one provider,
    each of its consumers' allocations."""
    providers = {
        p["uuid"]: {"name": p.get("name"), "root": p.get("root_provider_uuid") or p["uuid"]}
        for p in placement.get("/resource_providers")["resource_providers"]
    }
    sharing: set[str] = set()
    if placement.at_least("1.18"):
        found = placement.get("/resource_providers", {"required": SHARING_TRAIT})
        sharing = {p["uuid"] for p in found["resource_providers"]}
    held: dict[str, Allocations] = {}
    if provider is None:
        for n, rp in enumerate(providers, 1):
            for consumer, resources in placement.provider_allocations(rp).items():
                held.setdefault(consumer, {})[rp] = resources
            if progress:
                progress(n, len(providers))
        return held, providers, sharing
    consumers = list(placement.provider_allocations(provider))
    for n, consumer in enumerate(consumers, 1):
        held[consumer] = held_by(placement.consumer_allocations(consumer)["allocations"])
        if progress:
            progress(n, len(consumers))
    return held, providers, sharing


# ---------------------------------------------------------------- classification


def classify(
    held: dict[str, Allocations],
    cloud: Cloud,
    providers: dict[str, dict[str, Any]],
    sharing: Iterable[str] = (),
    related: dict[str, Allocations] | None = None,
) -> list[Finding]:
    """Each consumer's class, from its allocations and the compute API's view.
    `related` holds the allocations of other consumers (finished migrations of
    these servers) that count towards a double allocation without being listed."""
    sharing = set(sharing)
    everything = {**(related or {}), **held}

    def root(rp: str) -> str:
        return (providers.get(rp) or {}).get("root") or rp

    def reported(rp_root: str) -> bool:
        return cloud.reports(rp_root, (providers.get(rp_root) or {}).get("name"))

    def compute_roots(allocations: Allocations) -> set[str]:
        return {root(rp) for rp in allocations if root(rp) not in sharing}

    found = []
    for consumer, allocations in sorted(held.items()):
        migration = cloud.migrations.get(consumer)
        server = cloud.servers.get(consumer)
        if migration is not None:
            status = migration.get("status")
            kind, why = (
                (STALE_MIGRATION, f"migration is {status}: its hold was never released")
                if status in MIGRATION_OVER
                else (MIGRATING, f"migration in progress ({status})")
            )
            found.append(
                Finding(
                    consumer,
                    kind,
                    allocations,
                    why,
                    server=migration.get("instance_uuid"),
                    migration_status=status,
                    migration_id=migration.get("id"),
                )
            )
            continue
        if server is None:
            found.append(Finding(consumer, ORPHAN, allocations, "no server, no migration"))
            continue
        host = server.get("host")
        roots = compute_roots(allocations)
        gone = sorted(r for r in roots if not reported(r))
        for stale in cloud.stale_moves(consumer):
            roots |= compute_roots(everything.get(stale, {}))
        moving = cloud.active_moves(consumer)
        if gone:
            kind, why = (
                LEAKED_HOST,
                "holds a provider no compute service reports: "
                + ", ".join(_name(providers, r) for r in gone),
            )
        elif len(roots) > 1 and not moving:
            names = ", ".join(sorted(_name(providers, r) for r in roots))
            kind, why = DOUBLE_ALLOCATION, f"held on {names} with no move in progress"
        else:
            kind, why = LIVE, "server moving" if moving else f"server on {host}"
        move = moving[0] if moving and kind == LIVE else {}
        found.append(
            Finding(
                consumer,
                kind,
                allocations,
                why,
                server=consumer,
                host=host,
                migration_status=move.get("status"),
                migration_id=move.get("id"),
            )
        )
    return found


def _name(providers: dict[str, dict[str, Any]], rp: str) -> str:
    return (providers.get(rp) or {}).get("name") or rp


def audit(
    placement: PlacementClient,
    compute: ComputeClient,
    provider: str | None = None,
    progress: Progress | None = None,
) -> Audit:
    """Classify every consumer (or those on `provider`)."""
    cloud = read_cloud(compute)
    held, providers, sharing = read_holdings(placement, provider, progress)
    related = {}
    if provider is not None:  # a server's finished migrations may hold elsewhere
        stales = [s for c in held if c in cloud.servers for s in cloud.stale_moves(c)]
        for stale in dict.fromkeys(s for s in stales if s not in held):
            related[stale] = held_by(placement.consumer_allocations(stale)["allocations"])
    found = classify(held, cloud, providers, sharing, related)
    in_use = {_root(providers, rp) for allocations in held.values() for rp in allocations}
    leaked = sorted(
        r
        for r in in_use
        if r in providers and r not in sharing and not cloud.reports(r, providers[r]["name"])
    )
    return Audit(
        consumers=tuple(found),
        providers={rp: p["name"] for rp, p in providers.items()},
        leaked_providers=tuple(leaked),
        provider=provider,
    )


def _root(providers: dict[str, dict[str, Any]], rp: str) -> str:
    return (providers.get(rp) or {}).get("root") or rp


# ---------------------------------------------------------------- removal


def remove(placement: PlacementClient, report: Audit, apply: bool = False) -> Audit:
    """Free orphans and stale migration holds (only their part on `report.provider`
    when one was audited): with `apply`, each consumer's remaining allocations are
    written back with the consumer generation just read; otherwise a dry run."""
    removals = [
        _remove_one(placement, finding, report.provider, apply)
        for finding in report.findings
        if removable(report, finding)
    ]
    deleted = None
    leaked = report.provider if report.provider in report.leaked_providers else None
    if apply and leaked and not any(r.error for r in removals):
        try:  # refused (409) while anything still holds it
            placement.delete(f"/resource_providers/{leaked}")
            deleted = leaked
        except PlacementError:
            pass
    return dataclasses.replace(report, removals=tuple(removals), deleted_provider=deleted)


def removable(report: Audit, finding: Finding) -> bool:
    """Orphans and stale migration holds; and the part of a double allocation on
    the audited provider when it is not the server's host (an evacuation's source)."""
    if finding.kind in REMOVABLE:
        return True
    if finding.kind == LEAKED_HOST:  # its part on the leaked provider audited
        return report.provider in report.leaked_providers
    if finding.kind != DOUBLE_ALLOCATION or report.provider is None:
        return False
    others = set(finding.allocations) - {report.provider}
    here = report.provider in finding.allocations
    return here and bool(others) and report.providers.get(report.provider) != finding.host


def _remove_one(
    placement: PlacementClient, finding: Finding, provider: str | None, apply: bool
) -> Removal:
    def split(allocations: Allocations) -> tuple[Allocations, Allocations]:
        freed = {rp: r for rp, r in allocations.items() if provider in (None, rp)}
        return freed, {rp: r for rp, r in allocations.items() if rp not in freed}

    freed, kept = split(finding.allocations)
    if not apply:
        return Removal(finding.consumer_uuid, finding.kind, freed, kept)
    try:
        placement.require("1.28", "removing allocations with the consumer generation")
        current = placement.consumer_allocations(finding.consumer_uuid)
        freed, kept = split(held_by(current["allocations"]))
        body = allocations_body(
            kept,
            current.get("consumer_generation"),
            current.get("project_id"),
            current.get("user_id"),
        )
        if placement.at_least("1.38"):
            body["consumer_type"] = current.get("consumer_type") or (
                "MIGRATION" if finding.kind == STALE_MIGRATION else "INSTANCE"
            )
        if freed:
            placement.put(f"/allocations/{finding.consumer_uuid}", body)
    except PlacementError as exc:
        return Removal(finding.consumer_uuid, finding.kind, freed, kept, error=exc.detail)
    return Removal(finding.consumer_uuid, finding.kind, freed, kept, applied=True)
