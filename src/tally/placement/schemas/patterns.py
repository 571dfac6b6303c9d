"""A JSON Schema `pattern` is an ECMA-262 regular expression, where `$` is the end
of the text. Python's `re` reads `$` as the end or just before a final newline, so
jsonschema (which words our 400s) would take `CUSTOM_X\\n` for `^CUSTOM_[A-Z0-9_]+$`
where jsonschema-rs (which decides) and every client reading the published document
refuse it. The schemas keep upstream's spelling (its error texts name the pattern);
`in_python` gives the pattern as Python must read it, and `validator_class` the
jsonschema validator whose `pattern` and `patternProperties` read patterns that way."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import jsonschema

_END = re.compile(r"(?<!\\)\$")  # an unescaped `$` (our patterns put none in a class)


@functools.lru_cache(maxsize=512)
def in_python(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled with ECMA-262's `$`: the end of the text, no newline before."""
    return re.compile(_END.sub(r"\\Z", pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, _schema: dict
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not in_python(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict, instance: Any, _schema: dict
) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if in_python(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: dict
) -> Iterator[jsonschema.ValidationError]:
    """jsonschema's `additionalProperties`, with its words, over ECMA-262 patterns."""
    if not validator.is_type(instance, "object"):
        return
    named, matched = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [
        key
        for key in instance
        if key not in named and not any(in_python(p).search(key) for p in matched)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras, key=str))
        if matched:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(matched))
            yield jsonschema.ValidationError(
                f"{listed} {verb} not match any of the regexes: {regexes}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


@functools.lru_cache(maxsize=8)
def validator_class(base: type) -> type:
    """`base` (a jsonschema validator class) reading patterns as ECMA-262 does."""
    return jsonschema.validators.extend(
        base,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
