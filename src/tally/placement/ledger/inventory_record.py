"""One inventory as the ledger reads and writes it: a resource class and its
amounts (shared by the inventory writes and the capacity guard that checks them)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from tally.amounts import capacity
from tally.db.schema import MAX_INT

FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


@dataclasses.dataclass(frozen=True)
class Record:
    """One inventory: a resource class and its amounts."""

    resource_class: str
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at

    def amounts(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}
