"""Query-string schema of GET /allocation_candidates, as a table of
(first microversion, schema); `for_version` picks the newest row not newer than
the request. Values are checked here only for shape: the grammar of resources,
required and member_of is parsed by `placement.candidate_query` (with `queryparams`).
"""

from __future__ import annotations

from typing import Any

Table = tuple[tuple[tuple[int, int], dict[str, Any]], ...]

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

GET_QUERY: Table = (
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


def for_version(table: Table, version: tuple[int, int]) -> dict[str, Any]:
    chosen = table[0][1]
    for since, schema in table:
        if version >= since:
            chosen = schema
    return chosen
