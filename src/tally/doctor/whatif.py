"""What if, over Tally's sandboxes (`tally.clients.sandboxes`): a host's drain
predicted, a plan (a list of changes) tried, and what either leaves per provider.
Nothing here writes to the live cloud but a plan's commit, asked for.

The drain is predicted as `tally drain HOST --apply` would run it through the compute
API: HOST disabled, then each of its servers in the order the compute API lists
them, each live-migrated where the scheduler would put it (`tally.nova.scheduling`,
the lab scheduler's own choice, over the candidates asked inside the sandbox) and
the move judged by the sandbox as the real claim would be.
"""

from __future__ import annotations

import collections
import dataclasses
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from typing import Any

from tally.clients import allocations as allocs
from tally.clients import sandboxes
from tally.clients.compute import ComputeClient
from tally.clients.errors import BadInput, ClientError, PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor import fill
from tally.doctor.cloud import paged
from tally.nova import scheduling

Amounts = Mapping[str, Mapping[str, Mapping[str, Any]]]  # provider -> class -> amounts
UUID_FIELDS = ("provider", "to", "template")  # fields of a change naming a provider
CLOSEST_SHOWN = 3


@dataclasses.dataclass(frozen=True)
class Row:
    """One class of one provider a sandbox changed: used and capacity, before and
    after (None: the provider is not there)."""

    provider: str  # its name (its uuid when it has none)
    uuid: str
    resource_class: str
    used_before: int | None
    used_after: int | None
    capacity_before: int | None
    capacity_after: int | None
    note: str = ""  # removed; traits changed

    @property
    def fits(self) -> bool:
        return self.used_after is None or self.used_after <= (self.capacity_after or 0)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "fits": self.fits}


def provider_rows(
    diff: Mapping[str, Any], before: Amounts, after: Amounts, names: Mapping[str, str]
) -> list[Row]:
    """A row per class of each provider in the sandbox's `diff` whose usage or
    inventory record changed (one row without a class for a provider whose traits alone
    changed), by provider name then class; `before` and `after` are the amounts
    outside and inside (`GET /tally/v1/amounts`)."""
    rows = []
    for uuid, changed in diff["providers"].items():
        classes = set(changed.get("usages", {}))
        inventories = changed.get("inventories") or {}
        was, now = inventories.get("before") or {}, inventories.get("after") or {}
        classes |= {rc for rc in was.keys() | now.keys() if was.get(rc) != now.get(rc)}
        if changed.get("removed"):
            classes |= set(before.get(uuid, {}))
        note = _note(changed)
        name = names.get(uuid) or uuid
        was, now = before.get(uuid, {}), after.get(uuid, {})
        for rc in sorted(classes) or [""]:
            b, a = was.get(rc), now.get(rc)
            rows.append(
                Row(
                    name,
                    uuid,
                    rc,
                    b["used"] if b else None,
                    a["used"] if a else None,
                    b["capacity"] if b else None,
                    a["capacity"] if a else None,
                    note,
                )
            )
    return sorted(rows, key=lambda r: (r.provider, r.uuid, r.resource_class))


def _note(changed: Mapping[str, Any]) -> str:
    if changed.get("removed"):
        return "removed"
    traits = changed.get("traits")
    if not traits:
        return ""
    was, now = set(traits["before"]), set(traits["after"])
    return "traits " + " ".join(
        [f"+{t}" for t in sorted(now - was)] + [f"-{t}" for t in sorted(was - now)]
    )


def names_of(client: PlacementClient) -> dict[str, str]:
    """Provider uuid -> name, of every provider."""
    return {p["uuid"]: p["name"] for p in client.get("/resource_providers")["resource_providers"]}


# ---------------------------------------------------------------- a drain


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


def predict_drain(placement: PlacementClient, compute: ComputeClient, host: str) -> DrainPrediction:
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


# ---------------------------------------------------------------- capacity after


def retire(providers: Sequence[str]) -> list[dict[str, Any]]:
    """The changes that take hosts away: each disabled (so none takes another's
    servers), each drained (its consumers moved where the search puts them
    first), then each provider's tree removed."""
    return (
        [{"kind": "disable", "provider": p} for p in providers]
        + [{"kind": "drain", "provider": p} for p in providers]
        + [{"kind": "remove", "provider": p, "tree": True} for p in providers]
    )


@dataclasses.dataclass(frozen=True)
class CapacityAfter:
    report: fill.CapacityReport
    failed: list[dict[str, Any]]  # the steps of the changes refused


def capacity_after(
    placement: PlacementClient,
    shape: fill.Shape,
    changes: Sequence[Mapping[str, Any]],
    by: str = "provider",
) -> CapacityAfter:
    """How many more of `shape` fit once `changes` are made, counted in a sandbox
    deleted after."""
    with sandboxes.trial(placement) as box:
        steps = _changed(box, changes)
        report = fill.read_capacity(placement, shape, by, candidates=box.candidates)
    return CapacityAfter(report, [s for s in steps if not s["applied"]])


# ---------------------------------------------------------------- a plan


@dataclasses.dataclass(frozen=True)
class PlanReport:
    steps: list[dict[str, Any]]  # each step made, with its verdict
    failed: list[dict[str, Any]]  # the steps refused: change, kind, subject, error
    rows: list[Row]
    committed: bool = False
    refused: str | None = None  # why a commit asked for was refused (409: what moved)

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "failed": self.failed,
            "providers": [r.as_dict() for r in self.rows],
            "committed": self.committed,
            "refused": self.refused,
        }


def try_plan(
    placement: PlacementClient, changes: Sequence[Mapping[str, Any]], commit: bool = False
) -> PlanReport:
    """The changes tried in a sandbox: each step's verdict and the providers after;
    with `commit`, written in one transaction when every step applies (a 409 when
    something it read moved meanwhile: `refused`, nothing written)."""
    with sandboxes.trial(placement) as box:
        steps = _changed(box, changes)
        diff = box.diff()
        rows = provider_rows(diff, placement.amounts(), box.amounts(), names_of(placement))
        if not commit or diff["failed"]:
            return PlanReport(steps, diff["failed"], rows)
        try:
            box.commit()
        except PlacementError as exc:
            if exc.status != 409:
                raise
            return PlanReport(steps, [], rows, refused=exc.detail)
        return PlanReport(steps, [], rows, committed=True)


def _changed(box: sandboxes.Sandbox, changes: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The steps of `changes`; BadInput when the API does not take them (400: their
    shape, or a kind this Tally's sandboxes do not have)."""
    try:
        return box.change(changes)
    except PlacementError as exc:
        if exc.status != 400:
            raise
        raise BadInput(f"the sandbox API does not take these changes: {exc.detail}") from exc


def with_uuids(placement: PlacementClient, changes: Sequence[Any]) -> list[dict[str, Any]]:
    """The changes, each provider named by its name (`provider`, `to`, `template`)
    given its uuid; BadInput for a change that is not an object or a name matching none."""
    found: dict[str, str] = {}
    done = []
    for n, change in enumerate(changes, 1):
        if not isinstance(change, Mapping):
            raise BadInput(f"change {n} is not an object with a kind: {change!r}")
        change = dict(change)
        for field in UUID_FIELDS:
            value = change.get(field)
            if isinstance(value, str) and value != "anywhere" and not _is_uuid(value):
                if value not in found:
                    found[value] = _provider_named(placement, value, n, field)
                change[field] = found[value]
        done.append(change)
    return done


def _provider_named(placement: PlacementClient, name: str, n: int, field: str) -> str:
    listed = placement.get("/resource_providers", {"name": name})["resource_providers"]
    if len(listed) != 1:
        raise BadInput(f"change {n}: {field} {name!r} is no resource provider's uuid or name")
    return listed[0]["uuid"]


def _is_uuid(text: str) -> bool:
    try:
        uuidlib.UUID(text)
    except ValueError:
        return False
    return True
