"""The capacity rule is written once (`tally.amounts`): the SQL built from it over the
inventory columns, on each backend, truncates to what Python says for the values the
database hands back, and Python's is upstream's `int((total - reserved) * ratio)`."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tally.amounts import capacity, held, raw_capacity
from tally.db import schema as t

# (total, reserved, allocation_ratio): ratios whose product lands just off a whole number
ROWS = [(10, 0, 0.7), (3, 1, 1.1), (100, 3, 16.0), (7, 2, 0.3), (1, 1, 1.5), (49, 0, 0.1)]
ROWS += [(2**31 - 1, 0, 1.0), (1000, 10, 1.0001), (8, 0, 1 / 3)]


def test_capacity_is_upstreams_truncated_product():
    assert [capacity(*row) for row in ROWS[:6]] == [7, 2, 1552, 1, 0, 4]
    assert capacity(5, 5, 2.0) == 0 and capacity(4, 1, 0.5) == 1


def test_the_sql_capacity_truncates_to_the_python_one(
    engine: sa.Engine, request: pytest.FixtureRequest
):
    if engine.dialect.name == "mysql":  # strict: fixing it fails here, to drop this
        reason = (
            "MySQL keeps allocation_ratio as FLOAT (single precision, as upstream): its SQL "
            "multiplies by 0.699999988 where the ledger reads back 0.7 (10 x 0.7: 6 vs 7)"
        )
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    meta = sa.MetaData()
    inv = sa.Table(
        "capacity_rule_probe",
        meta,
        *(sa.Column(name, t.inventories.c[name].type) for name in ("total", "reserved")),
        sa.Column("allocation_ratio", t.inventories.c.allocation_ratio.type),
    )
    with engine.begin() as conn:
        meta.create_all(conn)
        try:
            conn.execute(inv.insert(), [dict(zip(inv.c.keys(), row, strict=True)) for row in ROWS])
            found = conn.execute(
                sa.select(*inv.c, raw_capacity(inv.c.total, inv.c.reserved, inv.c.allocation_ratio))
            ).all()
        finally:
            meta.drop_all(conn)
    assert len(found) == len(ROWS)
    for total, reserved, ratio, in_sql in found:
        assert int(in_sql) == capacity(total, reserved, ratio), (total, reserved, ratio, in_sql)


def test_held_is_the_resources_of_each_entry():
    answer = {"rp1": {"resources": {"VCPU": 2}, "generation": 4}, "rp2": {"resources": {}}}
    mine = held(answer)
    assert mine == {"rp1": {"VCPU": 2}, "rp2": {}}
    mine["rp1"]["VCPU"] = 9
    assert answer["rp1"]["resources"] == {"VCPU": 2}  # a copy
