"""Query filters shared by `provider list` and `allocation candidate list`, spelled as
osc-placement spells them."""

from __future__ import annotations

import click

from tally.cli import inputs
from tally.nova.shapes import ShapeError, parse_shape, query_value


def shape_param(resources: tuple[str, ...]) -> dict[str, int]:
    """`--resource VCPU=4,MEMORY_MB:8192 --resource DISK_GB=10` (`=` or `:`,
    comma-separated, repeatable) -> {class: amount}; a usage error naming the piece."""
    try:
        return parse_shape(",".join(resources))
    except ShapeError as exc:
        raise click.BadParameter(str(exc), param_hint="--resource") from None


def resources_param(resources: tuple[str, ...]) -> str | None:
    """`--resource VCPU=4 --resource DISK_GB:10` -> `VCPU:4,DISK_GB:10` (None: none)."""
    return query_value(shape_param(resources)) if resources else None


def required_params(required: tuple[str, ...], forbidden: tuple[str, ...] = ()) -> list[str]:
    """Traits as `required` query values: `A`, `!A` (forbidden) and `A,!B` are ANDed
    in one value; `A,B` or `in:A,B` is an any-of group (1.39) of its own."""
    any_of = [r if r.startswith("in:") else f"in:{r}" for r in required if _is_group(r)]
    all_of = [r for r in required if not _is_group(r)] + [f"!{f}" for f in forbidden]
    return any_of + ([",".join(all_of)] if all_of else [])


def member_of_params(member_of: tuple[str, ...]) -> list[str]:
    """Aggregates as `member_of` values: `A,B` means any of them (`in:A,B`); `in:...`,
    `!A` and `!in:...` pass as given. Each repetition must also hold (1.24)."""
    checked = [inputs.member_of(m) for m in member_of]
    return [m if m.startswith(("in:", "!")) or "," not in m else f"in:{m}" for m in checked]


def _is_group(value: str) -> bool:
    """`in:A,B` or `A,B` (any of); `A,!B` stays Placement's all-of spelling."""
    parts = value.split(",")
    return value.startswith("in:") or (len(parts) > 1 and not any(p.startswith("!") for p in parts))
