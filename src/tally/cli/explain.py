"""`tally explain RP --resource ...` and `tally explain candidates ...`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex
from typing import Any

import click

from tally.cli import exits
from tally.cli.candidate_query import ORDER, InOrder, build_query, query_options
from tally.cli.context import (
    PROVIDER,
    Context,
    Output,
    console,
    output_options,
    pass_context,
    shown,
)
from tally.cli.inventory import asked_inventories, check_classes, resource_option
from tally.cli.inventory_report import render_check
from tally.cli.progress import phases
from tally.cli.scripting import STUCK_AFTER, notes
from tally.clients.errors import PlacementError
from tally.doctor.candidates import explain_candidates
from tally.doctor.explain import Explanation, explain_change
from tally.doctor.fit_hints import Hint, fit_hints


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
@output_options(csv_ok=False)
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
    check_classes(ctx.client, asked, current)
    retry = retry_command(uuid, resources)
    found = explain_change(ctx.client, ctx.compute, uuid, asked, retry, stuck_after)
    render(out, found)
    notes(ctx.compute, ctx.client)
    if found.refused:
        exits.leave(exits.FAILED)


@explain.command("candidates", cls=InOrder)
@query_options
@output_options(csv_ok=False)
@pass_context
def candidates(ctx: Context, out: Output, **params: Any) -> None:
    """When no host fits ("No valid host was found"): how many provider trees each
    constraint rules out on its own, and the closest misses. The query as
    `openstack allocation candidate list` spells it (`--group NAME` starts a
    granular group). Exit 1 when no candidate fits."""
    query = build_query(params, click.get_current_context().meta[ORDER])
    if not query:
        raise click.UsageError("Nothing asked: give --resource (or --required, --member-of).")
    try:
        found = ctx.client.why(query)
    except PlacementError as exc:
        if exc.status != 404:
            raise
        found = _asked_over_the_api(ctx, query)  # a Placement without Tally's API
    hints = fit_hints(found, ctx.client, ctx.compute) if not found["candidates"] else []
    found["hints"] = [dataclasses.asdict(h) for h in hints]
    if out.fmt in ("json", "yaml"):
        out.dump(found)
    else:
        fits = f"; {found['fits']} fit" if "fits" in found else ""
        click.echo(f"{found['candidates']} candidates; {found['trees']} provider trees{fits}")
        out.rows(
            ["constraint", "trees ruled out"],
            (
                {"constraint": c["constraint"], "trees ruled out": c["rules_out"]}
                for c in found["constraints"]
            ),
        )
        out.rows(
            ["name", "root", "reasons"],
            ({**m, "reasons": "; ".join(m["reasons"])} for m in found["closest"]),
        )
        render_hints(hints)
    if not found["candidates"]:
        exits.leave(exits.FAILED)


def render_hints(hints: list[Hint]) -> None:
    """What would make it fit, one action per line with its command under it."""
    if not hints:
        return
    con = console()
    con.print(shown("What would make it fit (each removes one reason of one tree):"))
    for hint in hints:
        con.print(shown(f"  - {hint.text}"))
        if hint.command:
            con.print(shown(f"      {hint.command}"))


def _asked_over_the_api(ctx: Context, query: dict[str, list[str]]) -> dict[str, Any]:
    """The explanation read over the public API (`doctor.candidates`), for the
    unsuffixed resources, required and member_of it understands."""
    known = {"resources", "required", "member_of"}
    if not set(query) <= known:
        unknown = ", ".join(sorted(set(query) - known))
        raise click.UsageError(
            f"This Placement explains only resources, required and member_of ({unknown} "
            "needs Tally's /tally/v1/allocation_candidates/why)."
        )
    asked = dict(pair.split(":") for pair in query["resources"][0].split(","))
    with phases("explain") as progress:
        found = explain_candidates(
            ctx.client,
            {rc: int(n) for rc, n in asked.items()},
            query.get("required", []),
            query.get("member_of", []),
            progress,
        )
    return {
        "candidates": found.candidates,
        "trees": found.trees,
        "constraints": [{"constraint": k, "rules_out": v} for k, v in found.ruled_out.items()],
        "closest": [
            {"name": m.name, "root": m.root, "reasons": list(m.reasons)} for m in found.closest
        ],
    }
