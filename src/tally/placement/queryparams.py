"""Parsing of the query parameters that filter providers, shared by
`GET /resource_providers` and `GET /allocation_candidates`.
(The whole query of the latter is assembled in `placement.candidate_query`.)

Each parser takes the raw string value(s) of one parameter and, where the
meaning changed over time, the request's microversion; it returns plain sets
and lists (no HTTP objects) or raises `BadRequest` with the message clients
match on. Name lookups (do these traits, classes, aggregates exist?) are the
ledger's job, not this module's.

Shapes:
  resources   `VCPU:2,MEMORY_MB:1024`        -> {"VCPU": 2, "MEMORY_MB": 1024}
  required    `A,!B` / `in:A,C` (repeatable from 1.39)
                                            -> Traits(required=[{A}, {A, C}], forbidden={B})
  member_of   `U` / `in:U1,U2` / `!U` / `!in:U1,U2` (repeatable from 1.24)
                                            -> Aggregates(required=[{U}, ...], forbidden={...})
  in_tree     `U`                            -> "U"

Amounts may exceed an int column (nothing fits them), and uuids come back in canonical form
(`schemas.domain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tally.placement.error_types import BadRequest
from tally.placement.schemas.domain import MAX_CAPACITY, canonical_uuid, is_uuid_like

# Microversions that widened what these parameters accept.
FORBIDDEN_TRAITS = (1, 22)
REPEATED_MEMBER_OF = (1, 24)
FORBIDDEN_AGGREGATES = (1, 32)
ANY_TRAITS = (1, 39)

_RESOURCES_FORM = "?resources=VCPU:2,MEMORY_MB:1024"


@dataclasses.dataclass(frozen=True)
class Traits:
    """`required`: every set must be matched by at least one of its traits
    (AND of ORs); no trait of `forbidden` may be present."""

    required: list[frozenset[str]] = dataclasses.field(default_factory=list)
    forbidden: frozenset[str] = frozenset()

    def names(self) -> set[str]:
        return set().union(*self.required, self.forbidden)

    def __bool__(self) -> bool:
        return bool(self.required or self.forbidden)


@dataclasses.dataclass(frozen=True)
class Aggregates:
    """`required`: the provider must be in at least one aggregate of each set;
    it must be in none of `forbidden`."""

    required: list[frozenset[str]] = dataclasses.field(default_factory=list)
    forbidden: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.required or self.forbidden)


def parse_resources(value: str) -> dict[str, int]:
    """`RC:N,RC:N` -> {RC: N}; every amount an integer of at least 1. An amount past
    what an int column holds is a question whose answer is "nothing fits" (as upstream
    answers it; a 100 Gbit/s port's bandwidth in kbit/s is one), not a bad request;
    past MAX_CAPACITY, which no inventory's capacity exceeds, it is kept as
    MAX_CAPACITY + 1 (every database compares that exactly)."""
    if value.strip() == "":
        raise BadRequest(
            "Badly formed resources parameter. Expected resources query string "
            f"parameter in form: {_RESOURCES_FORM}. Got: empty string."
        )
    amounts: dict[str, int] = {}
    for item in value.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            raise BadRequest(
                "Badly formed resources parameter. Expected resources query string "
                f"parameter in form: {_RESOURCES_FORM}. Got: {item}."
            )
        name, raw_amount = parts
        try:
            amount = int(raw_amount)
        except ValueError:
            raise BadRequest(
                f"Requested resource {name} expected positive integer amount. Got: {raw_amount}."
            ) from None
        if amount < 1:
            raise BadRequest(f"Requested resource {name} requires amount >= 1. Got: {amount}.")
        amounts[name] = min(amount, MAX_CAPACITY + 1)
    return amounts


def parse_traits_value(value: str, *, allow_forbidden: bool, allow_any: bool) -> Traits:
    """One value of a `required` parameter: `A,B,!C` (each plain name its own
    set) or, from 1.39, `in:A,B` (one set; no `!` inside)."""
    if value.startswith("in:"):
        if not allow_any:
            raise BadRequest(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                f"only supported since microversion 1.39. Got: {value}"
            )
        any_of = {name.strip() for name in value[3:].split(",")}
        if not all(any_of):
            raise BadRequest(
                "Invalid query string parameters: Expected 'required' parameter value of "
                f"the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
            )
        if any(name.startswith("!") for name in any_of):
            raise BadRequest(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                f"does not support forbidden traits. Got: {value}"
            )
        return Traits(required=[frozenset(any_of)])

    names = [name.strip() for name in value.split(",")]
    # As upstream: any run of leading '!' marks a forbidden trait ('!!A' is A).
    forbidden = {name.lstrip("!") for name in names if name.startswith("!")}
    if not all(names) or not all(forbidden):
        form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
        raise BadRequest(
            "Invalid query string parameters: Expected 'required' parameter value of the "
            f"form: {form}. Got an empty trait in: {value}"
        )
    if forbidden and not allow_forbidden:
        raise BadRequest(
            "Invalid query string parameters: Expected 'required' parameter value of the "
            f"form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
        )
    required = [frozenset({name}) for name in names if not name.startswith("!")]
    return Traits(required=required, forbidden=frozenset(forbidden))


def parse_required(values: Sequence[str], version: tuple[int, int]) -> Traits:
    """All values of one `required[suffix]` key. Before 1.39 only the last
    value counts (a repeated key overwrote the earlier ones)."""
    allow_any = version >= ANY_TRAITS
    if not allow_any:
        values = list(values)[-1:]
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        parsed = parse_traits_value(
            value, allow_forbidden=version >= FORBIDDEN_TRAITS, allow_any=allow_any
        )
        required += parsed.required
        forbidden |= parsed.forbidden
    return Traits(required=required, forbidden=frozenset(forbidden))


def parse_flat_traits(value: str) -> tuple[set[str], set[str]]:
    """A traits value without the `in:` form (e.g. `root_required`):
    (required names, forbidden names)."""
    parsed = parse_traits_value(value, allow_forbidden=True, allow_any=False)
    return set().union(*parsed.required), set(parsed.forbidden)


def conflicting_traits(traits: Traits) -> list[frozenset[str]]:
    """Required sets that the forbidden traits make impossible to satisfy."""
    return [any_of for any_of in traits.required if any_of <= traits.forbidden]


def parse_member_of_value(value: str) -> Aggregates:
    """One `member_of` value: `U`, `in:U1,U2`, `!U` or `!in:U1,U2`."""
    if "," in value and not value.startswith(("in:", "!in:")):
        raise BadRequest(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
            f"keyword using the valid microversion. Got: {value}"
        )
    required: set[str] = set()
    forbidden: set[str] = set()
    if value.startswith("!in:"):
        forbidden = set(value[4:].split(","))
    elif value.startswith("!"):
        forbidden = {value[1:]}
    elif value.startswith("in:"):
        required = set(value[3:].split(","))
    else:
        required = {value}
    for agg in sorted(required | forbidden):
        if not is_uuid_like(agg):
            raise BadRequest(
                "Invalid query string parameters: Expected 'member_of' parameter to contain "
                f"valid UUID(s). Got: {agg}"
            )
    required = {canonical_uuid(agg) for agg in required}
    return Aggregates(
        required=[frozenset(required)] if required else [],
        forbidden=frozenset(canonical_uuid(agg) for agg in forbidden),
    )


def parse_member_of(
    values: Sequence[str], version: tuple[int, int], suffix: str = ""
) -> Aggregates:
    """All values of one `member_of[suffix]` key: repeated keys AND together
    (from 1.24); `!` forbids aggregates (from 1.32)."""
    if len(values) > 1 and version < REPEATED_MEMBER_OF:
        raise BadRequest(f"Multiple member_of{suffix} parameters are not supported")
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        parsed = parse_member_of_value(value)
        required += parsed.required
        if parsed.forbidden:
            if version < FORBIDDEN_AGGREGATES:
                raise BadRequest(
                    f"Forbidden member_of{suffix} parameters are not supported in the "
                    "specified microversion"
                )
            forbidden |= parsed.forbidden
    return Aggregates(required=required, forbidden=frozenset(forbidden))


def parse_in_tree(value: str) -> str:
    """A provider uuid (surrounding blanks ignored), in canonical form."""
    stripped = value.strip()
    if not is_uuid_like(stripped):
        raise BadRequest(
            "Invalid query string parameters: Expected 'in_tree' parameter to be a format "
            f"of uuid. Got: {value}"
        )
    return canonical_uuid(stripped)
