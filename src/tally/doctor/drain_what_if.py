"""`tally drain HOST --what-if`: the drain predicted in a sandbox of Tally's, as
`tally drain HOST --apply` would run it through the compute API: HOST disabled,
then each of its servers in the order the compute API lists them, each
live-migrated where the scheduler would put it (`tally.nova.scheduling`, the lab
scheduler's own choice, over the candidates asked inside the sandbox) and the move
judged by the sandbox as the real claim would be. The sandbox is deleted after:
nothing is written."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from typing import Any

from tally.clients import allocations as allocs
from tally.clients import sandboxes
from tally.clients.compute import ComputeClient
from tally.clients.errors import ClientError
from tally.clients.placement import PlacementClient
from tally.doctor.cloud import paged
from tally.doctor.whatif import Row, names_of, provider_rows
from tally.nova import scheduling

CLOSEST_SHOWN = 3  # closest hosts a server with no valid host names


@dataclasses.dataclass(frozen=True)
class Move:
    """One server of the host: where it would go, or why it would stay."""

    server: str
    name: str | None
    outcome: str  # "moves" | "fails"
    to: str | None = None  # the host it goes to
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class DrainPrediction:
    host: str
    provider: str | None
    moves: tuple[Move, ...]
    left: dict[str, dict[str, int]]  # consumer -> what it would still hold on the host
    rows: list[Row]

    @property
    def drained(self) -> bool:
        return all(m.outcome == "moves" for m in self.moves) and not self.left

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "provider": self.provider,
            "what_if": True,
            "moves": [dataclasses.asdict(m) for m in self.moves],
            "left": self.left,
            "providers": [r.as_dict() for r in self.rows],
            "drained": self.drained,
            "written": False,
        }


def predict(placement: PlacementClient, compute: ComputeClient, host: str) -> DrainPrediction:
    """What `drain(host, apply=True)` would do, tried in a sandbox deleted after."""
    services = compute.get("/os-services", {"binary": "nova-compute"})["services"]
    own = [s for s in services if s.get("host") == host]
    if not own:
        raise ClientError(f"no nova-compute service on host {host}")
    names = names_of(placement)
    provider = next((u for u, n in names.items() if n == host), None)
    up = {s["host"] for s in services if _usable(s) and s["host"] != host}
    usable = {u: n for u, n in names.items() if n in up}
    source_down = not _up(own[0])
    servers = list(paged(compute, "/servers/detail", "servers", {"all_tenants": 1, "host": host}))
    moves = []
    with sandboxes.trial(placement) as box:
        if provider:
            box.change([{"kind": "disable", "provider": provider}])
        for server in servers:
            refused = _refused(server, host, source_down)
            if refused:
                moves.append(Move(server["id"], server.get("name"), "fails", reason=refused))
            else:
                moves.append(_move(placement, box, server, provider, usable))
        rows = provider_rows(box.diff(), placement.amounts(), box.amounts(), names)
    moved = {m.server for m in moves if m.outcome == "moves"}
    held = placement.provider_allocations(provider) if provider else {}
    left = {c: r for c, r in held.items() if c not in moved}
    return DrainPrediction(host, provider, tuple(moves), left, rows)


def _up(service: Mapping[str, Any]) -> bool:
    return service.get("state") == "up" and not service.get("forced_down")


def _usable(service: Mapping[str, Any]) -> bool:
    """The ComputeFilter: a compute service up and enabled."""
    return _up(service) and service.get("status") == "enabled"


def _move(
    placement: PlacementClient,
    box: sandboxes.Sandbox,
    server: Mapping[str, Any],
    source: str | None,
    usable: Mapping[str, str],
) -> Move:
    """One server's live migration, placed as the scheduler would place it and
    judged by the sandbox as the claim would be."""
    uuid, name = server["id"], server.get("name")
    held = allocs.read(placement, uuid).allocations
    shape: collections.Counter = collections.Counter()
    for resources in held.values():
        shape.update(resources)
    if not shape:
        return Move(uuid, name, "fails", reason="it holds nothing in Placement to move")
    params = {
        "resources": ",".join(f"{rc}:{n}" for rc, n in sorted(shape.items())),
        "required": f"!{scheduling.DISABLED_TRAIT}",
        "limit": scheduling.LIMIT,
    }
    answer = box.candidates(params)
    exclude = frozenset({source} if source else ())
    chosen = scheduling.choose(answer, usable, shape, exclude)
    if chosen is None:
        return Move(uuid, name, "fails", reason=_no_host(box, params, answer, usable, exclude))
    (step,) = box.change([{"kind": "move", "consumer": uuid, "to": chosen}])
    if not step["applied"]:
        return Move(uuid, name, "fails", reason=step["error"]["detail"])
    return Move(uuid, name, "moves", to=usable[chosen])


def _refused(server: Mapping[str, Any], host: str, source_down: bool) -> str | None:
    """Why the compute API would refuse to start the live migration, if it would."""
    if source_down:
        return f"the compute service of {host} is down"
    vm_state = server.get("OS-EXT-STS:vm_state")
    task_state = server.get("OS-EXT-STS:task_state")
    if vm_state != "active" or task_state:
        return f"cannot live-migrate it in vm_state {vm_state}, task_state {task_state}"
    return None


def _no_host(
    box: sandboxes.Sandbox,
    params: Mapping[str, Any],
    answer: Mapping[str, Any],
    usable: Mapping[str, str],
    exclude: frozenset[str],
) -> str:
    """Nova's words, then why: the hosts with room the scheduler skips, or the
    closest hosts and what each misses (the sandbox's why)."""
    said = "No valid host was found"
    roomy = {
        next(iter(r["allocations"]))
        for r in answer.get("allocation_requests", [])
        if len(r["allocations"]) == 1
    }
    skipped = sorted(roomy - set(usable) - exclude)
    if skipped:
        return (
            f"{said}: the hosts with room have no compute service up and enabled ({len(skipped)})"
        )
    verdict = box.why({k: v for k, v in params.items() if k != "limit"})
    closest = [c for c in verdict.get("closest", []) if c.get("root") not in exclude]
    misses = "; ".join(
        f"{c.get('name') or c['root']}: {', '.join(c.get('reasons', []))}"
        for c in closest[:CLOSEST_SHOWN]
    )
    return f"{said}: {misses}" if misses else said
