"""GET /allocation_candidates (from 1.10): the query string, as rows of (first
microversion, schema), and the answer's shape, in `OPERATIONS`. Values are
checked here only for shape: the grammar of resources, required and member_of is
parsed by `placement.candidate_query` (with `queryparams`).
"""

from __future__ import annotations

from typing import Any

from tally.placement.schemas.answer_schemas import (
    AMOUNTS,
    INT,
    NULLABLE_UUID,
    STR,
    TEXT_OR_NULL,
    UUID,
    array,
    mapping,
    obj,
)
from tally.placement.schemas.operation import Key, Operation, Rows, Schema, Version, always

DICT_ALLOCATIONS = (1, 12)  # allocations keyed by provider uuid, as PUT /allocations takes
SUMMARY_TRAITS = (1, 17)
SUMMARY_TREES = (1, 29)  # parent and root provider uuids in summaries
MAPPINGS = (1, 34)  # which providers satisfied which request group

# Group suffixes: numbers before 1.33, then 1-64 of [a-zA-Z0-9_-].
NUMBERED_SUFFIX = r"[1-9][0-9]*"
NAMED_SUFFIX = r"[a-zA-Z0-9_-]{1,64}"

_STRING = {"type": "string"}
_LIMIT = {
    # A query value is always a string; the pattern is what rejects 0, -1 and 'cow'.
    "type": ["integer", "string"],
    "pattern": "^[1-9][0-9]*$",
    "minimum": 1,
    "minLength": 1,
}
_GROUP_POLICY = {"type": "string", "enum": ["none", "isolate"]}


def _flat(*names: str) -> dict[str, Any]:
    """Before 1.25: one group, plain keys."""
    kinds = {"limit": _LIMIT}
    return {
        "type": "object",
        "properties": {name: kinds.get(name, _STRING) for name in names},
        "required": ["resources"],
        "additionalProperties": False,
    }


def _grouped(suffix: str, prefixes: tuple[str, ...], *extra: str) -> dict[str, Any]:
    """From 1.25: `resources`, `required`, ... with an optional group suffix."""
    properties: dict[str, Any] = {"limit": _LIMIT, "group_policy": _GROUP_POLICY}
    properties.update({name: _STRING for name in extra})
    return {
        "type": "object",
        "properties": properties,
        "patternProperties": {f"^{prefix}({suffix})?$": _STRING for prefix in prefixes},
        "additionalProperties": False,
    }


_GROUP_KEYS = ("resources", "required", "member_of")
_GROUP_KEYS_TREE = (*_GROUP_KEYS, "in_tree")

GET_QUERY: Rows[Schema] = (
    ((1, 10), _flat("resources")),
    ((1, 16), _flat("resources", "limit")),
    ((1, 17), _flat("resources", "limit", "required")),
    ((1, 21), _flat("resources", "limit", "required", "member_of")),
    ((1, 25), _grouped(NUMBERED_SUFFIX, _GROUP_KEYS)),
    ((1, 31), _grouped(NUMBERED_SUFFIX, _GROUP_KEYS_TREE)),
    ((1, 33), _grouped(NAMED_SUFFIX, _GROUP_KEYS_TREE)),
    ((1, 35), _grouped(NAMED_SUFFIX, _GROUP_KEYS_TREE, "root_required")),
    ((1, 36), _grouped(NAMED_SUFFIX, _GROUP_KEYS_TREE, "root_required", "same_subtree")),
)


def allocation_candidates(v: Version) -> Schema:
    if v >= DICT_ALLOCATIONS:
        held = mapping(obj(resources=AMOUNTS))
    else:
        held = array(obj(resource_provider=obj(uuid=UUID), resources=AMOUNTS))
    request = {"allocations": held}
    if v >= MAPPINGS:
        request["mappings"] = mapping(array(UUID))
    summary = {"resources": mapping(obj(capacity=INT, used=INT))}
    if v >= SUMMARY_TRAITS:
        summary["traits"] = array(STR)
    if v >= SUMMARY_TREES:
        summary["parent_provider_uuid"] = NULLABLE_UUID
        summary["root_provider_uuid"] = UUID
    return obj(
        allocation_requests=array(obj(**request)), provider_summaries=mapping(obj(**summary))
    )


# Tally's own: why a request finds what it finds (`ledger.candidates.why`), for the
# same query string, read as the newest microversion reads it (which reads every
# older one's too).
WHY_PATH = "/tally/v1/allocation_candidates/why"
VERDICT = obj(
    candidates=INT,
    trees=INT,
    fits=INT,
    dominant=TEXT_OR_NULL,
    constraints=array(obj(constraint=STR, kind=STR, group=TEXT_OR_NULL, rules_out=INT)),
    closest=array(
        obj(root=UUID, name=TEXT_OR_NULL, reasons=array(STR), distance={"type": "number"})
    ),
)

OPERATIONS: dict[Key, Operation] = {
    ("GET", "/allocation_candidates"): Operation(
        always({200: allocation_candidates}), query=GET_QUERY
    ),
    ("GET", WHY_PATH): Operation(always({200: VERDICT}), query=always(GET_QUERY[-1][1])),
}
