"""`column IN (a list bound at execution)`, sent the cheapest way each database takes.

SQLAlchemy's expanding parameter writes one placeholder per item into the SQL:
a claim of a thousand consumers sent statements with thousands of them, which the
driver rewrote and PostgreSQL parsed and planned in more time than it read the
rows. On PostgreSQL the list goes as one array parameter (`= ANY(:name)`), the
statement's text the same whatever the list's length; elsewhere it expands.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import visitors


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


@compiles(InBoundList)
def _expanding(element: InBoundList, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.column.in_(sa.bindparam(element.name, expanding=True)), **kw)


@compiles(InBoundList, "postgresql")
def _one_array(element: InBoundList, compiler: Any, **kw: Any) -> str:
    array = sa.bindparam(element.name, type_=postgresql.ARRAY(element.column.type))
    return compiler.process(element.column == sa.any_(array), **kw)
