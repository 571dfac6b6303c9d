"""The what-if pages' data, read through the sandbox API (`tally.clients.sandboxes`)
as the CLI reads it: the sandboxes alive, and one sandbox's diff against the live
cloud (per provider, used and capacity before and after; the steps refused, why).
Read-only: the page neither changes nor commits a sandbox."""

from __future__ import annotations

import dataclasses
from typing import Any

from tally.clients import sandboxes
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.whatif import Row, names_of, provider_rows

UNREADABLE = (401, 403, 404, 405)  # this Placement keeps none, or not for this caller


@dataclasses.dataclass(frozen=True)
class SandboxView:
    sandbox: dict[str, Any]  # id, created_at, expires_at, revision, steps
    rows: list[Row]
    applied: int
    failed: list[dict[str, Any]]  # change, kind, subject, error


def listing(client: PlacementClient) -> list[dict[str, Any]] | None:
    """The sandboxes alive, newest first; None when this Placement has none to read."""
    try:
        return sandboxes.listing(client)
    except sandboxes.NoSandboxes:
        return None
    except PlacementError as exc:
        if exc.status in UNREADABLE:
            return None
        raise


def sandbox_view(client: PlacementClient, sandbox_id: str) -> SandboxView:
    """One sandbox and its diff; a PlacementError 404 when there is no such sandbox."""
    box = sandboxes.Sandbox(client, sandbox_id)
    shown, diff = box.show(), box.diff()
    rows = provider_rows(diff, client.amounts(), box.amounts(), names_of(client))
    return SandboxView(shown, rows, diff["applied"], diff["failed"])
