"""Allocations: POST /allocations, /allocations/{consumer_uuid} and
GET /resource_providers/{uuid}/allocations; request schemas and answer schemas
per microversion, in `OPERATIONS`.

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

from tally import names
from tally.placement.schemas import answer_schemas
from tally.placement.schemas.answer_schemas import AMOUNTS, STR, mapping, obj
from tally.placement.schemas.domain import GENERATION, MAX_INT, UUID_KEY
from tally.placement.schemas.operation import (
    NO_CONTENT,
    Key,
    Operation,
    Rows,
    Schema,
    Version,
    always,
)

OWNER = (1, 8)  # project_id and user_id required in writes
DICT_FORM = (1, 12)  # allocations keyed by provider; the owner shown in GET
CONSUMER_GENERATIONS = (1, 28)  # checked in writes, shown in answers; {} deletes
WITH_MAPPINGS = (1, 34)  # request group mappings accepted in writes (not stored)
CONSUMER_TYPES = (1, 38)  # required in writes, shown in answers

RESOURCE_CLASS = names.RESOURCE_CLASS_PATTERN
CONSUMER_TYPE = names.CONSUMER_TYPE_PATTERN
GROUP_SUFFIX = r"[a-zA-Z0-9_-]{1,64}"

ID: Schema = {"type": "string", "minLength": 1, "maxLength": 255}
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
    schema["properties"]["project_id"] = dict(ID)
    schema["properties"]["user_id"] = dict(ID)
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
            "project_id": dict(ID),
            "user_id": dict(ID),
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
_CONSUMER_TYPE = {
    "type": "string",
    "pattern": CONSUMER_TYPE,
    "minLength": 1,
    "maxLength": names.MAX_NAME_LENGTH,
}

_PUT_1_0 = _list_form()
_PUT_1_8 = _with_owner(_PUT_1_0)
_PUT_1_12 = _dict_form()
_DELETABLE = _dict_form(min_providers=0)
_PUT_1_28 = _with(_DELETABLE, "consumer_generation", _GENERATION)
_PUT_1_34 = _with(_PUT_1_28, "mappings", MAPPINGS, required=False)
_PUT_1_38 = _with(_PUT_1_34, "consumer_type", _CONSUMER_TYPE)

PUT_BODY: Rows[Schema] = (
    ((1, 0), _PUT_1_0),
    (OWNER, _PUT_1_8),
    (DICT_FORM, _PUT_1_12),
    (CONSUMER_GENERATIONS, _PUT_1_28),
    (WITH_MAPPINGS, _PUT_1_34),
    (CONSUMER_TYPES, _PUT_1_38),
)
POST_BODY: Rows[Schema] = (
    ((1, 13), _post(_DELETABLE)),
    (CONSUMER_GENERATIONS, _post(_PUT_1_28)),
    (WITH_MAPPINGS, _post(_PUT_1_34)),
    (CONSUMER_TYPES, _post(_PUT_1_38)),
)

# ---------------------------------------------------------------- answers


def consumer_allocations(v: Version) -> Schema:
    """Owner, generation and type are shown only for a consumer holding something."""
    extra = {}
    if v >= DICT_FORM:
        extra |= {"project_id": STR, "user_id": STR}
    if v >= CONSUMER_GENERATIONS:
        extra["consumer_generation"] = answer_schemas.GENERATION
    if v >= CONSUMER_TYPES:
        extra["consumer_type"] = STR
    held = mapping(obj(resources=AMOUNTS, generation=answer_schemas.GENERATION))
    return obj(*extra, allocations=held, **extra)


def provider_allocations(v: Version) -> Schema:
    entry = {"resources": AMOUNTS}
    if v >= CONSUMER_GENERATIONS:
        entry["consumer_generation"] = answer_schemas.INT_OR_NULL
    return obj(
        allocations=mapping(obj(**entry)), resource_provider_generation=answer_schemas.GENERATION
    )


# Any string names a consumer (an unknown one holds nothing); a write needs a uuid.
_ANY_CONSUMER = {"consumer_uuid": answer_schemas.PATH_SEGMENT}
_CONSUMER = "/allocations/{consumer_uuid}"
OPERATIONS: dict[Key, Operation] = {
    ("POST", "/allocations"): Operation(NO_CONTENT, body=POST_BODY),
    ("GET", _CONSUMER): Operation(always({200: consumer_allocations}), path=_ANY_CONSUMER),
    ("PUT", _CONSUMER): Operation(NO_CONTENT, body=PUT_BODY),
    ("DELETE", _CONSUMER): Operation(NO_CONTENT, path=_ANY_CONSUMER),
    ("GET", "/resource_providers/{uuid}/allocations"): Operation(
        always({200: provider_allocations})
    ),
}
