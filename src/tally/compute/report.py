"""What the lab compute asks of Placement, as Nova's report client does, over the
project's one HTTP client (`clients.placement.PlacementClient`): in-process when
co-located, or any Placement URL (upstream included). Never Placement's tables.

Consumer writes carry the consumer generation (1.28) and, from 1.38, the consumer
type; a 409 `placement.concurrent_update` is retried after a fresh read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient

log = logging.getLogger("tally.compute.report")

Resources = Mapping[str, int]
Allocations = dict[str, dict[str, int]]  # provider uuid -> {class: amount}
CONCURRENT = "placement.concurrent_update"
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"
BATCH = 1000  # consumers per POST /allocations


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
        """Add or remove COMPUTE_STATUS_DISABLED (as nova-compute does); True if changed."""
        for _ in range(3):
            generation, traits = self.traits(uuid)
            if (DISABLED_TRAIT in traits) == disabled:
                return False
            wanted = traits | {DISABLED_TRAIT} if disabled else traits - {DISABLED_TRAIT}
            body = {"resource_provider_generation": generation, "traits": sorted(wanted)}
            try:
                self.client.put(f"/resource_providers/{uuid}/traits", body)
                return True
            except PlacementError as exc:
                if exc.code != CONCURRENT and exc.status != 409:
                    raise
        return False

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
        limit: int = 1000,
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
        found = self.allocations(consumer)["allocations"]
        return {rp: dict(a["resources"]) for rp, a in found.items()}

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
        body = self._consumer(allocations, project, user, consumer_type, generation)
        try:
            self.client.put(f"/allocations/{consumer}", body)
        except PlacementError as exc:
            if exc.status == 409:
                raise ClaimConflict(exc.detail) from exc
            raise

    def claim_many(self, claims: Mapping[str, tuple[Allocations, str, str, str]]) -> None:
        """New consumers (consumer -> (allocations, project, user, type)) by POST
        /allocations, BATCH at a time; all or none: earlier batches are released when
        a later one is refused (ClaimConflict)."""
        done: list[str] = []
        items = list(claims.items())
        for start in range(0, len(items), BATCH):
            chunk = dict(items[start : start + BATCH])
            body = {c: self._consumer(a, p, u, t, None) for c, (a, p, u, t) in chunk.items()}
            try:
                self.client.post("/allocations", body)
            except PlacementError as exc:
                self.release_many(done)
                if exc.status == 409:
                    raise ClaimConflict(exc.detail) from exc
                raise
            done.extend(chunk)

    def release_many(self, consumers: Iterable[str]) -> None:
        """Drop the allocations of consumers this lab just created (one POST a batch)."""
        consumers = list(consumers)
        for start in range(0, len(consumers), BATCH):
            body = {
                c: self._consumer({}, "lab", "lab", "INSTANCE", self._generation(c))
                for c in consumers[start : start + BATCH]
            }
            self.client.post("/allocations", body)

    def move(self, source: str, target: str, target_type: str) -> Allocations:
        """Move everything `source` holds to `target` in one POST /allocations (Nova's
        move_allocations): the migration takes the instance's source allocation, or
        gives it back. Returns what moved."""
        for _ in range(3):
            found = self.allocations(source)
            held = {rp: dict(a["resources"]) for rp, a in found["allocations"].items()}
            if not held:
                return {}
            target_found = self.allocations(target)
            project = found.get("project_id") or target_found.get("project_id") or "lab"
            user = found.get("user_id") or target_found.get("user_id") or "lab"
            source_type = found.get("consumer_type") or "INSTANCE"
            body = {
                source: self._consumer(
                    {}, project, user, source_type, found.get("consumer_generation")
                ),
                target: self._consumer(
                    held, project, user, target_type, target_found.get("consumer_generation")
                ),
            }
            try:
                self.client.post("/allocations", body)
                return held
            except PlacementError as exc:
                if exc.code != CONCURRENT:
                    raise
        raise ClaimConflict(f"allocations of {source} kept changing")

    def replace(self, consumer: str, allocations: Allocations, consumer_type: str) -> None:
        """Set a consumer's allocations (keeping its owner) with its generation."""
        if not allocations:
            self.release(consumer)
            return
        for _ in range(3):
            found = self.allocations(consumer)
            try:
                self.claim(
                    consumer,
                    allocations,
                    found.get("project_id") or "lab",
                    found.get("user_id") or "lab",
                    found.get("consumer_type") or consumer_type,
                    found.get("consumer_generation"),
                )
                return
            except ClaimConflict as exc:
                cause = exc.__cause__
                if not isinstance(cause, PlacementError) or cause.code != CONCURRENT:
                    raise

    def release(self, consumer: str) -> None:
        """DELETE /allocations/{consumer}; nothing held is fine."""
        try:
            self.client.delete(f"/allocations/{consumer}")
        except PlacementError as exc:
            if exc.status != 404:
                raise

    def _generation(self, consumer: str) -> int | None:
        return self.allocations(consumer).get("consumer_generation")

    def _consumer(
        self,
        allocations: Allocations,
        project: str,
        user: str,
        consumer_type: str,
        generation: int | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "allocations": {rp: {"resources": dict(res)} for rp, res in allocations.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": generation,
        }
        if self.typed:
            body["consumer_type"] = consumer_type
        return body
