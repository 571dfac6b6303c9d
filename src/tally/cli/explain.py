"""`tally explain RP --resource ...` and `tally explain candidates ...`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex

import click

from tally.cli import exits
from tally.cli.context import (
    PROVIDER,
    Context,
    Output,
    console,
    output_options,
    pass_context,
    progress_bar,
    shown,
)
from tally.cli.filters import shape_param
from tally.cli.inventory import asked_inventories, resource_option
from tally.cli.inventory_report import render_check
from tally.cli.scripting import STUCK_AFTER, notes
from tally.doctor.candidates import explain_candidates
from tally.doctor.explain import Explanation, explain_change


class ProviderByDefault(click.Group):
    """`tally explain RP ...` is `tally explain provider RP ...`."""

    def resolve_command(self, ctx: click.Context, args: list[str]):  # type: ignore[override]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["provider", *args]
        return super().resolve_command(ctx, args)


@click.group(cls=ProviderByDefault)
def explain() -> None:
    """Why an inventory change is refused (`tally explain RP --resource VCPU=16`),
    or why no host fits a request (`tally explain candidates`)."""


def render(out: Output, found: Explanation) -> None:
    if out.fmt in ("json", "yaml"):
        return out.dump(found.as_dict())
    con = console()
    if not found.refused:
        con.print(shown("The change would be accepted: capacity stays above what is used."))
        return
    render_check(out, found.check, plan_follows=True)
    table = out.table(["consumer", "kind", "holds here", "reason", "written"])
    for h in found.holders:
        held = ", ".join(f"{k}={v}" for k, v in h.held.items())
        written = h.history.summary() if h.history else ""
        table.add_row(h.consumer, h.kind, held, h.reason, written)
    con.print(shown("Who holds it, as the audit sees it:"))
    con.print(table)
    con.print(shown("The way out, in order (each step on the state the one before leaves):"))
    for n, step in enumerate(found.steps, 1):
        con.print(shown(f"  {n}. {step.text}"))
        if step.command:
            con.print(shown(f"       {step.command}"))
    for alternative in found.alternatives:
        con.print(shown(f"  Or, changing the request: {alternative.text}"))
        con.print(shown(f"       {alternative.command}"))


def retry_command(uuid: str, resources: tuple[tuple[str, dict], ...]) -> str:
    """The `tally provider inventory set` that makes the change asked, field by field."""
    words = ["tally", "provider", "inventory", "set", uuid, "--amend"]
    for rc, fields in resources:
        for name, value in fields.items():
            words += ["--resource", f"{rc}:{name}={value}"]
    return shlex.join(words)


@explain.command("provider")
@click.argument("uuid", type=PROVIDER)
@resource_option("The change, as for `tally provider inventory set --amend` (repeatable).")
@STUCK_AFTER
@output_options
@pass_context
def provider(
    ctx: Context, out: Output, uuid: str, resources: tuple, stuck_after: dt.timedelta
) -> None:
    """Why changing provider UUID's inventory would be refused, who holds the
    capacity (each consumer classified as by `tally audit`), and the ordered plan
    that makes it succeed, each step with its command, the last one retrying the
    change (`-f json`: `steps`, then `alternatives` apart). Exit 1 when refused."""
    current = ctx.client.inventories(uuid)["inventories"]
    asked = asked_inventories(current, resources, amend=True)
    retry = retry_command(uuid, resources)
    found = explain_change(ctx.client, ctx.compute, uuid, asked, retry, stuck_after)
    render(out, found)
    notes(ctx.compute, ctx.client)
    if found.refused:
        exits.leave(exits.FAILED)


@explain.command("candidates")
@click.option(
    "--resource",
    "resources",
    required=True,
    multiple=True,
    metavar="CLASS=N[,CLASS=N...]",
    help="What is asked, e.g. VCPU=4,MEMORY_MB=8192 (`CLASS:N` too; repeatable).",
)
@click.option("--required", multiple=True, help="A required trait (`!TRAIT` forbids; repeatable).")
@click.option("--member-of", multiple=True, help="Aggregates, `in:A,B` any of (repeatable).")
@output_options
@pass_context
def candidates(
    ctx: Context, out: Output, resources: tuple[str, ...], required: tuple, member_of: tuple
) -> None:
    """When no host fits ("No valid host was found"): how many provider trees each
    constraint rules out (capacity per class, traits, aggregates), and the closest
    misses. Exit 1 when no candidate fits."""
    asked = shape_param(resources)
    with progress_bar("reading providers") as tick:
        found = explain_candidates(ctx.client, asked, list(required), list(member_of), tick)
    if out.fmt in ("json", "yaml"):
        out.dump(found.as_dict())
    else:
        click.echo(f"{found.candidates} candidates; {found.trees} provider trees")
        out.rows(
            ["constraint", "trees ruled out"],
            ({"constraint": k, "trees ruled out": v} for k, v in found.ruled_out.items()),
        )
        out.rows(["name", "root", "reasons"], (dataclasses.asdict(m) for m in found.closest))
    if not found.candidates:
        exits.leave(exits.FAILED)
