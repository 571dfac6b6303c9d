"""The input domain of the API: what any value a client sends may be, on every
backend alike. Checked at the edge (request bodies here, through `read_json`;
paths and query strings by `middleware.InputDomain`), so the ledger and the
database only ever see values they can store and compute with.

Rules:
- JSON bodies are UTF-8 and nest at most MAX_JSON_DEPTH arrays/objects
  (measured on the parsed document; the parser itself stops a far deeper one
  with RecursionError before its stack runs out); numbers are finite; strings
  (keys and values) hold no lone surrogate (`"\\ud800"`: not encodable as UTF-8).
- No string anywhere (body, path segment, query key or value) holds a NUL
  character: PostgreSQL cannot store one, so no backend takes one.
- Every integer is one the database column stores (-2^31 .. 2^31-1, `INT`
  on every backend): inventory fields (as upstream), allocation amounts in
  bodies and in `resources` query strings, and the candidates `limit` up to
  MAX_INT; generations anywhere in the column's range.
- An inventory's capacity, int((total - reserved) * allocation_ratio), is at
  most MAX_CAPACITY = 2^53 - 1: a rule across fields, so the ledger checks it
  (`ledger.inventory`, which says why that bound).
- Every uuid (provider, consumer, aggregate; in paths, query strings, body
  values and body keys) is taken in any form `uuid.UUID` reads (upper case,
  no dashes; body keys keep upstream's 36-character pattern) and used in its
  canonical form: lower case, hyphenated. A body that names one uuid twice in
  different spellings is refused. (Upstream canonicalises only the uuid of
  POST /resource_providers and the path of PUT /allocations/{consumer_uuid};
  for the canonical spelling every client sends, the answers are the same.)
"""

from __future__ import annotations

import json
import math
import re
import uuid as uuidlib
from typing import Any

from tally.db.schema import MAX_CAPACITY, MAX_INT
from tally.placement.error_types import BadRequest
from tally.placement.schemas import patterns

__all__ = [
    "GENERATION",
    "MAX_CAPACITY",
    "MAX_INT",
    "MAX_JSON_DEPTH",
    "MIN_INT",
    "UUID_KEY",
    "canonical",
    "canonical_uuid",
    "check_text",
    "is_uuid_like",
    "parse_json",
]

MAX_JSON_DEPTH = 64
MIN_INT = -MAX_INT - 1
UUID_KEY = "^[0-9a-fA-F-]{36}$"  # as upstream: keys naming providers or consumers

# A generation, as the client last saw it: any value the column can hold (a
# stale or impossible one is a 409, as upstream, not a 400).
GENERATION: dict[str, Any] = {"type": "integer", "minimum": MIN_INT, "maximum": MAX_INT}

# Escapes json.loads turns into a NUL or a (maybe lone) surrogate.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


# ---------------------------------------------------------------- uuids


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_uuid_like(value: object) -> bool:
    """As upstream (oslo's is_uuid_like): any string `uuid.UUID` accepts, dashes optional."""
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return True  # (what clients send: no parsing for each of a batch's thousands)
    try:
        return str(uuidlib.UUID(value)).replace("-", "") == value.replace("-", "").lower()
    except (TypeError, ValueError, AttributeError):
        return False


def canonical_uuid(value: str) -> str:
    """The canonical spelling of a uuid-like string; anything else as it is
    (a path naming no provider still answers 404, as upstream)."""
    if _CANONICAL_UUID.fullmatch(value):
        return value
    return str(uuidlib.UUID(value)) if is_uuid_like(value) else value


# ---------------------------------------------------------------- strings


def check_text(value: str, where: str) -> None:
    """400 unless `value` is text every backend stores as sent."""
    if "\x00" in value:
        raise BadRequest(f"Invalid {where}: NUL characters are not allowed. Got: {_shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(
            f"Invalid {where}: not valid UTF-8 (a lone surrogate). Got: {_shown(value)}"
        ) from None


def _shown(value: str, most: int = 80) -> str:
    """The value as an ASCII-safe literal, cut short."""
    return ascii(value if len(value) <= most else value[:most] + "...")


# ---------------------------------------------------------------- JSON bodies


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text} is out of range")
    return number


def _not_json(name: str) -> Any:
    """NaN and Infinity are not JSON (Python's parser accepts them by default)."""
    raise ValueError(f"{name} is not a valid JSON value")


def _nests_deeper(data: Any, most: int) -> bool:
    """Whether the parsed document holds arrays/objects more than `most` deep
    (level by level: a batch's thousands of small maps cost a walk, not the
    scan of its text that bracket counting needs)."""
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(most):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def parse_json(raw: bytes) -> Any:
    """A request body as JSON within the domain, or 400 saying what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Malformed JSON: the body is not valid UTF-8: {exc}") from None
    try:
        # As upstream, an empty body is malformed JSON, not a null document.
        data = json.loads(text, parse_constant=_not_json, parse_float=_finite)
        too_deep = _nests_deeper(data, MAX_JSON_DEPTH)
    except RecursionError:  # (the parser's guard, hundreds of levels past ours)
        too_deep = True
    except ValueError as exc:
        raise BadRequest(f"Malformed JSON: {exc}") from None
    if too_deep:
        raise BadRequest(
            f"Malformed JSON: arrays and objects nest deeper than {MAX_JSON_DEPTH} levels."
        )
    if _SUSPECT_ESCAPE.search(text):
        _check_strings(data)
    return data


def _check_strings(data: Any) -> None:
    """Every key and string value of a parsed document passes `check_text`."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            check_text(node, f"JSON string at {path or 'the top'}")
        elif isinstance(node, dict):
            for key, value in node.items():
                check_text(key, f"JSON key in {path or 'the top object'}")
                stack.append((value, f"{path}[{key!r}]"))
        elif isinstance(node, list):
            stack.extend((value, f"{path}[{i}]") for i, value in enumerate(node))


# ---------------------------------------------------------------- canonical uuids


def canonical(data: Any, schema: dict[str, Any], path: str = "") -> Any:
    """`data` (valid for `schema`) with every uuid in canonical form: string
    values whose schema has `format: uuid`, and object keys matched by the
    `UUID_KEY` pattern (400 for such a key that is no uuid). 400 when two
    spellings of one uuid meet in one object or in a list of unique items."""
    if not _names_uuids(schema):  # (a batch's thousands of resource maps are left as sent)
        return data
    if isinstance(data, str):
        return canonical_uuid(data) if _is_uuid_schema(schema) else data
    if isinstance(data, list):
        items = schema.get("items", {})
        found = [canonical(item, items, f"{path}[{i}]") for i, item in enumerate(data)]
        if schema.get("uniqueItems") and len(set(map(_hashable, found))) != len(found):
            raise BadRequest(
                f"JSON does not validate: {path or 'the list'} names the same uuid twice "
                "(in different spellings)."
            )
        return found
    if isinstance(data, dict):
        result: dict[str, Any] = {}
        for key, value in data.items():
            sub, uuid_key = _property_schema(schema, key)
            if uuid_key and not is_uuid_like(key):  # the key pattern lets '-' * 36 by
                raise BadRequest(
                    f"JSON does not validate: {key!r}, a key of {path or 'the body'}, "
                    "is not a 'uuid'."
                )
            name = canonical_uuid(key) if uuid_key else key
            if name in result:
                raise BadRequest(
                    f"JSON does not validate: {path or 'the body'} names {name} twice "
                    "(in different spellings)."
                )
            result[name] = canonical(value, sub, f"{path}[{name!r}]")
        return result
    return data


_NAMES_UUIDS: dict[int, tuple[dict[str, Any], bool]] = {}  # id -> (schema, answer)


def _names_uuids(schema: dict[str, Any]) -> bool:
    """Whether a value of `schema` may hold a uuid to make canonical (a key by
    `UUID_KEY`, or a string of `format: uuid`, anywhere inside)."""
    found = _NAMES_UUIDS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_NAMES_UUIDS) > 1000:  # (the schemas are a few hundred constants)
            _NAMES_UUIDS.clear()
        found = _NAMES_UUIDS[id(schema)] = (schema, _mentions_uuid(schema))
    return found[1]


def _mentions_uuid(node: Any) -> bool:
    if isinstance(node, list):
        return any(map(_mentions_uuid, node))
    if not isinstance(node, dict):
        return False
    if node.get("format") == "uuid" or UUID_KEY in node.get("patternProperties", {}):
        return True
    return any(map(_mentions_uuid, node.values()))


def _is_uuid_schema(schema: dict[str, Any]) -> bool:
    if schema.get("format") == "uuid":
        return True
    return any(_is_uuid_schema(branch) for branch in schema.get("anyOf", ()))


def _property_schema(schema: dict[str, Any], key: str) -> tuple[dict[str, Any], bool]:
    """The schema of `key`'s value in an object schema, and whether the key is a uuid."""
    if key in schema.get("properties", {}):
        return schema["properties"][key], False
    for pattern, sub in schema.get("patternProperties", {}).items():
        if patterns.in_python(pattern).search(key):
            return sub, pattern == UUID_KEY
    extra = schema.get("additionalProperties")
    return (extra if isinstance(extra, dict) else {}), False


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
