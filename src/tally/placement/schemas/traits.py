"""Request bodies and query strings of /traits and provider traits (from 1.6)."""

from __future__ import annotations

from tally.placement.schemas.domain import GENERATION

CUSTOM_TRAIT_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

TRAIT_NAME: dict = {"type": "string", "minLength": 1, "maxLength": 255}

# PUT /traits/{name} only creates custom traits.
CUSTOM_TRAIT_NAME: dict = {**TRAIT_NAME, "pattern": CUSTOM_TRAIT_PATTERN}

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS_BODY: dict = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT_NAME},
        "resource_provider_generation": GENERATION,
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

# GET /traits?name=in:A,B|startswith:P&associated=true|false
LIST_QUERY: dict = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}
