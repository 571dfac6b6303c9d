"""JSON schemas of /resource_providers, as tables of (first microversion, schema).

`for_version(TABLE, version)` picks the schema of the newest row not newer than
the request. Query-string values are checked here only for shape; their
grammar (resources, required, member_of) is parsed in `placement.queryparams`.
"""

from __future__ import annotations

from typing import Any

Table = tuple[tuple[tuple[int, int], dict[str, Any]], ...]

_UUID = {"type": "string", "format": "uuid"}
_NAME = {"type": "string", "maxLength": 200}
_PARENT = {"anyOf": [_UUID, {"type": "null"}]}


def _body(*, with_uuid: bool, with_parent: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {"name": _NAME}
    if with_uuid:
        properties["uuid"] = _UUID
    if with_parent:
        properties["parent_provider_uuid"] = _PARENT
    return {
        "type": "object",
        "properties": properties,
        "required": ["name"],  # PUT too: a rename or re-parent always restates the name
        "additionalProperties": False,
    }


def _query(*names: str) -> dict[str, Any]:
    kinds = {"uuid": _UUID, "in_tree": _UUID}
    return {
        "type": "object",
        "properties": {name: kinds.get(name, {"type": "string"}) for name in names},
        "additionalProperties": False,
    }


POST: Table = (
    ((1, 0), _body(with_uuid=True, with_parent=False)),
    ((1, 14), _body(with_uuid=True, with_parent=True)),  # nested providers
)

PUT: Table = (
    ((1, 0), _body(with_uuid=False, with_parent=False)),
    ((1, 14), _body(with_uuid=False, with_parent=True)),
)

LIST_QUERY: Table = (
    ((1, 0), _query("name", "uuid")),
    ((1, 3), _query("name", "uuid", "member_of")),
    ((1, 4), _query("name", "uuid", "member_of", "resources")),
    ((1, 14), _query("name", "uuid", "member_of", "resources", "in_tree")),
    ((1, 18), _query("name", "uuid", "member_of", "resources", "in_tree", "required")),
)


def for_version(table: Table, version: tuple[int, int]) -> dict[str, Any]:
    chosen = table[0][1]
    for first, schema in table:
        if version >= first:
            chosen = schema
    return chosen
