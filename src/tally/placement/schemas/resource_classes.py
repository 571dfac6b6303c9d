"""Request bodies of /resource_classes (from microversion 1.2)."""

from __future__ import annotations

CUSTOM_NAME_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

_NAME = {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255}

# POST /resource_classes, and PUT /resource_classes/{name} from 1.2 to 1.6 (a rename).
# From 1.7 the PUT has no body; its {name} is checked against the same document.
NAME_BODY: dict = {
    "type": "object",
    "properties": {"name": _NAME},
    "required": ["name"],
    "additionalProperties": False,
}
