"""Printing an InventoryCheck: why an inventory change is refused and what resolves it."""

from __future__ import annotations

import click

from tally.cli.context import Output, console, shown
from tally.doctor.inventory_check import ClassChange, InventoryCheck

UPSTREAM_NOTE = (
    "--force sends the change without this check. Tally's server refuses it anyway; "
    "upstream Placement accepts a shrink below usage and leaves the provider "
    "over-committed, so against upstream this check is what keeps you safe."
)


def render_check(out: Output, check: InventoryCheck, plan_follows: bool = False) -> None:
    """The refusal as a report (table format) or as data (-f json|yaml|value). With
    `plan_follows` (tally explain) only the verdict: who holds it and what to do
    come from the audit."""
    if out.fmt in ("json", "yaml"):
        out.dump(check.as_dict())
        return
    if out.fmt == "value":
        for change in check.refused:
            for holder in change.holders:
                click.echo(f"{change.resource_class} {holder.consumer} {holder.amount}")
        return
    con = console()
    rp = check.provider_uuid
    named = f"{check.provider_name} ({rp})" if check.provider_name else rp
    if check.server_detail is not None:
        con.print(shown(f"The server refused the change to resource provider {named}:"))
        lines = [line.strip() for line in check.server_detail.splitlines() if line.strip()]
        con.print(shown("\n".join(f"  {line}" for line in lines)))
    elif plan_follows:
        con.print(
            shown(
                f"The change would be refused: it would leave resource provider {named} "
                "without the capacity its consumers hold."
            )
        )
    else:
        con.print(
            shown(
                f"Refused before writing: the change would leave resource provider {named} "
                "without the capacity its consumers hold. Nothing was written."
            )
        )
    out_table = out.table(["resource class", "used", "capacity asked", "gap"])
    for change in check.refused:
        out_table.add_row(change.resource_class, str(change.used), _asked(change), str(change.gap))
    con.print(out_table)
    if plan_follows:
        return
    for change in check.refused:
        _holders(out, change)
    con.print(shown("What resolves it:"))
    for suggestion in check.suggestions:
        con.print(shown(f"  - {suggestion.text}"))
        if suggestion.command:
            con.print(shown(f"      {suggestion.command}"))
    if check.server_detail is None and any(not c.removed for c in check.refused):
        con.print(shown(UPSTREAM_NOTE))


def _asked(change: ClassChange) -> str:
    if change.removed:
        return "0 (class removed)"
    parts = [f"total {change.total_asked}", f"reserved {change.reserved_asked}"]
    if change.allocation_ratio_asked not in (None, 1.0):
        parts.append(f"allocation_ratio {change.allocation_ratio_asked}")
    return f"{change.capacity_asked} ({', '.join(parts)})"


def _holders(out: Output, change: ClassChange) -> None:
    con = console()
    plural = "s" if change.consumers != 1 else ""
    held = f"{change.resource_class} is held by {change.consumers} consumer{plural}"
    con.print(shown(f"{held}, largest first:"))
    table = out.table(["consumer", "amount", "type", "project", "also on other providers"])
    for holder in change.holders:
        elsewhere = ", ".join(holder.other_providers) if holder.also_elsewhere else "no"
        table.add_row(
            holder.consumer,
            str(holder.amount),
            holder.consumer_type or "-",
            holder.project_id or "-",
            elsewhere,
        )
    con.print(table)
    rest = change.consumers - len(change.holders)
    if rest > 0:
        con.print(shown(f"  and {rest} more consumer{'s' if rest != 1 else ''}"))
