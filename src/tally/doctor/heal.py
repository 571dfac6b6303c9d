"""Heal allocations: the parity of `nova-manage placement heal_allocations`.

A server with no allocations gets them from its flavor (VCPU, MEMORY_MB, DISK_GB
= root + ephemeral + swap rounded up to GB; `resources:CLASS=N` extra specs
override, 0 removes) on its host's provider. Allocations whose consumer lacks
its project, user or type (the incomplete consumer of an old microversion) are
written back completed. `force` rewrites a server's allocations from its flavor
even when it has some. Every write carries the consumer generation read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.audit import Progress, allocations_body, held_by, paged

INCOMPLETE = "00000000-0000-0000-0000-000000000000"  # Placement's default for a missing id
CREATE, COMPLETE, REPLACE = "create", "complete", "replace"


@dataclasses.dataclass(frozen=True)
class Healing:
    server: str
    action: str  # create | complete | replace
    allocations: dict[str, dict[str, int]]  # provider -> resources written
    applied: bool = False
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class HealReport:
    healings: tuple[Healing, ...]
    checked: int
    skipped: tuple[str, ...] = ()  # servers with no host (or an unknown one)

    @property
    def failed(self) -> bool:
        return any(h.error for h in self.healings)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "failed": self.failed}


def flavor_resources(flavor: Mapping[str, Any]) -> dict[str, int]:
    """What a server of this flavor (the embedded flavor of compute 2.47+) claims."""
    wanted = {
        "VCPU": int(flavor.get("vcpus") or 0),
        "MEMORY_MB": int(flavor.get("ram") or 0),
        "DISK_GB": int(flavor.get("disk") or 0)
        + int(flavor.get("ephemeral") or 0)
        + math.ceil(int(flavor.get("swap") or 0) / 1024),
    }
    for key, value in (flavor.get("extra_specs") or {}).items():
        if key.startswith("resources:"):
            wanted[key.split(":", 1)[1]] = int(value)
    return {rc: n for rc, n in wanted.items() if n > 0}


def heal(
    placement: PlacementClient,
    compute: ComputeClient,
    instance: str | None = None,
    max_count: int | None = None,
    apply: bool = False,
    force: bool = False,
    progress: Progress | None = None,
) -> HealReport:
    placement.require("1.28", "healing allocations with the consumer generation")
    if instance:
        servers = [compute.get(f"/servers/{instance}")["server"]]
    else:
        servers = paged(compute, "/servers/detail", "servers", {"all_tenants": 1})
    hypervisors = compute.get("/os-hypervisors").get("hypervisors") or []
    host_rp = {h["hypervisor_hostname"]: str(h["id"]) for h in hypervisors}
    healings: list[Healing] = []
    skipped = []
    for n, server in enumerate(servers, 1):
        if progress:
            progress(n, len(servers))
        if max_count is not None and len(healings) >= max_count:
            break
        rp = host_rp.get(server.get("OS-EXT-SRV-ATTR:host") or "")
        if rp is None:
            skipped.append(server["id"])
            continue
        found = _heal_one(placement, server, rp, apply, force)
        if found is not None:
            healings.append(found)
    return HealReport(tuple(healings), checked=len(servers), skipped=tuple(skipped))


def _heal_one(
    placement: PlacementClient, server: dict[str, Any], rp: str, apply: bool, force: bool
) -> Healing | None:
    current = placement.consumer_allocations(server["id"])
    held = held_by(current["allocations"])
    incomplete = INCOMPLETE in (current.get("project_id"), current.get("user_id")) or (
        placement.at_least("1.38") and current.get("consumer_type") in (None, "unknown")
    )
    if not held or force:
        action = REPLACE if held else CREATE
        held = {rp: flavor_resources(server.get("flavor") or {})}
    elif incomplete:
        action = COMPLETE
    else:
        return None
    body = allocations_body(
        held, current.get("consumer_generation"), server.get("tenant_id"), server.get("user_id")
    )
    if placement.at_least("1.38"):
        body["consumer_type"] = "INSTANCE"
    if not apply:
        return Healing(server["id"], action, held)
    try:
        placement.put(f"/allocations/{server['id']}", body)
    except PlacementError as exc:
        return Healing(server["id"], action, held, error=exc.detail)
    return Healing(server["id"], action, held, applied=True)
