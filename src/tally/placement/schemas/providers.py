"""/resource_providers and /resource_providers/{uuid}: request schemas and answer
schemas per microversion, in `OPERATIONS`. Query-string values are checked here
only for shape; their grammar (resources, required, member_of) is parsed in
`placement.queryparams`.
"""

from __future__ import annotations

from typing import Any

from tally.placement.schemas.answer_schemas import (
    GENERATION,
    LINKS,
    NULLABLE_UUID,
    STR,
    UUID,
    array,
    obj,
)
from tally.placement.schemas.operation import (
    NO_CONTENT,
    Key,
    Operation,
    Rows,
    Schema,
    Version,
    always,
)

TREES = (1, 14)  # parent/root uuids in bodies, parent_provider_uuid in requests
POST_RETURNS_BODY = (1, 20)
# Links of a provider beyond `self`, with the microversion that added each.
LINKS_SINCE: tuple[tuple[str, Version], ...] = (
    ("inventories", (1, 0)),
    ("usages", (1, 0)),
    ("aggregates", (1, 1)),
    ("traits", (1, 6)),
    ("allocations", (1, 11)),
)

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


POST: Rows[Schema] = (
    ((1, 0), _body(with_uuid=True, with_parent=False)),
    (TREES, _body(with_uuid=True, with_parent=True)),  # nested providers
)
PUT: Rows[Schema] = (
    ((1, 0), _body(with_uuid=False, with_parent=False)),
    (TREES, _body(with_uuid=False, with_parent=True)),
)
LIST_QUERY: Rows[Schema] = (
    ((1, 0), _query("name", "uuid")),
    ((1, 3), _query("name", "uuid", "member_of")),
    ((1, 4), _query("name", "uuid", "member_of", "resources")),
    (TREES, _query("name", "uuid", "member_of", "resources", "in_tree")),
    ((1, 18), _query("name", "uuid", "member_of", "resources", "in_tree", "required")),
)


def provider(v: Version) -> Schema:
    """One provider as answers show it."""
    properties = {"uuid": UUID, "name": STR, "generation": GENERATION, "links": LINKS}
    if v >= TREES:
        properties["parent_provider_uuid"] = NULLABLE_UUID
        properties["root_provider_uuid"] = UUID
    return obj(**properties)


def link_rels(v: Version) -> list[str]:
    """The `rel`s of a provider's links beyond `self` at `v`."""
    return [rel for rel, first in LINKS_SINCE if v >= first]


def provider_list(v: Version) -> Schema:
    return obj(resource_providers=array(provider(v)))


OPERATIONS: dict[Key, Operation] = {
    ("GET", "/resource_providers"): Operation(always({200: provider_list}), query=LIST_QUERY),
    ("POST", "/resource_providers"): Operation(
        (((1, 0), {201: None}), (POST_RETURNS_BODY, {200: provider})), body=POST
    ),
    ("GET", "/resource_providers/{uuid}"): Operation(always({200: provider})),
    ("PUT", "/resource_providers/{uuid}"): Operation(always({200: provider}), body=PUT),
    ("DELETE", "/resource_providers/{uuid}"): Operation(NO_CONTENT),
}
