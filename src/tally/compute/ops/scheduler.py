"""Scheduling as Nova does it since Queens: ask Placement for allocation candidates,
drop hosts that are down or disabled (the ComputeFilter), weigh by free RAM
(spreading, like the RAMWeigher), and claim; the choice is `tally.nova.scheduling`'s,
which `tally drain` checks its plan with (and `--what-if` tries). A claim refused
with 409 (another claim won the race) makes a fresh query and another try.

Many servers of one request (multi-create, the lab's bulk path) are placed from one
candidates answer, on the free capacity its provider summaries report, and claimed
with POST /allocations, up to a thousand consumers a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tally.compute.context import Lab
from tally.compute.errors import NoValidHost
from tally.compute.report import ClaimConflict
from tally.compute.store import hosts as host_store
from tally.nova import scheduling
from tally.retrying import retried

ATTEMPTS = 3
T = TypeVar("T")


def select(
    lab: Lab,
    resources: Mapping[str, int],
    count: int,
    *,
    forced_host: Mapping[str, Any] | None = None,
    exclude: Sequence[str] = (),
) -> list[str]:
    """Provider uuids for `count` servers (one each); NoValidHost when they do not fit."""
    body = lab.placement.candidates(
        resources,
        in_tree=forced_host["provider_uuid"] if forced_host else None,
        exclude_disabled=forced_host is None,
    )
    hosts = {h["provider_uuid"]: h for h in host_store.listing(lab.engine)}
    usable = {
        rp: h["name"]
        for rp, h in hosts.items()
        if not h["forced_down"] and not (h["disabled"] and forced_host is None)
    }
    picks = [p.host for p in scheduling.place(body, usable, count, exclude)]
    if len(picks) < count:
        raise NoValidHost()
    return picks


def claim_new(
    lab: Lab,
    consumers: Sequence[str],
    resources: Mapping[str, int],
    project: str,
    user: str,
    *,
    forced_host: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Place and claim new servers: consumer -> provider uuid (all or none)."""

    def once() -> dict[str, str]:
        picks = select(lab, resources, len(consumers), forced_host=forced_host)
        if len(consumers) == 1:
            lab.placement.claim(
                consumers[0], {picks[0]: dict(resources)}, project, user, "INSTANCE"
            )
        else:
            lab.placement.claim_many(
                {
                    c: ({rp: dict(resources)}, project, user, "INSTANCE")
                    for c, rp in zip(consumers, picks, strict=True)
                }
            )
        return dict(zip(consumers, picks, strict=True))

    return _until_claimed(once)


def claim_destination(
    lab: Lab,
    server: Mapping[str, Any],
    resources: Mapping[str, int],
    *,
    keep: Mapping[str, Mapping[str, int]] | None = None,
    forced_host: Mapping[str, Any] | None = None,
    exclude: Sequence[str] = (),
) -> str:
    """The instance's claim on a move's destination (its source allocation is the
    migration's by now; an evacuation `keep`s it on the instance as well)."""

    def once() -> str:
        rp = select(lab, resources, 1, forced_host=forced_host, exclude=exclude)[0]
        found = lab.placement.allocations(server["uuid"])
        wanted = {p: dict(r) for p, r in (keep or {}).items()}
        wanted[rp] = dict(resources)
        lab.placement.claim(
            server["uuid"],
            wanted,
            server["project_id"],
            server["user_id"],
            "INSTANCE",
            found.get("consumer_generation"),
        )
        return rp

    return _until_claimed(once)


def _until_claimed(once: Callable[[], T]) -> T:
    """A claim another claim beat (ClaimConflict) is placed afresh and tried again,
    `ATTEMPTS` times in all; then NoValidHost."""
    return retried(once, attempts=ATTEMPTS, on=(ClaimConflict,), gave_up=lambda _: NoValidHost())
