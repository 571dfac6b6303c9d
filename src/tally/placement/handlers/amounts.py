"""Handler of Tally's amounts of many providers: GET /tally/v1/amounts (admin only,
policy `tally:amounts:list`; see tally.placement.schemas.amounts)."""

from __future__ import annotations

from typing import Any

import falcon

from tally.placement.context import Service
from tally.placement.handlers.common import read_query
from tally.placement.ledger import usages as ledger
from tally.placement.schemas import amounts as schemas

PATH = schemas.PATH


class Amounts:
    """/tally/v1/amounts: {"providers": {uuid: {class: {total, reserved,
    allocation_ratio, capacity, used}}}} of every provider with an inventory."""

    POLICIES = {"GET": "tally:amounts:list"}

    def __init__(self, service: Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        read_query(req)  # validated: no parameters
        providers: dict[str, dict[str, Any]] = {}
        for a in ledger.amounts(self.service.engine):
            providers.setdefault(a.provider, {})[a.resource_class] = {
                "total": a.total,
                "reserved": a.reserved,
                "allocation_ratio": a.allocation_ratio,
                "capacity": a.capacity,
                "used": a.used,
            }
        resp.media = {"providers": providers}
