"""Request bodies of PUT /resource_providers/{uuid}/aggregates (from 1.1)."""

from __future__ import annotations

from microversion_parse import Version

from tally.placement.schemas.domain import GENERATION

_UUID_LIST: dict = {
    "type": "array",
    "items": {"type": "string", "format": "uuid"},
    "uniqueItems": True,
}

# 1.1 - 1.18: a bare list of aggregate uuids.
_BODY_1_1: dict = _UUID_LIST

# 1.19+: the list plus the provider generation the client last saw.
_BODY_1_19: dict = {
    "type": "object",
    "properties": {
        "aggregates": _UUID_LIST,
        "resource_provider_generation": GENERATION,
    },
    "required": ["aggregates", "resource_provider_generation"],
    "additionalProperties": False,
}

GENERATION_VERSION = (1, 19)


def put_body(version: Version) -> dict:
    return _BODY_1_19 if version >= GENERATION_VERSION else _BODY_1_1
