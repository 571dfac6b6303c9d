"""What if: sandboxes (issue 41), Tally's own API under /tally/v1/sandboxes, not
microversioned: request and answer schemas in `OPERATIONS`.

    GET    /tally/v1/sandboxes                     those not expired, newest first
    POST   /tally/v1/sandboxes                     {"ttl_seconds"?} -> 201 the sandbox
    GET    /tally/v1/sandboxes/{sandbox}           the sandbox
    DELETE /tally/v1/sandboxes/{sandbox}           204
    POST   .../{sandbox}/changes                   {"changes": [change, ...]} -> the steps
    GET    .../{sandbox}/diff                      per provider before -> after; refusals
    POST   .../{sandbox}/commit                    applied in one transaction, or 409
    GET    .../{sandbox}/allocation_candidates     as GET /allocation_candidates (1.39)
    GET    .../{sandbox}/allocation_candidates/why as GET /tally/v1/allocation_candidates/why
    GET    .../{sandbox}/resource_providers/{uuid}/usages
    GET    .../{sandbox}/amounts                   as GET /tally/v1/amounts
"""

from __future__ import annotations

import copy
from typing import Any

from tally.placement.schemas import amounts, candidates, inventories, traits, usages
from tally.placement.schemas.answer_schemas import (
    INT,
    STR,
    UUID,
    array,
    mapping,
    obj,
)
from tally.placement.schemas.domain import MAX_INT
from tally.placement.schemas.operation import NO_CONTENT, Key, Operation, always

PATH = "/tally/v1/sandboxes"
ITEM = PATH + "/{sandbox}"
CHANGES = ITEM + "/changes"
DIFF = ITEM + "/diff"
COMMIT = ITEM + "/commit"
CANDIDATES = ITEM + "/allocation_candidates"
WHY = CANDIDATES + "/why"
USAGES = ITEM + "/resource_providers/{uuid}/usages"
AMOUNTS = ITEM + "/amounts"

_UUID_IN = {"type": "string", "format": "uuid"}
_CLASS = {"type": "string", "pattern": inventories.RESOURCE_CLASS_PATTERN}
_COUNT = {"type": "integer", "minimum": 1, "maximum": 1000}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 255}
_FIELDS = {
    k: v for k, v in inventories.RECORD_PROPERTIES.items() if k != "resource_provider_generation"
}

# kind -> the fields it requires (the others it takes are optional)
REQUIRED = {
    "move": ["consumer", "to"],
    "resize": ["consumer", "resources"],
    "boot": ["query"],
    "inventory": ["provider", "resource_class"],
    "remove": ["provider"],
    "disable": ["provider"],
    "drain": ["provider"],
    "add": [],  # a provider (uuid, name: made up when absent), or `template` and `count`
}
_ADD_OWN = ["provider", "name", "parent", "inventories", "traits"]  # (not with a template)
_RECORD = {
    "type": "object",
    "properties": copy.deepcopy(_FIELDS),
    "required": ["total"],
    "additionalProperties": False,
}

CHANGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"enum": list(REQUIRED)},
        "consumer": _UUID_IN,
        "to": {"anyOf": [_UUID_IN, {"const": "anywhere"}]},
        "resources": {
            "type": "object",
            "propertyNames": _CLASS,
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
            "minProperties": 1,
        },
        "query": {"type": "string", "minLength": 1, "maxLength": 8192},
        "count": _COUNT,
        "consumers": {"type": "array", "items": _UUID_IN, "minItems": 1, "maxItems": 1000},
        "project_id": _TEXT,
        "user_id": _TEXT,
        "consumer_type": {"type": "string", "pattern": "^[A-Z0-9_]+$", "maxLength": 255},
        "provider": _UUID_IN,
        "resource_class": _CLASS,
        **copy.deepcopy(_FIELDS),
        "tree": {"type": "boolean"},
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "parent": _UUID_IN,
        "inventories": {
            "type": "object",
            "propertyNames": _CLASS,
            "additionalProperties": _RECORD,
        },
        "traits": {"type": "array", "items": traits.TRAIT_NAME, "maxItems": 1000},
        "template": _UUID_IN,
    },
    "required": ["kind"],
    "additionalProperties": False,
    "allOf": [
        *(
            {"if": {"properties": {"kind": {"const": kind}}}, "then": {"required": fields}}
            for kind, fields in REQUIRED.items()
        ),
        {
            "if": {"properties": {"kind": {"const": "add"}}, "required": ["template"]},
            "then": {"not": {"anyOf": [{"required": [f]} for f in _ADD_OWN]}},
        },
    ],
}

CREATE_BODY = {
    "type": "object",
    "properties": {"ttl_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_INT}},
    "additionalProperties": False,
}
CHANGES_BODY = {
    "type": "object",
    "properties": {"changes": {"type": "array", "items": CHANGE, "minItems": 1, "maxItems": 10000}},
    "required": ["changes"],
    "additionalProperties": False,
}
NO_QUERY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

SANDBOX = obj(id=UUID, created_at=STR, expires_at=STR, revision=INT, steps=INT)
ERROR = {"type": ["object", "null"], "properties": {"status": INT, "code": STR, "detail": STR}}
STEP = {
    "type": "object",
    "properties": {
        "change": INT,
        "kind": STR,
        "subject": STR,
        "applied": {"type": "boolean"},
        "error": ERROR,
        "write": {"type": ["object", "null"]},
        "reads": {"type": "object"},
    },
    "required": ["change", "kind", "subject", "applied", "error", "write", "reads"],
}
STEPS = obj(revision=INT, steps=array(STEP))
BEFORE_AFTER = {"type": "object", "properties": {"before": {}, "after": {}}}
DIFF_ANSWER = obj(
    providers=mapping(
        {
            "type": "object",
            "properties": {
                "removed": {"type": "boolean"},
                "added": {"type": "boolean"},
                "usages": mapping(obj(before=INT, after=INT)),
                "inventories": BEFORE_AFTER,
                "traits": BEFORE_AFTER,
            },
            "required": ["removed", "added"],
        }
    ),
    applied=INT,
    failed=array(obj(change=INT, kind=STR, subject=STR, error=ERROR)),
)
COMMITTED = obj(committed={"type": "boolean"}, steps_written=INT)

_PATH = {"sandbox": _UUID_IN}
_QUERY = candidates.GET_QUERY[-1][1]

OPERATIONS: dict[Key, Operation] = {
    ("GET", PATH): Operation(always({200: obj(sandboxes=array(SANDBOX))}), query=always(NO_QUERY)),
    ("POST", PATH): Operation(always({201: SANDBOX}), body=always(CREATE_BODY)),
    ("GET", ITEM): Operation(always({200: SANDBOX}), query=always(NO_QUERY), path=_PATH),
    ("DELETE", ITEM): Operation(NO_CONTENT, path=_PATH),
    ("POST", CHANGES): Operation(always({200: STEPS}), body=always(CHANGES_BODY), path=_PATH),
    ("GET", DIFF): Operation(always({200: DIFF_ANSWER}), query=always(NO_QUERY), path=_PATH),
    ("POST", COMMIT): Operation(always({200: COMMITTED}), path=_PATH),
    ("GET", CANDIDATES): Operation(
        always({200: candidates.allocation_candidates}), query=always(_QUERY), path=_PATH
    ),
    ("GET", WHY): Operation(always({200: candidates.VERDICT}), query=always(_QUERY), path=_PATH),
    ("GET", USAGES): Operation(
        always({200: usages.PROVIDER_USAGES}),
        query=always(NO_QUERY),
        path={**_PATH, "uuid": _UUID_IN},
    ),
    ("GET", AMOUNTS): Operation(always({200: amounts.AMOUNTS}), query=always(NO_QUERY), path=_PATH),
}
