"""`insert_at_commit`: the rows a write leaves for its COMMIT (on PostgreSQL one
JSON parameter read by position) arrive exactly as given, on every backend, and a
value the column cannot hold fails the write instead of being cut to fit."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import insert_at_commit, transaction

AWKWARD = ['it\'s "quoted"', "back\\slash", "tab\tnew\nline", "ünïcödé ✓", "{[,]}", "", None]


def history_rows() -> list[dict]:
    stamp = dt.datetime(2026, 12, 4, 10, 11, 12, 345678)
    return [
        {
            "created_at": stamp + dt.timedelta(microseconds=n),
            "action": "allocate",
            "request_id": text,
            "consumer_uuid": f"{n:08d}-0000-0000-0000-000000000000",
            "consumer_generation": n,
            "amount_before": -(2**40) + n,
            "amount_after": None if n % 2 else 2**40,
            "detail": text,
        }
        for n, text in enumerate(AWKWARD)
    ]


def test_rows_arrive_as_given(engine):
    rows = history_rows()
    with transaction(engine, write=True) as conn:
        insert_at_commit(conn, t.history, rows)
    columns = [t.history.c[name] for name in rows[0]]
    with engine.connect() as conn:
        stored = conn.execute(sa.select(*columns).order_by(t.history.c.id)).mappings().all()
    assert [dict(row) for row in stored] == rows


def test_a_float_and_the_other_columns_of_an_inventory(engine):
    # a float no decimal spells short (MySQL's FLOAT keeps 4 bytes: a plain one there)
    ratio = 1.5 if engine.dialect.name == "mysql" else 0.1 + 0.2
    with transaction(engine, write=True) as conn:
        conn.execute(
            t.resource_providers.insert(),
            {"uuid": "11111111-2222-3333-4444-555555555555", "name": "rp", "generation": 0},
        )
        rp_id = conn.execute(sa.select(t.resource_providers.c.id)).scalar_one()
        rc_id = conn.execute(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == "VCPU")
        ).scalar_one()
        row = {
            "resource_provider_id": rp_id,
            "resource_class_id": rc_id,
            "total": 2**31 - 1,
            "reserved": 0,
            "min_unit": 1,
            "max_unit": 7,
            "step_size": 1,
            "allocation_ratio": ratio,
        }
        insert_at_commit(conn, t.inventories, [row])
    with engine.connect() as conn:
        stored = conn.execute(sa.select(*(t.inventories.c[name] for name in row))).one()
    assert stored._asdict() == row


def test_a_value_too_long_for_its_column_fails_the_write(engine):
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite keeps a string of any length in a VARCHAR(n) column")
    rows = history_rows()
    rows[-1]["action"] = "x" * 33  # VARCHAR(32)
    with pytest.raises(sa.exc.DBAPIError), transaction(engine, write=True) as conn:
        insert_at_commit(conn, t.history, rows)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.history)).scalar() == 0
