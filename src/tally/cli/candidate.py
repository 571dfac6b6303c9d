"""`tally allocation candidate list`: where a request would fit (microversion 1.10)."""

from __future__ import annotations

from typing import Any

import click

from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.filters import member_of_params, required_params, resources_param

GROUPED = ("--resource", "--required", "--forbidden", "--member-of")
SEP = "\x1f"  # joins a grouped option's value to the request group it follows


class GroupedCommand(click.Command):
    """`--group N` makes the --resource/--required/--forbidden/--member-of options
    after it part of request group N, as osc-placement reads them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        tagged, suffix, i = [], "", 0
        while i < len(args):
            token = args[i]
            name, eq, inline = token.partition("=")
            if name == "--group":
                suffix = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            elif name in GROUPED and eq:
                token = f"{name}={suffix}{SEP}{inline}"
            elif name in GROUPED and i + 1 < len(args):
                tagged.append(token)
                i += 1
                token = f"{suffix}{SEP}{args[i]}"
            tagged.append(token)
            i += 1
        return super().parse_args(ctx, tagged)


def grouped(values: tuple[str, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for value in values:
        suffix, _, plain = value.rpartition(SEP)
        found.setdefault(suffix, []).append(plain)
    return found


def query(options: dict[str, Any]) -> dict[str, Any]:
    """The query string of GET /allocation_candidates, group by group."""
    parts = {k: grouped(options[k]) for k in ("resources", "required", "forbidden", "member_of")}
    params: dict[str, Any] = {"limit": options["limit"], "group_policy": options["group_policy"]}
    for suffix in sorted(set().union(*(p.keys() for p in parts.values()))):
        if suffix not in parts["resources"]:
            raise click.UsageError(f"request group {suffix!r} has no --resource")
        params[f"resources{suffix}"] = resources_param(tuple(parts["resources"][suffix]))
        wanted = tuple(parts["required"].get(suffix, ()))
        params[f"required{suffix}"] = required_params(
            wanted, tuple(parts["forbidden"].get(suffix, ()))
        )
        params[f"member_of{suffix}"] = member_of_params(tuple(parts["member_of"].get(suffix, ())))
    if any(suffix for suffix in parts["resources"]) and not params["group_policy"]:
        params["group_policy"] = "none"
    return params


@click.group()
def allocation() -> None:
    """Allocations across providers: candidates for a request."""


@allocation.group()
def candidate() -> None:
    """Allocation candidates: the providers that could serve a request."""


@candidate.command("list", cls=GroupedCommand)
@click.option(
    "--resource",
    "resources",
    multiple=True,
    metavar="CLASS=AMOUNT",
    help="An amount the candidate must have room for, e.g. VCPU=4. Repeatable.",
)
@click.option(
    "--required",
    multiple=True,
    metavar="TRAIT",
    help="A trait the candidate's providers must have (1.17); `!TRAIT` forbids it (1.22); "
    "`A,B` or `in:A,B` means any of them (1.39). Repeatable: all must hold.",
)
@click.option("--forbidden", multiple=True, metavar="TRAIT", help="A forbidden trait (1.22).")
@click.option(
    "--member-of",
    multiple=True,
    metavar="AGGREGATES",
    help="Aggregate UUIDs, comma-separated: in any of them (1.21); `!AGG` excludes "
    "(1.32). Repeatable: each must hold (1.24).",
)
@click.option(
    "--group",
    multiple=True,
    metavar="N",
    help="Start request group N (1.25; a name like _NET from 1.33): the --resource, "
    "--required, --forbidden and --member-of after it are served by one provider.",
)
@click.option(
    "--group-policy",
    type=click.Choice(["none", "isolate"]),
    help="With several groups: `isolate` puts each on a different provider; default none.",
)
@click.option("--limit", type=int, help="At most this many candidates (1.16).")
@output_options
@pass_context
def list_(ctx: Context, out: Output, **options: Any) -> None:
    """List allocation candidates: each way a request could be allocated, one row per
    provider of each candidate, with the providers' used/capacity per class.

    For example, 3 VCPU from a provider with AVX and 2 from another one with SSE,
    in one tree:

        tally allocation candidate list --group 1 --resource VCPU=3 --required
        HW_CPU_X86_AVX --group 2 --resource VCPU=2 --required HW_CPU_X86_SSE
        --group-policy isolate
    """
    client = ctx.client
    client.require("1.10", "allocation candidate list")
    if not options["resources"]:
        raise click.UsageError("give at least one --resource CLASS=AMOUNT")
    found = client.get("/allocation_candidates", query(options))
    fields = ["#", "allocation", "resource provider", "inventory used/capacity"]
    out.rows(fields + (["traits"] if client.at_least("1.17") else []), candidate_rows(found))


def candidate_rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per provider of each allocation request, with that provider's room."""
    summaries, rows = found["provider_summaries"], []
    for number, request in enumerate(found["allocation_requests"], start=1):
        held = request["allocations"]
        if isinstance(held, list):  # before 1.12
            held = {a["resource_provider"]["uuid"]: a for a in held}
        for rp, entry in held.items():
            summary = summaries.get(rp, {})
            room = {rc: f"{v['used']}/{v['capacity']}" for rc, v in summary["resources"].items()}
            row = {"#": number, "allocation": entry["resources"], "resource provider": rp}
            rows.append({**row, "inventory used/capacity": room, "traits": summary.get("traits")})
    return rows
