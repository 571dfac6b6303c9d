"""The names of Placement's vocabulary, one rule each: resource classes, traits and
consumer types. The API's schemas and query parsing take their patterns from here, and
whatever else takes such a name (the importer of another Placement's books) asks the
`is_*` functions, so no name gets in by one door that another refuses.

The patterns are ECMA-262, as JSON Schema and the published OpenAPI document read
them (upstream's own spelling, which its error texts quote): `$` is the end of the
text. Python's `$` also matches before a final newline, so Python code matches them
whole (`fullmatch`, as the `is_*` functions here) or through
`tally.placement.schemas.patterns`, which reads them as ECMA-262 does: `CUSTOM_X\\n`
gets in by no door.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 255  # the name columns' length, as upstream's

RESOURCE_CLASS_PATTERN = r"^[A-Z0-9_]+$"
CUSTOM_RESOURCE_CLASS_PATTERN = r"^CUSTOM_[A-Z0-9_]+$"
TRAIT_PATTERN = r"^[A-Z0-9_]+$"  # os-traits' and custom traits
CUSTOM_TRAIT_PATTERN = r"^CUSTOM_[A-Z0-9_]+$"
CONSUMER_TYPE_PATTERN = r"^[A-Z0-9_]+$"
# GET /usages?consumer_type=: a type, `all` or `unknown` (upstream's alternatives)
CONSUMER_TYPE_QUERY_PATTERN = rf"{CONSUMER_TYPE_PATTERN}|^all$|^unknown$"


def _rule(pattern: str):  # noqa: ANN202 - a predicate
    compiled = re.compile(pattern)

    def holds(name: object) -> bool:
        return (
            isinstance(name, str)
            and len(name) <= MAX_NAME_LENGTH
            and compiled.fullmatch(name) is not None
        )

    return holds


_resource_class = _rule(RESOURCE_CLASS_PATTERN)
_custom_resource_class = _rule(CUSTOM_RESOURCE_CLASS_PATTERN)
_trait = _rule(TRAIT_PATTERN)
_custom_trait = _rule(CUSTOM_TRAIT_PATTERN)
_consumer_type = _rule(CONSUMER_TYPE_PATTERN)


def is_resource_class_name(name: object) -> bool:
    """A standard or custom resource class name: A-Z, 0-9 and _, at most 255."""
    return _resource_class(name)


def is_custom_resource_class_name(name: object) -> bool:
    """A name a client may create a resource class with: `CUSTOM_` and more."""
    return _custom_resource_class(name)


def is_trait_name(name: object) -> bool:
    """A standard or custom trait name: A-Z, 0-9 and _, at most 255."""
    return _trait(name)


def is_custom_trait_name(name: object) -> bool:
    """A name a client may create a trait with: `CUSTOM_` and more."""
    return _custom_trait(name)


def is_consumer_type(name: object) -> bool:
    """A consumer type (1.38): A-Z, 0-9 and _, at most 255."""
    return _consumer_type(name)


def name_fault(name: object) -> str | None:
    """Why the API would never hold `name` as a resource class or trait (None: it
    could): a `CUSTOM_` name must be a custom name; another, a standard name's shape."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LENGTH:
        return f"not 1 to {MAX_NAME_LENGTH} characters"
    if name.startswith("CUSTOM_"):
        return None if _custom_resource_class(name) else "not CUSTOM_ and then A-Z, 0-9 and _"
    return None if _resource_class(name) else "not A-Z, 0-9 and _"
