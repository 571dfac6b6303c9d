"""Heal allocations: the parity of `nova-manage placement heal_allocations`, and the
repair of a server accounted where it does not run.

- create: a server on a host that holds nothing gets what its flavor claims as Nova
  reckons it (`tally.nova.flavors`: extra specs, pinned CPUs as PCPU, no root disk for a
  server booted from a volume) on its host's provider;
- take back: a server that holds nothing on its host while a finished (or failed)
  move of it still holds there (a live migration that failed half-way) gets that hold
  back, and gives up what it holds elsewhere, in one POST /allocations;
- relocate: a server holding only other hosts gets its flavor on its host instead;
- complete: allocations whose consumer lacks its project, user or type are written
  back completed;
- `force` rewrites a server's allocations from its flavor even when it has some.

A rewrite (relocate, force) keeps what the server holds on its host's child providers
and on sharing providers, and does not write those classes on the host again.

A server in a task state (a build, a delete, a move under way) is left alone, as
nova-manage leaves it: Nova is writing its allocations itself, and a heal racing a
delete would leave an orphan behind.

A server whose host has no resource provider cannot be healed: its compute service
was deleted, and must be re-created (or restarted) so it reports its provider again.
Every write carries the consumer generation read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tally.clients import allocations as allocs
from tally.clients.compute import ComputeClient
from tally.clients.errors import BadInput, ClientError
from tally.clients.placement import PlacementClient
from tally.doctor.cloud import (
    NOTHING_HELD,
    Books,
    Cloud,
    Server,
    host_provider,
    migration_holds,
    read_books,
    read_cloud,
    server_claims,
)
from tally.progress import Progress, quiet

INCOMPLETE = "00000000-0000-0000-0000-000000000000"  # Placement's default for a missing id
CREATE, TAKE_BACK, RELOCATE, COMPLETE, REPLACE = (
    "create",
    "take-back",
    "relocate",
    "complete",
    "replace",
)
NO_PROVIDER = "no-provider"


@dataclasses.dataclass(frozen=True)
class Healing:
    server: str
    action: str  # create | take-back | relocate | complete | replace | no-provider
    allocations: dict[str, dict[str, int]]  # provider -> resources written
    reason: str = ""
    applied: bool = False
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class HealReport:
    healings: tuple[Healing, ...]
    checked: int
    more: bool = False  # --max-count stopped it with servers left unchecked

    @property
    def failed(self) -> bool:
        return any(h.error for h in self.healings)

    @property
    def stranded(self) -> tuple[Healing, ...]:
        """Servers whose host has no provider: nothing to heal them onto."""
        return tuple(h for h in self.healings if h.action == NO_PROVIDER)


def heal(
    placement: PlacementClient,
    compute: ComputeClient,
    instance: str | None = None,
    max_count: int | None = None,
    apply: bool = False,
    force: bool = False,
    progress: Progress = quiet,
) -> HealReport:
    placement.require("1.28", "healing allocations with the consumer generation")
    cloud = read_cloud(compute, progress)
    books = read_books(placement, None, progress)
    servers = [s for s in cloud.servers.values() if instance in (None, s.id)]
    if instance and not servers:
        raise BadInput(f"no server {instance} in the compute API")
    healer = _Healer(placement, compute, cloud, books, apply, force)
    healings: list[Healing] = []
    for n, server in enumerate(servers, 1):
        progress("check servers", n, len(servers))
        if max_count is not None and len(healings) >= max_count:
            return HealReport(tuple(healings), checked=n - 1, more=True)
        if server.host and server.status not in NOTHING_HELD and not server.task_state:
            found = healer.one(server)
            if found is not None:
                healings.append(found)
    return HealReport(tuple(healings), checked=len(servers))


class _Healer:
    def __init__(
        self,
        placement: PlacementClient,
        compute: ComputeClient,
        cloud: Cloud,
        books: Books,
        apply: bool,
        force: bool,
    ) -> None:
        self.placement, self.compute, self.cloud, self.books = placement, compute, cloud, books
        self.apply, self.force = apply, force

    def one(self, server: Server) -> Healing | None:
        current = allocs.read(self.placement, server.id)
        rp = host_provider(self.cloud, self.books, server)
        roots = self.books.compute_roots(current.allocations)
        moving = self.cloud.moves_of(server.id, over=False)
        if rp is None and (not current.allocations or self.force):
            why = (
                f"its host {server.host} has no resource provider: its compute service was "
                "deleted; re-create or restart it so it reports its provider again"
            )
            if self.cloud.lab:
                why += f" (in the lab: tally lab host add {server.host})"
            return Healing(server.id, NO_PROVIDER, {}, why)
        if rp is not None and not moving and (self.force or rp not in roots):
            stale = None if self.force else self._stale_hold_on(server, rp)
            if stale is not None:
                return self._take_back(server, current, stale, rp)
            return self._from_flavor(server, current, rp)
        if _incomplete(self.placement, current):
            return self._write(server, COMPLETE, current, current.allocations, "owner missing")
        return None

    def _stale_hold_on(self, server: Server, rp: str) -> str | None:
        """A finished move of the server holding its host's tree (its source)."""
        for consumer in migration_holds(self.cloud, self.books, self.placement, server.id):
            if rp in self.books.compute_roots(self.books.holdings[consumer]):
                return consumer
        return None

    def _take_back(self, server: Server, current: allocs.Consumer, stale: str, rp: str) -> Healing:
        tree = {p for p in self.books.providers if self.books.root(p) == rp}
        moving = {p: r for p, r in self.books.holdings[stale].items() if p in tree}
        why = f"takes back what its failed move {stale} holds on {self.books.name(rp)}"
        healing = Healing(server.id, TAKE_BACK, moving, why)
        if not self.apply:
            return healing
        try:  # one write: the hold comes back, what it held off its host goes
            on_host = tree.__contains__
            allocs.move(self.placement, stale, server.id, on_host, "INSTANCE", on_host)
        except ClientError as exc:
            return dataclasses.replace(healing, error=str(exc))
        return dataclasses.replace(healing, applied=True)

    def _from_flavor(self, server: Server, current: allocs.Consumer, rp: str) -> Healing:
        wanted = server_claims(self.compute, server)
        if not wanted:
            why = f"its flavor {server.flavor.get('id')} is gone: nothing to heal it from"
            return Healing(server.id, CREATE, {}, why, error=why)
        action = REPLACE if self.force else RELOCATE if current.allocations else CREATE
        why = f"{server.flavor.get('original_name') or 'flavor'} on {self.books.name(rp)}"
        held = rewritten(self.books, current.allocations, rp, wanted)
        return self._write(server, action, current, held, why)

    def _write(
        self, server: Server, action: str, current: allocs.Consumer, held: dict, why: str
    ) -> Healing:
        healing = Healing(server.id, action, held, why)
        if not self.apply:
            return healing
        wanted = dataclasses.replace(
            current,
            allocations=held,
            project_id=_known(current.project_id) or server.project_id,
            user_id=_known(current.user_id) or server.user_id,
            consumer_type="INSTANCE",
        )
        try:
            allocs.update(self.placement, server.id, lambda _: wanted)
        except ClientError as exc:
            return dataclasses.replace(healing, error=str(exc))
        return dataclasses.replace(healing, applied=True)


def rewritten(
    books: Books, held: allocs.Allocations, rp: str, wanted: Mapping[str, int]
) -> allocs.Allocations:
    """A server's allocations rewritten from its flavor (`wanted`) on its host `rp`.
    The parts on the host's child providers (a vGPU, a port's bandwidth, a PCI device)
    and on sharing providers (disk on shared storage) are kept: the flavor rule cannot
    place them, and their classes are not written on the host again."""
    kept = {
        p: dict(resources)
        for p, resources in held.items()
        if p != rp and (books.root(p) == rp or books.root(p) in books.sharing)
    }
    on_host = {rc: n for rc, n in wanted.items() if not any(rc in r for r in kept.values())}
    return {rp: on_host, **kept}


def _known(value: str | None) -> str | None:
    return None if value in (None, INCOMPLETE) else value


def _incomplete(placement: PlacementClient, current: allocs.Consumer) -> bool:
    if not current.allocations:
        return False
    owner_missing = INCOMPLETE in (current.project_id, current.user_id)
    typeless = placement.at_least("1.38") and current.consumer_type in (None, "unknown")
    return owner_missing or typeless
