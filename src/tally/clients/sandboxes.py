"""What if: Tally's sandboxes (`/tally/v1/sandboxes`, admin only), over the one
PlacementClient. A sandbox is a copy-on-write overlay of the live cloud: changes
tried in it, reads inside it, its diff, and a commit guarded by every generation it
read (docs/reference.md, "What if: sandboxes").

Upstream Placement (a production cloud's) has no sandboxes: asking one for a
sandbox raises `NoSandboxes`, one line saying what-if needs Tally's API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tally.clients.errors import ClientError, PlacementError
from tally.clients.placement import Params, PlacementClient

PATH = "/tally/v1/sandboxes"
TRIAL_SECONDS = 600  # the life a command asks for the sandbox it tries changes in


class NoSandboxes(ClientError):
    """This Placement has no sandboxes: it is not Tally."""


def _missing(client: PlacementClient, exc: PlacementError) -> NoSandboxes:
    return NoSandboxes(
        f"what if needs Tally's API: the Placement at {client.base_url} has no sandboxes "
        f"({exc.method} {PATH} answered {exc.status}); upstream Placement has none"
    )


class Sandbox:
    """One sandbox, by its id."""

    def __init__(self, client: PlacementClient, sandbox_id: str) -> None:
        self.client, self.id = client, sandbox_id
        self.path = f"{PATH}/{sandbox_id}"

    @classmethod
    def create(cls, client: PlacementClient, ttl_seconds: int | None = None) -> Sandbox:
        """A new, empty sandbox; `NoSandboxes` from a Placement without them."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        try:
            made = client.post(PATH, body).json()
        except PlacementError as exc:
            if exc.status in (404, 405):
                raise _missing(client, exc) from exc
            raise
        return cls(client, made["id"])

    def show(self) -> dict[str, Any]:
        return self.client.get(self.path)

    def change(self, changes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Apply `changes` in order; each step made, with its verdict (`applied`,
        `error`: status, code, detail)."""
        return self.client.post(f"{self.path}/changes", {"changes": list(changes)}).json()["steps"]

    def diff(self) -> dict[str, Any]:
        """Per provider changed, before -> after; `failed`: the steps refused."""
        return self.client.get(f"{self.path}/diff")

    def amounts(self) -> dict[str, dict[str, dict[str, Any]]]:
        """As `PlacementClient.amounts`, inside: provider -> class -> total,
        reserved, allocation_ratio, capacity, used."""
        return self.client.get(f"{self.path}/amounts")["providers"]

    def candidates(self, params: Params) -> dict[str, Any]:
        """`GET /allocation_candidates` inside (the newest microversion's answer)."""
        return self.client.get(f"{self.path}/allocation_candidates", params)

    def why(self, params: Params) -> dict[str, Any]:
        """Why the query finds what it finds, inside (as `PlacementClient.why`)."""
        return self.client.get(f"{self.path}/allocation_candidates/why", params)

    def commit(self) -> dict[str, Any]:
        """Every applied step to the live cloud in one transaction; a PlacementError
        409 (its `moved`: what changed since it was read) and nothing written else."""
        return self.client.post(f"{self.path}/commit", None).json()

    def delete(self) -> None:
        """Gone, the live cloud left as it is (also when it went already)."""
        try:
            self.client.delete(self.path)
        except PlacementError as exc:
            if exc.status != 404:
                raise


@contextlib.contextmanager
def trial(client: PlacementClient, ttl_seconds: int = TRIAL_SECONDS) -> Iterator[Sandbox]:
    """A sandbox for one command's question, deleted when it is answered."""
    sandbox = Sandbox.create(client, ttl_seconds)
    try:
        yield sandbox
    finally:
        sandbox.delete()


def listing(client: PlacementClient) -> list[dict[str, Any]]:
    """The sandboxes alive, the newest first; `NoSandboxes` without them."""
    try:
        return client.get(PATH)["sandboxes"]
    except PlacementError as exc:
        if exc.status in (404, 405):
            raise _missing(client, exc) from exc
        raise
