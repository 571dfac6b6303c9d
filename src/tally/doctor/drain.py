"""Drain a compute host before taking it away: disable its service with a reason,
live-migrate each of its servers, wait for each migration to end, then check its
provider holds no allocations and report what is left. `wait` is called between
polls (a sleep, or the lab's step in tests).

Whether it can be done is checked first, without writing (`tally.doctor.drain_check`):
a dry run reports the plan and what stops it; an applied drain whose plan is stopped
writes nothing. When every live migration is refused all the same, the service is
enabled again as it was.

The host stays disabled afterwards (nothing is scheduled there until it is enabled
again): every plan step that drains says so, with `enable_command`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from tally.clients.compute import ComputeClient, ComputeError
from tally.clients.placement import PlacementClient
from tally.doctor import drain_check
from tally.doctor.cloud import MIGRATION_OVER
from tally.progress import Progress, quiet

REASON = "drained by tally"


def enable_command(host: str) -> str:
    """The command that lets the scheduler use a drained host again."""
    return f"openstack compute service set --enable {host} nova-compute"


def stays_disabled(host: str) -> str:
    """What every step that drains `host` says of it."""
    return (
        f"{host} stays disabled afterwards (nothing new is scheduled there); "
        f"enable it again with: {enable_command(host)}"
    )


@dataclasses.dataclass(frozen=True)
class Move:
    server: str
    # planned | blocked (a dry run, or a plan refused) | completed | error | ... (the
    # migration's status) | timeout
    status: str
    migration: str | None = None
    error: str | None = None
    target: str | None = None  # planned: a host the check found room on


@dataclasses.dataclass(frozen=True)
class DrainReport:
    host: str
    provider: str | None
    applied: bool  # something was written
    moves: tuple[Move, ...]
    # consumer -> what it holds on the provider: after the drain; in a dry run (or
    # a plan refused), what no migration would take away
    left: dict[str, dict[str, int]]
    blockers: tuple[str, ...] = ()  # why the plan cannot be carried out
    was_disabled: bool = False  # the service, before

    @property
    def drained(self) -> bool:
        ok = all(m.status in ("completed", "done") for m in self.moves)
        return self.applied and ok and not self.left

    @property
    def feasible(self) -> bool:
        return not self.blockers

    @property
    def pending(self) -> bool:
        """Would an applied drain write anything (disable, migrate)?"""
        return bool(self.moves) or not self.was_disabled

    def as_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "drained": self.drained,
            "feasible": self.feasible,
            "stays_disabled": stays_disabled(self.host),
            "enable_command": enable_command(self.host),
        }


def drain(
    placement: PlacementClient,
    compute: ComputeClient,
    host: str,
    apply: bool = False,
    reason: str = REASON,
    wait: Callable[[], None] | None = None,
    timeout: float = 600.0,
    progress: Progress = quiet,
) -> DrainReport:
    plan = drain_check.plan(placement, compute, host, progress)
    service, provider = plan.service, plan.provider
    was_disabled = service.get("status") == "disabled"
    if not apply or plan.blockers:
        moves = tuple(
            Move(p.server, "blocked" if p.blocker else "planned", error=p.blocker, target=p.target)
            for p in plan.servers
        )
        return DrainReport(host, provider, False, moves, plan.left, plan.blockers, was_disabled)
    _disable(compute, service, host, reason)
    servers = [p.server for p in plan.servers]
    started: dict[str, Move] = {}
    for server in servers:
        try:
            compute.post(f"/servers/{server}/action", _live_migration(compute))
            started[server] = Move(server, "started")
        except ComputeError as exc:
            started[server] = Move(server, "error", error=exc.detail)
    if servers and not any(m.status == "started" for m in started.values()) and not was_disabled:
        _enable(compute, service, host)
        undone = f"every live migration was refused: {host} is enabled again, as it was"
        moves = tuple(started.values())
        return DrainReport(host, provider, False, moves, plan.left, (undone,), was_disabled)
    moves = _wait(compute, started, wait or (lambda: time.sleep(2)), timeout, progress)
    return DrainReport(host, provider, True, moves, _left(placement, provider), (), was_disabled)


def _disable(compute: ComputeClient, service: dict[str, Any], host: str, reason: str) -> None:
    """Disable the service with a reason: by its uuid from 2.53, by host before."""
    if compute.at_least("2.53"):
        body = {"status": "disabled", "disabled_reason": reason}
        compute.put(f"/os-services/{service['id']}", body)
    else:
        body = {"host": host, "binary": "nova-compute", "disabled_reason": reason}
        compute.put("/os-services/disable-log-reason", body)


def _enable(compute: ComputeClient, service: dict[str, Any], host: str) -> None:
    """Undo `_disable`."""
    if compute.at_least("2.53"):
        compute.put(f"/os-services/{service['id']}", {"status": "enabled"})
    else:
        compute.put("/os-services/enable", {"host": host, "binary": "nova-compute"})


def _live_migration(compute: ComputeClient) -> dict[str, Any]:
    """`os-migrateLive` to a host the scheduler picks, in the version's words."""
    if compute.at_least("2.25"):
        return {"os-migrateLive": {"host": None, "block_migration": "auto"}}
    return {"os-migrateLive": {"host": None, "block_migration": False, "disk_over_commit": False}}


def _wait(
    compute: ComputeClient,
    moves: dict[str, Move],
    wait: Callable[[], None],
    timeout: float,
    progress: Progress,
) -> tuple[Move, ...]:
    deadline = time.monotonic() + timeout
    pending = [s for s, m in moves.items() if m.status == "started"]
    while pending:
        for server in list(pending):
            found = compute.get("/os-migrations", {"instance_uuid": server})["migrations"]
            live = [
                m for m in found if m.get("migration_type", "live-migration") == "live-migration"
            ]
            latest = max(live, key=lambda m: m["id"], default=None)
            if latest and latest["status"] in MIGRATION_OVER:
                moves[server] = Move(server, latest["status"], latest.get("uuid"))
                pending.remove(server)
        progress("live-migrate", len(moves) - len(pending), len(moves))
        if not pending:
            break
        if time.monotonic() > deadline:
            for server in pending:
                moves[server] = Move(server, "timeout")
            break
        wait()
    return tuple(moves.values())


def _left(placement: PlacementClient, provider: str | None) -> dict[str, dict[str, int]]:
    return placement.provider_allocations(provider) if provider else {}
