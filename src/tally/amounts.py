"""Placement's amounts, one rule each: what an inventory may allocate (its capacity)
and what a consumer holds (its allocations read as provider -> resources). Every layer
asks here (the ledger and its SQL, the storage rules, the doctor, the lab, the books'
check), so no copy of a rule can drift from another.

`raw_capacity` is written once for numbers and for SQL column expressions alike: the
ledger's SQL builds its capacity with it, and tests/db/test_capacity_rule.py checks
that each backend's answer truncates to the Python one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

Amount = TypeVar("Amount")  # a number, or a SQL expression (sqlalchemy's operators)
Allocations = dict[str, dict[str, int]]  # provider uuid -> class -> amount


def raw_capacity(total: Amount, reserved: Amount, allocation_ratio: Any) -> Amount:
    """`(total - reserved) * allocation_ratio`, before truncation: over numbers, or over
    columns (a SQL expression)."""
    return (total - reserved) * allocation_ratio  # type: ignore[operator]


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """What may be allocated: `int((total - reserved) * allocation_ratio)`, as upstream
    Placement (the product of the same double, truncated)."""
    return int(raw_capacity(total, reserved, allocation_ratio))


def held(allocations: Mapping[str, Mapping[str, Any]]) -> Allocations:
    """Placement's `{key: {"resources": {...}, ...}}` (an allocations answer or body, a
    candidate's allocation request) as key -> resources, each a copy."""
    return {key: dict(entry["resources"]) for key, entry in allocations.items()}
