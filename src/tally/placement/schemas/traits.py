"""/traits, /traits/{name} and /resource_providers/{uuid}/traits (from 1.6):
request schemas and answer schemas, in `OPERATIONS`."""

from __future__ import annotations

from tally import names
from tally.placement.schemas import answer_schemas
from tally.placement.schemas.answer_schemas import STR, array, obj
from tally.placement.schemas.domain import GENERATION
from tally.placement.schemas.operation import NO_CONTENT, Key, Operation, Schema, always

CUSTOM_TRAIT_PATTERN = names.CUSTOM_TRAIT_PATTERN

TRAIT_NAME: Schema = {"type": "string", "minLength": 1, "maxLength": names.MAX_NAME_LENGTH}
# PUT /traits/{name} only creates custom traits.
CUSTOM_TRAIT_NAME: Schema = {**TRAIT_NAME, "pattern": CUSTOM_TRAIT_PATTERN}

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS_BODY: Schema = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT_NAME},
        "resource_provider_generation": GENERATION,
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

# GET /traits?name=in:A,B|startswith:P&associated=true|false
LIST_QUERY: Schema = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}

TRAITS = obj(traits=array(STR))
PROVIDER_TRAITS = obj(traits=array(STR), resource_provider_generation=answer_schemas.GENERATION)

_PROVIDER = "/resource_providers/{uuid}/traits"
OPERATIONS: dict[Key, Operation] = {
    ("GET", "/traits"): Operation(always({200: TRAITS}), query=always(LIST_QUERY)),
    ("GET", "/traits/{name}"): Operation(NO_CONTENT),
    ("PUT", "/traits/{name}"): Operation(
        always({201: None, 204: None}), path={"name": CUSTOM_TRAIT_NAME}
    ),
    ("DELETE", "/traits/{name}"): Operation(NO_CONTENT),
    ("GET", _PROVIDER): Operation(always({200: PROVIDER_TRAITS})),
    ("PUT", _PROVIDER): Operation(
        always({200: PROVIDER_TRAITS}), body=always(PROVIDER_TRAITS_BODY)
    ),
    ("DELETE", _PROVIDER): Operation(NO_CONTENT),
}
