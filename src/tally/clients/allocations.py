"""A consumer's allocations, read and written at the session's microversion: the one
place that knows Placement's allocation bodies (the list form before 1.12, owners from
1.8, consumer generations from 1.28, consumer types from 1.38), each write retried
after a lost generation race (`races.until_won`, which raises GaveUp when it gives up).

The CLI, the doctor and the lab compute all write allocations through here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tally.amounts import held
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.clients.races import ATTEMPTS, until_won

Allocations = dict[str, dict[str, int]]  # provider uuid -> {class: amount}


@dataclasses.dataclass(frozen=True)
class Consumer:
    """A consumer as `GET /allocations/{uuid}` shows it at the session's microversion."""

    uuid: str
    allocations: Allocations
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str | None = None


def read(client: PlacementClient, uuid: str) -> Consumer:
    found = client.consumer_allocations(uuid)
    return Consumer(
        uuid,
        held(found.get("allocations") or {}),
        found.get("project_id"),
        found.get("user_id"),
        found.get("consumer_generation"),
        found.get("consumer_type"),
    )


def body(client: PlacementClient, consumer: Consumer) -> dict[str, Any]:
    """The body writing `consumer.allocations` (whole) in the session's format."""
    if client.at_least("1.12"):
        data: dict[str, Any] = {
            "allocations": {rp: {"resources": dict(r)} for rp, r in consumer.allocations.items()}
        }
    else:
        data = {
            "allocations": [
                {"resource_provider": {"uuid": rp}, "resources": dict(r)}
                for rp, r in consumer.allocations.items()
            ]
        }
    if client.at_least("1.8"):
        data.update(project_id=consumer.project_id, user_id=consumer.user_id)
    if client.at_least("1.28"):
        data["consumer_generation"] = consumer.generation
    if client.at_least("1.38"):
        data["consumer_type"] = consumer.consumer_type
    return data


def write(client: PlacementClient, consumer: Consumer) -> None:
    """PUT the consumer's whole allocations (an empty one releases them, checking the
    generation from 1.28; before that a DELETE)."""
    if not consumer.allocations and not client.at_least("1.28"):
        try:
            client.delete(f"/allocations/{consumer.uuid}")
        except PlacementError as exc:
            if exc.status != 404:
                raise
        return
    client.put(f"/allocations/{consumer.uuid}", body(client, consumer))


def write_many(client: PlacementClient, consumers: list[Consumer]) -> None:
    """One POST /allocations (1.13+) writing every consumer at once, all or none."""
    client.require("1.13", "writing several consumers at once")
    payload = {c.uuid: body(client, c) for c in consumers}
    client.post("/allocations", payload)


def update(
    client: PlacementClient,
    uuid: str,
    change: Callable[[Consumer], Consumer | None],
    attempts: int = ATTEMPTS,
) -> Consumer | None:
    """Read the consumer, let `change` say what it should become (None: leave it),
    write that with the generation read; on a generation race read and try again.
    The consumer as written (None when nothing was); GaveUp when every try lost."""
    return until_won(
        lambda: _update_once(client, uuid, change),
        f"the allocations of consumer {uuid}",
        attempts=attempts,
    )


def move(
    client: PlacementClient,
    source: str,
    target: str,
    pick: Callable[[str], bool] = lambda rp: True,
    target_type: str | None = None,
    target_keeps: Callable[[str], bool] = lambda rp: True,
    attempts: int = ATTEMPTS,
) -> Allocations:
    """Move what `source` holds on the providers `pick` accepts to `target` in one
    POST /allocations (Nova's move_allocations): both written with their generations;
    `target` keeps only what it holds on providers `target_keeps` accepts. Returns
    what moved ({} when nothing did)."""
    client.require("1.28", "moving allocations between consumers")

    def once() -> Allocations:
        src, dst = read(client, source), read(client, target)
        moving = {rp: r for rp, r in src.allocations.items() if pick(rp)}
        if not moving:
            return {}
        kept = {rp: r for rp, r in src.allocations.items() if rp not in moving}
        merged = {rp: dict(r) for rp, r in dst.allocations.items() if target_keeps(rp)}
        for rp, resources in moving.items():
            for rc, amount in resources.items():
                merged.setdefault(rp, {})[rc] = merged.get(rp, {}).get(rc, 0) + amount
        owner = {
            "project_id": dst.project_id or src.project_id,
            "user_id": dst.user_id or src.user_id,
        }
        write_many(
            client,
            [
                dataclasses.replace(src, allocations=kept),
                dataclasses.replace(
                    dst,
                    allocations=merged,
                    consumer_type=dst.consumer_type or target_type or src.consumer_type,
                    **owner,
                ),
            ],
        )
        return moving

    return until_won(once, f"the allocations of consumer {source}", attempts=attempts)


def _update_once(
    client: PlacementClient, uuid: str, change: Callable[[Consumer], Consumer | None]
) -> Consumer | None:
    current = read(client, uuid)
    wanted = change(current)
    if wanted is None or wanted == current:
        return None
    wanted = dataclasses.replace(wanted, uuid=uuid, generation=current.generation)
    write(client, wanted)
    return wanted
