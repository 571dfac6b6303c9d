"""`tally drain HOST --what-if`: the drain's plan tried in a sandbox of Tally's, as
`tally drain HOST --apply` would carry it out: the plan is `drain_check`'s (each
server's host the scheduler's choice, `tally.nova.scheduling`, the lab scheduler's
own), then, in a sandbox, HOST disabled and each server moved to its host in the
order the compute API lists them, each move judged by the sandbox as the real claim
would be. A server the plan blocks fails with the plan's reason (the one the
`--apply` refuses with), and one that no host has room for adds the sandbox's why
(the closest hosts and what each misses). The sandbox is deleted after: nothing is
written."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tally.clients import sandboxes
from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import drain_check
from tally.doctor.whatif import Row, names_of, provider_rows
from tally.nova import fill, scheduling
from tally.nova.shapes import query_value

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
    plan = drain_check.plan(placement, compute, host)
    names = names_of(placement)
    moves = []
    with sandboxes.trial(placement) as box:
        if plan.provider:
            box.change([{"kind": "disable", "provider": plan.provider}])
        for one in plan.servers:
            moves.append(_try(box, one, plan))
        rows = provider_rows(box.diff(), placement.amounts(), box.amounts(), names)
    moved = {m.server for m in moves if m.outcome == "moves"}
    held = placement.provider_allocations(plan.provider) if plan.provider else {}
    left = {c: r for c, r in held.items() if c not in moved}
    return DrainPrediction(host, plan.provider, tuple(moves), left, rows)


def _try(box: sandboxes.Sandbox, one: drain_check.Planned, plan: drain_check.Plan) -> Move:
    """One server's live migration as the plan has it, the move judged by the
    sandbox as the claim would be."""
    if one.blocker:
        reason = one.blocker
        if one.no_room:
            reason += f"; {_no_host(box, one.held, plan.hosts, plan.provider)}"
        return Move(one.server, one.name, "fails", reason=reason)
    if one.target_uuid is None:
        why = "it holds nothing here in Placement: the scheduler places it by its flavor"
        return Move(one.server, one.name, "moves", reason=why)
    (step,) = box.change([{"kind": "move", "consumer": one.server, "to": one.target_uuid}])
    if not step["applied"]:
        return Move(one.server, one.name, "fails", reason=step["error"]["detail"])
    return Move(one.server, one.name, "moves", to=one.target)


def _no_host(
    box: sandboxes.Sandbox, held: Mapping[str, int], hosts: Mapping[str, str], source: str | None
) -> str:
    """Why no host, inside the sandbox (the moves before this one made): the hosts
    with room the scheduler may not use, or the closest hosts and what each misses."""
    params = {"resources": query_value(dict(held)), "required": f"!{scheduling.DISABLED_TRAIT}"}
    answer = box.candidates({**params, "limit": scheduling.LIMIT})
    summaries = answer.get("provider_summaries") or {}
    roomy = {fill.host_of(a, summaries) for a in fill.allocation_requests(answer)}
    skipped = sorted(roomy - set(hosts) - {source})
    if skipped:
        return f"the hosts with room have no compute service up and enabled ({len(skipped)})"
    verdict = box.why(params)
    closest = [c for c in verdict.get("closest", []) if c.get("root") != source]
    misses = "; ".join(
        f"{c.get('name') or c['root']}: {', '.join(c.get('reasons', []))}"
        for c in closest[:CLOSEST_SHOWN]
    )
    return f"closest: {misses}" if misses else "no host is close"
