"""Names of resource classes and traits, as the API takes them, in one place.

A new (custom) name is `CUSTOM_` and then capitals, digits and underscores; any
name in a request is capitals, digits and underscores (the standard ones come
from os-resource-classes and os-traits), at most 255 characters. Matched whole
(`fullmatch`): a JSON Schema `pattern` ending in `$` is searched with `re.search`,
where `$` also matches before a final newline, so `CUSTOM_X\\n` would pass it.
The request schemas and `tally db import` (books/check.py) both ask here.
"""

from __future__ import annotations

import re
from typing import Any

MAX_LENGTH = 255
CUSTOM_PREFIX = "CUSTOM_"
CUSTOM = re.compile(r"CUSTOM_[A-Z0-9_]+")  # what POST /resource_classes, PUT /traits take
ANY = re.compile(r"[A-Z0-9_]+")  # a standard or custom name, as a request may name it
# The same rules as JSON Schema patterns (`\Z`: the end of the text, no newline).
CUSTOM_PATTERN = r"^CUSTOM_[A-Z0-9_]+\Z"
ANY_PATTERN = r"^[A-Z0-9_]+\Z"


def is_custom(name: Any) -> bool:
    """Whether `name` is a custom class or trait name the API creates."""
    return isinstance(name, str) and len(name) <= MAX_LENGTH and CUSTOM.fullmatch(name) is not None


def name_fault(name: Any) -> str | None:
    """Why the API would never hold `name` as a class or trait (None: it would): a
    custom name must be `is_custom`; another must be a standard name's shape."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_LENGTH:
        return f"not 1 to {MAX_LENGTH} characters"
    if name.startswith(CUSTOM_PREFIX):
        return None if CUSTOM.fullmatch(name) else "not CUSTOM_ and then A-Z, 0-9 and _"
    return None if ANY.fullmatch(name) else "not A-Z, 0-9 and _"
