"""JSON schemas of allocation writes, per microversion.

PUT /allocations/{consumer_uuid}:
    1.0   list form: [{"resource_provider": {"uuid"}, "resources": {RC: n}}]
    1.8   + project_id and user_id (required)
    1.12  dict form keyed by provider uuid (an ignored "generation" may ride along)
    1.28  + consumer_generation (required, may be null); allocations may be {}
    1.34  + mappings (accepted, not stored)
    1.38  + consumer_type (required)
POST /allocations (from 1.13): {consumer_uuid: <the PUT body of that version>},
where allocations may always be {} (remove that consumer's allocations).
"""

from __future__ import annotations

import copy

from tally.placement.schemas.domain import GENERATION, MAX_INT, UUID_KEY

RESOURCE_CLASS = "^[A-Z0-9_]+$"
CONSUMER_TYPE = "^[A-Z0-9_]+$"
GROUP_SUFFIX = r"[a-zA-Z0-9_-]{1,64}"

_ID = {"type": "string", "minLength": 1, "maxLength": 255}
_GENERATION = {**GENERATION, "type": ["integer", "null"]}


def _resources() -> dict:
    return {
        "type": "object",
        "minProperties": 1,
        # Upstream sets no maximum (a larger amount fails max_unit with a 409); an
        # amount no column could store is refused here, as a 400 naming it.
        "patternProperties": {
            RESOURCE_CLASS: {"type": "integer", "minimum": 1, "maximum": MAX_INT}
        },
        "additionalProperties": False,
    }


def _list_form() -> dict:
    return {
        "type": "object",
        "properties": {
            "allocations": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "resource_provider": {
                            "type": "object",
                            "properties": {"uuid": {"type": "string", "format": "uuid"}},
                            "additionalProperties": False,
                            "required": ["uuid"],
                        },
                        "resources": _resources(),
                    },
                    "required": ["resource_provider", "resources"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["allocations"],
        "additionalProperties": False,
    }


def _with_owner(schema: dict) -> dict:
    schema = copy.deepcopy(schema)
    schema["properties"]["project_id"] = dict(_ID)
    schema["properties"]["user_id"] = dict(_ID)
    schema["required"] += ["project_id", "user_id"]
    return schema


def _dict_form(min_providers: int = 1) -> dict:
    return {
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": min_providers,
                "patternProperties": {
                    UUID_KEY: {
                        "type": "object",
                        "properties": {
                            "generation": GENERATION,
                            "resources": _resources(),
                        },
                        "required": ["resources"],
                        "additionalProperties": False,
                    }
                },
                "additionalProperties": False,
            },
            "project_id": dict(_ID),
            "user_id": dict(_ID),
        },
        "required": ["allocations", "project_id", "user_id"],
        "additionalProperties": False,
    }


def _with(schema: dict, name: str, spec: dict, required: bool = True) -> dict:
    schema = copy.deepcopy(schema)
    schema["properties"][name] = spec
    if required:
        schema["required"].append(name)
    return schema


def _post(consumer_schema: dict) -> dict:
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_KEY: consumer_schema},
    }


MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        GROUP_SUFFIX: {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "format": "uuid"},
        }
    },
}
_CONSUMER_TYPE = {"type": "string", "pattern": CONSUMER_TYPE, "minLength": 1, "maxLength": 255}

_PUT_1_0 = _list_form()
_PUT_1_8 = _with_owner(_PUT_1_0)
_PUT_1_12 = _dict_form()
_DELETABLE = _dict_form(min_providers=0)
_PUT_1_28 = _with(_DELETABLE, "consumer_generation", _GENERATION)
_PUT_1_34 = _with(_PUT_1_28, "mappings", MAPPINGS, required=False)
_PUT_1_38 = _with(_PUT_1_34, "consumer_type", _CONSUMER_TYPE)

# (lowest microversion, schema), highest first: the first entry <= the request wins.
PUT_SCHEMAS: tuple[tuple[tuple[int, int], dict], ...] = (
    ((1, 38), _PUT_1_38),
    ((1, 34), _PUT_1_34),
    ((1, 28), _PUT_1_28),
    ((1, 12), _PUT_1_12),
    ((1, 8), _PUT_1_8),
    ((1, 0), _PUT_1_0),
)

POST_SCHEMAS: tuple[tuple[tuple[int, int], dict], ...] = (
    ((1, 38), _post(_PUT_1_38)),
    ((1, 34), _post(_PUT_1_34)),
    ((1, 28), _post(_PUT_1_28)),
    ((1, 13), _post(_DELETABLE)),
)


def pick(table: tuple[tuple[tuple[int, int], dict], ...], version: tuple[int, int]) -> dict:
    """The schema of `table` for a request at `version`."""
    for low, schema in table:
        if version >= low:
            return schema
    raise LookupError(f"no schema for microversion {version}")


_USAGES_1_9 = {
    "type": "object",
    "properties": {"project_id": dict(_ID), "user_id": dict(_ID)},
    "required": ["project_id"],
    "additionalProperties": False,
}
_USAGES_1_38 = _with(
    _USAGES_1_9,
    "consumer_type",
    {
        "type": "string",
        "pattern": f"{CONSUMER_TYPE}|^all|^unknown$",
        "minLength": 1,
        "maxLength": 255,
    },
    required=False,
)

# Query string of GET /usages.
USAGES_QUERY_SCHEMAS: tuple[tuple[tuple[int, int], dict], ...] = (
    ((1, 38), _USAGES_1_38),
    ((1, 9), _USAGES_1_9),
)
