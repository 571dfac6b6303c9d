"""What an operator types, checked before any request: uuids, URLs, resource class
and trait names, amounts. A value that cannot be right is a usage error naming the
option or argument (exit 127, tally.cli.exits), never a request the server refuses
with its schema's words, nor a report built on it (`VCPU=-4` read as a capacity
gap). The names' rules are Placement's own (tally.names)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

import click

from tally import names

UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
MAX_AMOUNT = 2147483647  # Placement's INT columns (tally.db.schema.MAX_INT)
COUNT_FIELDS = {"total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1}


def is_uuid(value: object) -> bool:
    """A uuid as Placement takes one (dashes optional, any case)."""
    return isinstance(value, str) and UUID.match(value) is not None


class Uuid(click.ParamType):
    """A uuid (a consumer, a provider, an aggregate)."""

    name = "uuid"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        if not is_uuid(str(value)):
            self.fail(f"{value!r} is not a uuid", param, ctx)
        return str(value)


class Url(click.ParamType):
    """An http(s) URL with its scheme: `127.0.0.1:8778` alone is refused, naming
    what to write instead."""

    name = "url"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        text = str(value).strip()
        parts = urllib.parse.urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            hint = f" (like http://{text})" if "://" not in text else ""
            self.fail(f"{value!r} is not an http:// or https:// URL{hint}", param, ctx)
        return text


class ClassName(click.ParamType):
    """A resource class name (`custom`: one a client may create, `CUSTOM_...`)."""

    name = "resource_class"

    def __init__(self, custom: bool = False) -> None:
        self.custom = custom

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        fault = class_fault(str(value), self.custom)
        if fault:
            self.fail(fault, param, ctx)
        return str(value)


class TraitName(click.ParamType):
    """A trait name (`custom`: one a client may create, `CUSTOM_...`)."""

    name = "trait"

    def __init__(self, custom: bool = False) -> None:
        self.custom = custom

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        text = str(value)
        ok = names.is_custom_trait_name if self.custom else names.is_trait_name
        if not ok(text):
            self.fail(_name_fault(text, "trait", self.custom), param, ctx)
        return text


def class_fault(name: str, custom: bool = False) -> str | None:
    """Why `name` can be no resource class (None: it can)."""
    ok = names.is_custom_resource_class_name if custom else names.is_resource_class_name
    return None if ok(name) else _name_fault(name, "resource class", custom)


def _name_fault(name: str, what: str, custom: bool) -> str:
    rule = "CUSTOM_ and then A-Z, 0-9 and _" if custom else "A-Z, 0-9 and _"
    hint = f"; upper case: {name.upper()}" if name and name != name.upper() else ""
    kind = f"custom {what}" if custom else what
    return f"{name!r} is not a {kind} name ({rule}{hint})"


def member_of(value: str) -> str:
    """A `--member-of` value (`A`, `A,B`, `in:A,B`, `!A`, `!in:A,B`) whose aggregates
    are uuids; click.BadParameter naming the one that is not."""
    listed = value.removeprefix("!").removeprefix("in:")
    for aggregate in listed.split(","):
        if not is_uuid(aggregate.strip()):
            where = "" if aggregate == value else f"{value!r}: "
            raise click.BadParameter(
                f"{where}{aggregate!r} is not an aggregate uuid", param_hint="--member-of"
            )
    return value


def count(field: str, text: str) -> int:
    """An inventory's whole-number field, within what Placement takes; ValueError
    naming the field."""
    least = COUNT_FIELDS[field]
    if not re.fullmatch(r"\s*-?\d+\s*", text) or not least <= int(text) <= MAX_AMOUNT:
        raise ValueError(f"{field} must be a whole number from {least} to {MAX_AMOUNT}")
    return int(text)


def ratio(text: str) -> float:
    """An allocation ratio: a number above 0; ValueError naming the field."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError("allocation_ratio must be a number above 0")
    return value


def amount(text: str) -> int:
    """What a consumer holds of a class: a whole number from 1."""
    if not re.fullmatch(r"\s*\d+\s*", text) or not 1 <= int(text) <= MAX_AMOUNT:
        raise ValueError(f"an amount must be a whole number from 1 to {MAX_AMOUNT}")
    return int(text)
