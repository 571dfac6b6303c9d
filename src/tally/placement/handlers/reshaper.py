"""Handler of POST /reshaper (from 1.30): replace the inventories of several
providers and the allocations of several consumers at once.

Version switches: the consumer part follows POST /allocations of the same
microversion (mappings accepted from 1.34, consumer_type required from 1.38).
"""

from __future__ import annotations

from typing import Any

import falcon

from tally.amounts import held
from tally.placement.context import Service
from tally.placement.handlers.common import read_body, since
from tally.placement.ledger import allocations, inventory
from tally.placement.ledger import reshaper as ledger


def _change(uuid: str, body: dict[str, Any]) -> ledger.InventoryChange:
    records = [
        inventory.Record(rc, **{k: amounts[k] for k in inventory.FIELDS if k in amounts})
        for rc, amounts in body["inventories"].items()
    ]
    return ledger.InventoryChange(uuid, body["resource_provider_generation"], records)


def _write(consumer_uuid: str, body: dict[str, Any]) -> allocations.ConsumerWrite:
    return allocations.ConsumerWrite(
        uuid=consumer_uuid,
        project_id=body["project_id"],
        user_id=body["user_id"],
        allocations=held(body["allocations"]),
        check_generation=True,
        generation=body["consumer_generation"],
        consumer_type=body.get("consumer_type"),
    )


class Reshaper:
    """/reshaper: POST only."""

    POLICIES = {"POST": "placement:reshaper:reshape"}

    def __init__(self, service: Service) -> None:
        self.service = service

    @since("1.30")
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """All of it in one transaction, or nothing; 204."""
        data = read_body(req)
        settings = self.service.settings
        ledger.reshape(
            self.service.engine,
            [_change(uuid, body) for uuid, body in data["inventories"].items()],
            [_write(uuid, body) for uuid, body in data["allocations"].items()],
            inventory.Rules(reserved_may_equal_total=True, over_capacity=settings.over_capacity),
            settings.allocation_conflict_retry_count,
        )
        resp.status = falcon.HTTP_204
