"""One operation of the API as data: what a (method, route) reads and answers at
each microversion.

Each resource's schema module declares its operations in one `OPERATIONS` table
of these, keyed by (method, route) as the route table spells the route;
`schemas.table` joins them. The one validator (`handlers.common.read_body`,
`read_query`) and the OpenAPI document (`placement.openapi`) both read it, so a
schema is named once: in its row.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

Version = tuple[int, int]
Schema = dict[str, Any]
T = TypeVar("T")
# (first microversion, value), oldest first: a value holds from its version until
# the next row's.
Rows = tuple[tuple[Version, T], ...]
# A success answer's body: one schema, a function of the microversion (for a
# schema with its own switches), or None for an empty answer.
AnswerSchema = Schema | Callable[[Version], Schema] | None
Answers = Mapping[int, AnswerSchema]  # success status -> its schema
Key = tuple[str, str]  # (method, route)


def at(rows: Rows[T], version: Version) -> T:
    """The value of the newest row not newer than `version` (LookupError before the first)."""
    found: list[T] = [value for first, value in rows if version >= first]
    if not found:
        raise LookupError(f"no row for microversion {version} in {[f for f, _ in rows]}")
    return found[-1]


def always(value: T) -> Rows[T]:
    """Rows of one value, the same at every microversion the operation answers at."""
    return (((1, 0), value),)


@dataclasses.dataclass(frozen=True)
class Operation:
    """What one operation reads and answers, per microversion (each a table of rows).

    answers: success status -> body schema (None: an empty answer)
    query:   the JSON schema of the query string (no rows: it reads none)
    body:    the JSON schema of the request body (no rows, or a None row: it takes none)
    path:    path parameters narrower than a string (default: a string; `uuid`
             and `consumer_uuid` a uuid)
    """

    answers: Rows[Answers]
    query: Rows[Schema] = ()
    body: Rows[Schema | None] = ()
    path: Mapping[str, Schema] = dataclasses.field(default_factory=dict)

    def answers_at(self, version: Version) -> dict[int, Schema | None]:
        return {
            status: schema(version) if callable(schema) else schema
            for status, schema in at(self.answers, version).items()
        }

    def query_at(self, version: Version) -> Schema | None:
        return at(self.query, version) if self.query else None

    def body_at(self, version: Version) -> Schema | None:
        return at(self.body, version) if self.body else None

    @functools.cached_property
    def path_schema(self) -> Schema:
        """The path parameters of `path` as one object schema (built once: the
        validator keeps one compiled validator per schema object)."""
        return {"type": "object", "properties": dict(self.path)}


NO_CONTENT: Rows[Answers] = always({204: None})
