"""What the lab compute asks of Placement, as Nova's report client does, over the
project's one HTTP client (`clients.placement.PlacementClient`): in-process when
co-located, or any Placement URL (upstream included). Never Placement's tables.

Consumer writes carry the consumer generation (1.28) and, from 1.38, the consumer
type; a 409 `placement.concurrent_update` is retried after a fresh read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tally import amounts
from tally.clients import allocations as allocs
from tally.clients import races
from tally.clients.errors import GaveUp, PlacementError
from tally.clients.placement import PlacementClient
from tally.nova import scheduling

log = logging.getLogger("tally.compute.report")

Resources = Mapping[str, int]
Allocations = allocs.Allocations
DISABLED_TRAIT = scheduling.DISABLED_TRAIT
BATCH = 1000  # consumers per POST /allocations
INVENTORY_KEYS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


class ClaimConflict(Exception):
    """Placement refused a claim (capacity or a generation race): try elsewhere."""


class ReportClient:
    def __init__(self, client: PlacementClient) -> None:
        self.client = client

    @property
    def typed(self) -> bool:
        """Does the session speak consumer types (1.38)?"""
        return self.client.at_least("1.38")

    # ------------------------------------------------------------ providers

    def ensure_provider(self, uuid: str, name: str) -> None:
        try:
            self.client.get(f"/resource_providers/{uuid}")
        except PlacementError as exc:
            if exc.status != 404:
                raise
            self.client.post("/resource_providers", {"uuid": uuid, "name": name})

    def inventories(self, uuid: str) -> tuple[int, dict[str, dict[str, Any]]]:
        body = self.client.get(f"/resource_providers/{uuid}/inventories")
        return body["resource_provider_generation"], body["inventories"]

    def put_inventories(self, uuid: str, generation: int, inventories: Mapping) -> None:
        self.client.put_inventories(uuid, generation, inventories)

    def traits(self, uuid: str) -> tuple[int, set[str]]:
        body = self.client.get(f"/resource_providers/{uuid}/traits")
        return body["resource_provider_generation"], set(body["traits"])

    def set_disabled_trait(self, uuid: str, disabled: bool) -> bool:
        """Add or remove COMPUTE_STATUS_DISABLED (as nova-compute does); True if
        changed. GaveUp when every attempt lost the provider's generation race."""

        def once() -> bool:
            generation, traits = self.traits(uuid)
            if (DISABLED_TRAIT in traits) == disabled:
                return False
            wanted = traits | {DISABLED_TRAIT} if disabled else traits - {DISABLED_TRAIT}
            body = {"resource_provider_generation": generation, "traits": sorted(wanted)}
            self.client.put(f"/resource_providers/{uuid}/traits", body)
            return True

        return races.until_won(once, f"the traits of provider {uuid}", race=races.any_conflict)

    def update_inventories(self, uuid: str, wanted: Mapping[str, Mapping[str, Any]]) -> bool:
        """Write `wanted` as the provider's inventory unless Placement has it already
        (`same_inventory`); True if written. GaveUp when every attempt lost the
        provider's generation race."""

        def once() -> bool:
            generation, current = self.inventories(uuid)
            if same_inventory(current, wanted):
                return False
            self.put_inventories(uuid, generation, wanted)
            return True

        return races.until_won(once, f"the inventory of provider {uuid}")

    def delete_provider(self, uuid: str) -> None:
        """PlacementError (409 when allocations remain) is the caller's to judge."""
        self.client.delete(f"/resource_providers/{uuid}")

    def provider_named(self, name: str) -> str | None:
        """The uuid of the provider called `name`, if there is one."""
        found = self.client.get("/resource_providers", {"name": name})["resource_providers"]
        return found[0]["uuid"] if found else None

    def provider_consumers(self, uuid: str) -> set[str] | None:
        """Who holds allocations on the provider; None when there is no such provider."""
        try:
            return set(self.client.provider_allocations(uuid))
        except PlacementError as exc:
            if exc.status != 404:
                raise
            return None

    def candidates(
        self,
        resources: Resources,
        *,
        limit: int = scheduling.LIMIT,
        in_tree: str | None = None,
        exclude_disabled: bool = True,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "resources": ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items())),
            "limit": str(limit),
        }
        if exclude_disabled and self.client.at_least("1.22"):
            params["required"] = f"!{DISABLED_TRAIT}"
        if in_tree:
            params["in_tree"] = in_tree
        return self.client.get("/allocation_candidates", params)

    # ------------------------------------------------------------ consumers

    def allocations(self, consumer: str) -> dict[str, Any]:
        """GET /allocations/{consumer}: allocations per provider, generation, owner, type."""
        return self.client.get(f"/allocations/{consumer}")

    def held(self, consumer: str) -> Allocations:
        return amounts.held(self.allocations(consumer)["allocations"])

    def claim(
        self,
        consumer: str,
        allocations: Allocations,
        project: str,
        user: str,
        consumer_type: str,
        generation: int | None = None,
    ) -> None:
        """PUT /allocations/{consumer}; ClaimConflict on a 409."""
        wanted = allocs.Consumer(consumer, allocations, project, user, generation, consumer_type)
        with _conflicts():
            allocs.write(self.client, wanted)

    def claim_many(self, claims: Mapping[str, tuple[Allocations, str, str, str]]) -> None:
        """New consumers (consumer -> (allocations, project, user, type)) by POST
        /allocations, BATCH at a time; all or none: earlier batches are released when
        a later one is refused (ClaimConflict)."""
        done: list[str] = []
        items = list(claims.items())
        for start in range(0, len(items), BATCH):
            chunk = [
                allocs.Consumer(c, a, p, u, None, t)
                for c, (a, p, u, t) in items[start : start + BATCH]
            ]
            try:
                with _conflicts():
                    allocs.write_many(self.client, chunk)
            except (ClaimConflict, PlacementError):
                self.release_many(done)
                raise
            done.extend(c.uuid for c in chunk)

    def release_many(self, consumers: Iterable[str]) -> None:
        """Drop the allocations of consumers this lab just created (one POST a batch)."""
        consumers = list(consumers)
        for start in range(0, len(consumers), BATCH):
            emptied = [
                dataclasses.replace(allocs.read(self.client, c), allocations={})
                for c in consumers[start : start + BATCH]
            ]
            allocs.write_many(self.client, [_owned(c, "INSTANCE") for c in emptied])

    def move(self, source: str, target: str, target_type: str) -> Allocations:
        """Move everything `source` holds to `target` in one POST /allocations (Nova's
        move_allocations, which overwrites what the target held): the migration takes
        the instance's source allocation, or gives it back. Returns what moved."""
        with _conflicts():
            return allocs.move(
                self.client, source, target, target_type=target_type, target_keeps=_nothing
            )

    def replace(self, consumer: str, allocations: Allocations, consumer_type: str) -> None:
        """Set a consumer's allocations (keeping its owner) with its generation;
        ClaimConflict when refused or when every attempt lost the generation race."""
        if not allocations:
            self.release(consumer)
            return

        def change(current: allocs.Consumer) -> allocs.Consumer:
            return _owned(dataclasses.replace(current, allocations=allocations), consumer_type)

        with _conflicts():
            allocs.update(self.client, consumer, change)

    def release(self, consumer: str) -> None:
        """DELETE /allocations/{consumer}; nothing held is fine."""
        try:
            self.client.delete(f"/allocations/{consumer}")
        except PlacementError as exc:
            if exc.status != 404:
                raise


def _owned(consumer: allocs.Consumer, consumer_type: str) -> allocs.Consumer:
    """The consumer with an owner and a type (the lab's when it has none)."""
    return dataclasses.replace(
        consumer,
        project_id=consumer.project_id or "lab",
        user_id=consumer.user_id or "lab",
        consumer_type=consumer.consumer_type or consumer_type,
    )


def same_inventory(current: Mapping[str, Mapping], wanted: Mapping[str, Mapping]) -> bool:
    """Placement's inventory already says what `wanted` does (the same classes,
    the same values of `INVENTORY_KEYS`)."""
    if set(current) != set(wanted):
        return False
    return all(
        float(current[rc].get(k, 0)) == float(wanted[rc][k])
        for rc in wanted
        for k in INVENTORY_KEYS
    )


def _nothing(_: str) -> bool:
    return False


@contextlib.contextmanager
def _conflicts() -> Iterator[None]:
    """A 409 from Placement, or a generation race lost every time: ClaimConflict."""
    try:
        yield
    except GaveUp as exc:
        raise ClaimConflict(str(exc)) from exc
    except PlacementError as exc:
        if exc.status == 409:
            raise ClaimConflict(exc.detail) from exc
        raise
