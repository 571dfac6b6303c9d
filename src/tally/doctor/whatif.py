"""What if, over Tally's sandboxes (`tally.clients.sandboxes`): a plan (a list of
changes) tried, capacity counted after changes, and what a sandbox leaves per
provider (a host's drain predicted: `drain_what_if`). Nothing here writes to the
live cloud but a plan's commit, asked for."""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from typing import Any

from tally.clients import sandboxes
from tally.clients.errors import BadInput, PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor import fill

Amounts = Mapping[str, Mapping[str, Mapping[str, Any]]]  # provider -> class -> amounts
UUID_FIELDS = ("provider", "to", "template")  # fields of a change naming a provider


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
