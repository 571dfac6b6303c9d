"""The two books the doctor compares, read once each through the public APIs.

`Cloud` is what the compute API says (servers, migrations, compute nodes), read at
the negotiated compute microversion: where an older Nova lacks a field the check
that needs it degrades, and the client notes it once (`ComputeClient.notes`).
`Books` is what Placement says (providers, sharing providers, who holds what).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from tally.amounts import held
from tally.clients.allocations import Allocations
from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.nova.flavors import claimed_resources
from tally.progress import Progress, quiet

PAGE = 1000
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
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
# servers that hold nothing by design (or not yet). A SOFT_DELETED server keeps its
# allocations until it is reclaimed: it can be restored (Nova's resource tracker
# releases only DELETED and SHELVED_OFFLOADED ones).
NOTHING_HELD = ("SHELVED_OFFLOADED", "BUILD", "DELETED")


@dataclasses.dataclass(frozen=True)
class Server:
    id: str
    name: str
    status: str
    host: str | None
    node: str | None  # the compute node (hypervisor hostname) it runs on
    flavor: dict[str, Any]  # embedded from 2.47; {"id": ...} before
    project_id: str | None
    user_id: str | None
    # booted from a volume: the compute API shows its image as "" (Nova's first test
    # too), and Nova claims no DISK_GB for its root disk
    volume_backed: bool = False
    task_state: str | None = None  # OS-EXT-STS:task_state: a build, delete, move under way

    @property
    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclasses.dataclass(frozen=True)
class Migration:
    id: int | str
    uuid: str | None  # from compute 2.59
    server: str
    status: str
    kind: str | None  # live-migration, migration, resize, evacuation (from 2.23)
    source_host: str | None
    dest_host: str | None
    updated_at: dt.datetime | None

    @property
    def over(self) -> bool:
        return self.status in MIGRATION_OVER


@dataclasses.dataclass
class Cloud:
    servers: dict[str, Server]
    migrations: list[Migration]
    nodes: dict[str, str | None]  # node name -> its provider uuid (None before 2.53)
    lab: bool = False  # the compute API is Tally's lab (it has /os-lab)
    lab_step: float = 0  # seconds between the lab's own steps of a move (0: on request)
    version: str = "2.96"  # the compute microversion spoken

    def migration(self, uuid: str) -> Migration | None:
        return next((m for m in self.migrations if m.uuid == uuid), None)

    def moves_of(self, server: str, over: bool) -> list[Migration]:
        return [m for m in self.migrations if m.server == server and m.over == over]


@dataclasses.dataclass
class Books:
    providers: dict[str, dict[str, Any]]  # uuid -> {name, root}
    sharing: set[str]
    holdings: dict[str, Allocations]  # consumer -> its allocations
    records: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def consumer(self, placement: PlacementClient, uuid: str) -> dict[str, Any]:
        """`GET /allocations/{uuid}` (owner, type, generation), read once per audit."""
        if uuid not in self.records:
            self.records[uuid] = placement.consumer_allocations(uuid)
        return self.records[uuid]

    def holdings_of(self, placement: PlacementClient, uuid: str) -> Allocations:
        """A consumer's whole allocations, from its record."""
        return held(self.consumer(placement, uuid).get("allocations") or {})

    def name(self, rp: str) -> str:
        return (self.providers.get(rp) or {}).get("name") or rp

    def root(self, rp: str) -> str:
        return (self.providers.get(rp) or {}).get("root") or rp

    def compute_roots(self, allocations: Allocations) -> set[str]:
        return {self.root(rp) for rp in allocations if self.root(rp) not in self.sharing}

    def by_name(self, name: str | None) -> str | None:
        found = [u for u, p in self.providers.items() if p["name"] == name and p["root"] == u]
        return found[0] if len(found) == 1 else None


def host_provider(cloud: Cloud, books: Books, server: Server) -> str | None:
    """The root provider of the server's compute node, if Placement has it: the
    hypervisor's uuid from compute 2.53, the provider named after the node before."""
    if server.node not in cloud.nodes:
        return None
    rp = cloud.nodes[server.node] or books.by_name(server.node)
    return rp if rp in books.providers else None


def matched_migration(
    cloud: Cloud, books: Books, placement: PlacementClient, consumer: str, held: Allocations
) -> Migration | None:
    """Before compute 2.59 migrations have no uuid: a MIGRATION (or untyped) consumer
    is the move of the server with its owner whose source or destination it holds,
    when exactly one move fits."""
    if any(m.uuid for m in cloud.migrations) or consumer in cloud.servers:
        return None
    found = books.consumer(placement, consumer)
    if found.get("consumer_type") not in ("MIGRATION", None):
        return None
    owner = (found.get("project_id"), found.get("user_id"))
    names = {books.name(r) for r in books.compute_roots(held)}
    fits = [
        m
        for m in cloud.migrations
        if (s := cloud.servers.get(m.server)) is not None
        and (s.project_id, s.user_id) == owner
        and names & {m.source_host, m.dest_host}
    ]
    return fits[0] if len(fits) == 1 else None


def migration_holds(
    cloud: Cloud, books: Books, placement: PlacementClient, server: str
) -> dict[str, Migration]:
    """The consumers holding allocations for the finished moves of `server`: by
    migration uuid, or (before 2.59) by owner and host."""
    found = {m.uuid: m for m in cloud.moves_of(server, over=True) if m.uuid in books.holdings}
    if any(m.uuid for m in cloud.migrations):
        return found
    for consumer, allocations in books.holdings.items():
        m = matched_migration(cloud, books, placement, consumer, allocations)
        if m is not None and m.server == server and m.over:
            found[consumer] = m
    return found


# ---------------------------------------------------------------- compute


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


def read_cloud(compute: ComputeClient, progress: Progress = quiet) -> Cloud:
    """Servers, migrations and compute nodes (`read the compute API` 0/3 to 3/3)."""
    progress("read the compute API", 0, 3)
    servers = paged(compute, "/servers/detail", "servers", {"all_tenants": 1})
    progress("read the compute API", 1, 3)
    if compute.degraded(
        "2.59", "migration uuids (a migration's hold is matched by owner and host instead)"
    ):
        migrations = compute.get("/os-migrations").get("migrations") or []
    else:
        migrations = paged(compute, "/os-migrations", "migrations", {})
    progress("read the compute API", 2, 3)
    hypervisors = compute.get("/os-hypervisors").get("hypervisors") or []
    progress("read the compute API", 3, 3)
    uuids = not compute.degraded("2.53", "hypervisor uuids (nodes matched by name)")
    compute.degraded("2.23", "migration types (an in-progress move of unknown type gets no abort)")
    return Cloud(
        servers={s["id"]: _server(s) for s in servers},
        migrations=[_migration(m) for m in migrations],
        nodes={h["hypervisor_hostname"]: str(h["id"]) if uuids else None for h in hypervisors},
        lab=(step := _lab_step(compute)) is not None,
        lab_step=step or 0,
        version=compute.version,
    )


def _server(s: dict[str, Any]) -> Server:
    return Server(
        id=s["id"],
        name=s.get("name") or "",
        status=s.get("status") or "",
        host=s.get("OS-EXT-SRV-ATTR:host"),
        node=s.get("OS-EXT-SRV-ATTR:hypervisor_hostname") or s.get("OS-EXT-SRV-ATTR:host"),
        flavor=s.get("flavor") or {},
        project_id=s.get("tenant_id"),
        user_id=s.get("user_id"),
        volume_backed=s.get("image") == "",
        task_state=s.get("OS-EXT-STS:task_state"),
    )


def _migration(m: dict[str, Any]) -> Migration:
    return Migration(
        id=m["id"],
        uuid=m.get("uuid"),
        server=m.get("instance_uuid") or "",
        status=m.get("status") or "",
        kind=m.get("migration_type"),
        source_host=m.get("source_compute"),
        dest_host=m.get("dest_compute"),
        updated_at=_time(m.get("updated_at") or m.get("created_at")),
    )


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        found = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=dt.UTC)


def _lab_step(compute: ComputeClient) -> float | None:
    """How often the lab's moves step by themselves (0: only when told); None when
    the compute API is not Tally's lab."""
    from tally.clients.errors import ClientError

    try:
        found = compute.get("/os-lab/step")
    except ClientError:
        return None
    return float(found.get("step_seconds") or 0)


def flavor_of(compute: ComputeClient, server: Server) -> dict[str, Any]:
    """The server's flavor with vcpus/ram/disk (embedded from 2.47; before, read from
    /flavors, with its extra specs); {} when it is gone."""
    if "vcpus" in server.flavor or not server.flavor.get("id"):
        return server.flavor
    from tally.clients.errors import ClientError

    try:
        flavor = compute.get(f"/flavors/{server.flavor['id']}")["flavor"]
        specs = compute.get(f"/flavors/{server.flavor['id']}/os-extra_specs")
    except ClientError:
        return {}
    return {**flavor, "extra_specs": specs.get("extra_specs") or {}}


def server_claims(compute: ComputeClient, server: Server) -> dict[str, int]:
    """What Nova claims for the server on its host: its flavor's resources, without
    the root disk when it was booted from a volume ({} when the flavor is gone)."""
    return claimed_resources(flavor_of(compute, server), volume_backed=server.volume_backed)


# ---------------------------------------------------------------- placement


def read_books(
    placement: PlacementClient, provider: str | None, progress: Progress = quiet
) -> Books:
    """Every provider; the allocations of every provider (all at once), or, for one
    provider, the whole allocations of each consumer holding it."""
    providers = {
        p["uuid"]: {"name": p.get("name"), "root": p.get("root_provider_uuid") or p["uuid"]}
        for p in placement.get("/resource_providers")["resource_providers"]
    }
    sharing: set[str] = set()
    if placement.at_least("1.18"):
        found = placement.get("/resource_providers", {"required": SHARING_TRAIT})
        sharing = {p["uuid"] for p in found["resource_providers"]}
    holdings: dict[str, Allocations] = {}
    scanned = list(providers) if provider is None else [provider]
    consumers: list[str] = []
    for n, rp in enumerate(scanned, 1):
        for consumer, resources in placement.provider_allocations(rp).items():
            holdings.setdefault(consumer, {})[rp] = resources
            consumers.append(consumer)
        if provider is None:
            progress("read allocations of providers", n, len(scanned))
    books = Books(providers, sharing, holdings)
    if provider is not None:
        for n, consumer in enumerate(consumers, 1):
            holdings[consumer] = books.holdings_of(placement, consumer)
            progress("read allocations of consumers", n, len(consumers))
    return books
