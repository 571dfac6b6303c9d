"""An id or name list as one parameter (`tally.db.bound_lists`), both forms, on every
backend: the rows are those of a plain `IN`, at any length (an empty list, one item,
past MySQL's `IN_LIST_MAX`); `among` leaves a long list to its caller only on MySQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tally.db.bound_lists import IN_LIST_MAX, among, in_bound_list

META = sa.MetaData()
ROWS = sa.Table(
    "bound_lists_probe",
    META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.Unicode(64), nullable=False),
)
COUNT = IN_LIST_MAX + 200
LENGTHS = [0, 1, 3, COUNT]


@pytest.fixture
def probe(engine: sa.Engine):
    with engine.begin() as conn:
        META.create_all(conn)
        conn.execute(ROWS.insert(), [{"id": i, "name": f"n-{i}-é"} for i in range(COUNT)])
    yield engine
    with engine.begin() as conn:
        META.drop_all(conn)


def wanted(length: int) -> tuple[list[int], list[str]]:
    ids = list(range(0, 2 * length, 2))  # every other row, and past the last (absent)
    return ids, [f"n-{i}-é" for i in ids]


def expected(ids: list[int]) -> list[int]:
    return sorted(i for i in ids if i < COUNT)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_list_bound_when_the_statement_runs(probe: sa.Engine, length: int):
    ids, names = wanted(length)
    by_id = sa.select(ROWS.c.id).where(in_bound_list(ROWS.c.id, "ids")).order_by(ROWS.c.id)
    by_name = sa.select(ROWS.c.id).where(in_bound_list(ROWS.c.name, "names")).order_by(ROWS.c.id)
    with probe.connect() as conn:
        assert conn.scalars(by_id, {"ids": ids}).all() == expected(ids)
        assert conn.scalars(by_name, {"names": names}).all() == expected(ids)
        assert conn.scalars(by_id, {"ids": ids[:1]}).all() == expected(ids[:1])  # (cached)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_list_known_now(probe: sa.Engine, length: int):
    ids, names = wanted(length)
    dialect = probe.dialect.name
    with probe.connect() as conn:
        for column, values in ((ROWS.c.id, ids), (ROWS.c.name, names)):
            condition = among(column, values, dialect)
            if dialect == "mysql" and length > IN_LIST_MAX:
                assert condition is None  # the caller filters another way
                continue
            query = sa.select(ROWS.c.id).where(condition).order_by(ROWS.c.id)
            assert conn.scalars(query).all() == expected(ids)
