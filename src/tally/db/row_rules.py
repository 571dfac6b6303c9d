"""The ledger's rules for one stored inventory row, as the API enforces them on the
way in. `tally db check` and `tally db import` refuse books that break them
(tally.books.check); a search that meets such a row anyway (written by hand, or by an
older tool) leaves it out with a warning instead of failing every caller."""

from __future__ import annotations

import functools
import math
from typing import Any

import sqlalchemy as sa

from tally.amounts import raw_capacity
from tally.db.schema import MAX_CAPACITY, MAX_INT, inventories

LOWEST = {"total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1}  # in order


def whole_in(value: Any, low: int, high: int = MAX_INT) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def inventory_fault(
    total: Any, reserved: Any, ratio: Any, min_unit: Any, max_unit: Any, step_size: Any
) -> tuple[str, str] | None:
    """(the kind of fault, the values that show it) of one inventory; None: sound."""
    amounts = (total, reserved, min_unit, max_unit, step_size)
    if not all(map(whole_in, amounts, LOWEST.values())):  # (a catch-up checks thousands)
        values = dict(zip(LOWEST, amounts, strict=True))
        bad = [field for field, low in LOWEST.items() if not whole_in(values[field], low)]
        return (
            "an inventory amount not a whole number in range (total, reserved, units)",
            ", ".join(f"{field}={values[field]!r}" for field in bad),
        )
    if min_unit > max_unit:
        return "an inventory whose min_unit is above its max_unit", f"{min_unit} > {max_unit}"
    if not isinstance(ratio, int | float) or not math.isfinite(ratio) or ratio <= 0:
        return "an allocation_ratio not a positive finite number", repr(ratio)
    if raw_capacity(total, reserved, ratio) > MAX_CAPACITY:
        return "a capacity past what the ledger counts exactly", f"ratio {ratio!r}"
    return None


def stored_fault(row: Any) -> tuple[str, str] | None:
    """`inventory_fault` of a row with the inventory's columns as attributes (a
    claim on such a row is refused rather than dividing by a step of 0)."""
    return _fault_of_values(
        row.total, row.reserved, row.allocation_ratio, row.min_unit, row.max_unit, row.step_size
    )


# A batch's claim checks thousands of rows, most of them alike: each set of values
# once (typed: True is no 1 here).
_fault_of_values = functools.lru_cache(maxsize=4096, typed=True)(inventory_fault)


def sound_inventory(inv: sa.Table | sa.Alias = inventories) -> sa.ColumnElement[bool]:
    """`inventory_fault` is None, in SQL, for the rows of `inv`: what a search
    reads. The capacity test divides rather than multiplies (a ratio of 1e308
    overflows PostgreSQL's double) and by NULLIF (no division by zero)."""
    return sa.and_(
        inv.c.total >= 1,
        inv.c.reserved >= 0,
        inv.c.min_unit >= 1,
        inv.c.min_unit <= inv.c.max_unit,
        inv.c.step_size >= 1,
        inv.c.allocation_ratio > 0,
        sa.or_(
            inv.c.total <= inv.c.reserved,
            inv.c.allocation_ratio
            <= sa.literal(float(MAX_CAPACITY)) / sa.func.nullif(inv.c.total - inv.c.reserved, 0),
        ),
    )
