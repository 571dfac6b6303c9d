"""/resource_classes and /resource_classes/{name} (from microversion 1.2): request
schemas and answer schemas per microversion, in `OPERATIONS`."""

from __future__ import annotations

from tally import names
from tally.placement.schemas.answer_schemas import LINKS, STR, array, obj
from tally.placement.schemas.operation import NO_CONTENT, Key, Operation, Schema, always

CUSTOM_NAME_PATTERN = names.CUSTOM_RESOURCE_CLASS_PATTERN
BODILESS_PUT = (1, 7)  # PUT /resource_classes/{name} creates the class in its path

_NAME = {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": names.MAX_NAME_LENGTH}

# POST /resource_classes, and PUT /resource_classes/{name} from 1.2 to 1.6 (a rename).
# From 1.7 the PUT has no body; its {name} is checked against the same document.
NAME_BODY: Schema = {
    "type": "object",
    "properties": {"name": _NAME},
    "required": ["name"],
    "additionalProperties": False,
}

RESOURCE_CLASS = obj(name=STR, links=LINKS)
RESOURCE_CLASSES = obj(resource_classes=array(RESOURCE_CLASS))

OPERATIONS: dict[Key, Operation] = {
    ("GET", "/resource_classes"): Operation(always({200: RESOURCE_CLASSES})),
    ("POST", "/resource_classes"): Operation(always({201: None}), body=always(NAME_BODY)),
    ("GET", "/resource_classes/{name}"): Operation(always({200: RESOURCE_CLASS})),
    ("PUT", "/resource_classes/{name}"): Operation(
        (((1, 0), {200: RESOURCE_CLASS}), (BODILESS_PUT, {201: None, 204: None})),
        body=(((1, 0), NAME_BODY), (BODILESS_PUT, None)),
        path={"name": _NAME},
    ),
    ("DELETE", "/resource_classes/{name}"): Operation(NO_CONTENT),
}
