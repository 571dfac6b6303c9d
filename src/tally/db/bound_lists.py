"""`column IN (a list)`, the list sent as one parameter where the database takes one:
the one rule for every id or name list the ledger sends, in two forms.

- `in_bound_list(column, name)`: a statement built once, the list bound by `name` when
  it runs (the ledger's cached statements);
- `among(column, ids, dialect)`: the list known now (None on a database that takes it
  only item by item when it is longer than `IN_LIST_MAX`: the caller filters another
  way).

How each database gets the list:
- PostgreSQL: one array parameter, `column = ANY(:list)`. SQLAlchemy's expanding
  parameter wrote one placeholder per item: a claim of a thousand consumers sent
  statements with thousands of them, which the driver rewrote and PostgreSQL parsed
  and planned in more time than it read the rows.
- SQLite: one JSON text parameter, `column IN (SELECT value FROM json_each(:list))`:
  the statement's text the same whatever the length, and no limit on the number of
  variables.
- MySQL (and any other): the list expanded, one placeholder per item; past
  `IN_LIST_MAX` items the optimizer may give up its range plan, so `among` leaves
  such a list to the caller (a statement built once, `in_bound_list`, expands any
  length).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import visitors

IN_LIST_MAX = 1000  # ids in one IN list of a database that takes no list as one parameter


class JsonList(sa.types.TypeDecorator):
    """A list bound as its JSON text (SQLite's `json_each` reads it back)."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return None if value is None else json.dumps(list(value))


def _as_array(column: sa.ColumnElement, param: sa.BindParameter) -> sa.ColumnElement[bool]:
    return column == sa.any_(param)


def _from_json(column: sa.ColumnElement, param: sa.BindParameter) -> sa.ColumnElement[bool]:
    each = sa.func.json_each(param).table_valued("value")
    return column.in_(sa.select(each.c.value))


class InBoundList(sa.ColumnElement[bool]):
    """`column IN :name`, `name` a list given when the statement runs."""

    type = sa.Boolean()
    inherit_cache = True
    _is_implicitly_boolean = True  # (a condition as it stands, not `... = 1`)
    _traverse_internals = [
        ("column", visitors.InternalTraversal.dp_clauseelement),
        ("name", visitors.InternalTraversal.dp_string),
    ]

    def __init__(self, column: sa.ColumnElement, name: str) -> None:
        self.column = column
        self.name = name

    @property
    def _from_objects(self) -> list:  # (the column's table joins the FROM list)
        return self.column._from_objects


def in_bound_list(column: sa.ColumnElement, name: str) -> InBoundList:
    """`column IN :name`, the list bound when the statement runs (see the module)."""
    return InBoundList(column, name)


def among(
    column: sa.ColumnElement, ids: Collection[Any], dialect: str
) -> sa.ColumnElement[bool] | None:
    """`column IN ids`, the list sent as `dialect` takes it (see the module); None
    when that is item by item and they are more than `IN_LIST_MAX`: the caller
    filters another way."""
    ids = sorted(ids)
    if dialect == "postgresql":
        return _as_array(column, sa.literal(ids, postgresql.ARRAY(column.type)))
    if dialect == "sqlite":
        return _from_json(column, sa.literal(ids, JsonList()))
    return column.in_(ids) if len(ids) <= IN_LIST_MAX else None


@compiles(InBoundList)
def _expanding(element: InBoundList, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.column.in_(sa.bindparam(element.name, expanding=True)), **kw)


@compiles(InBoundList, "postgresql")
def _one_array(element: InBoundList, compiler: Any, **kw: Any) -> str:
    array = sa.bindparam(element.name, type_=postgresql.ARRAY(element.column.type))
    return compiler.process(_as_array(element.column, array), **kw)


@compiles(InBoundList, "sqlite")
def _one_json_text(element: InBoundList, compiler: Any, **kw: Any) -> str:
    text = sa.bindparam(element.name, type_=JsonList())
    return compiler.process(_from_json(element.column, text), **kw)
