"""A query of GET /allocation_candidates spelled as `openstack allocation
candidate list` spells it: `--resource`, `--required`, `--forbidden` and
`--member-of` belong to the unsuffixed group until a `--group NAME` starts a
granular one, whose they are after it; `--group-policy` and `--limit` are
request-wide. Tally adds what osc-placement lacks: `--in-tree` (per group),
`--root-required` and `--same-subtree`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from tally.cli import inputs
from tally.nova.shapes import ShapeError, parse_shape

ORDER = "tally.option_order"
GROUPED = ("resources", "required", "forbidden", "member_of", "in_tree")


class InOrder(click.Command):
    """A command that keeps the order its options came in (`ctx.meta[ORDER]`, one
    name per occurrence): which group an option belongs to is where it stands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        ctx.meta[ORDER] = [param.name for param in order]
        return super().parse_args(ctx, args)


def query_options(command: Callable) -> Callable:
    """The options of the query, osc's spelling (see the module)."""
    options = [
        click.option(
            "--resource",
            "resources",
            multiple=True,
            metavar="CLASS=N",
            help="An amount of a class, e.g. VCPU=4 (`CLASS:N`, comma lists too; repeatable).",
        ),
        click.option(
            "--required",
            multiple=True,
            help="A required trait; `A,B` any of them (repeatable).",
        ),
        click.option("--forbidden", multiple=True, help="A forbidden trait (repeatable)."),
        click.option(
            "--member-of",
            multiple=True,
            help="Aggregates: `A,B` (or `in:A,B`) any of them, `!A` not in it (repeatable).",
        ),
        click.option("--in-tree", multiple=True, help="Only the tree of this provider (uuid)."),
        click.option(
            "--group",
            multiple=True,
            help="Start the granular group NAME: the options after it are its own.",
        ),
        click.option(
            "--group-policy",
            type=click.Choice(["none", "isolate"]),
            help="isolate: the granular groups take different providers.",
        ),
        click.option("--root-required", multiple=True, help="A root trait (`!T` forbids one)."),
        click.option(
            "--same-subtree", multiple=True, help="Group names whose providers share a subtree."
        ),
        click.option("--limit", type=click.IntRange(min=1), help="At most this many candidates."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def build_query(params: Mapping[str, Any], order: Sequence[str]) -> dict[str, list[str]]:
    """The query string's parameters from the command's values in the order given;
    click.BadParameter naming the option for a value that does not read."""
    taken: dict[str, int] = defaultdict(int)
    groups: dict[str, dict[str, list[str]]] = {"": defaultdict(list)}
    current = ""
    for name in order:
        if name not in (*GROUPED, "group"):
            continue
        value = params[name][taken[name]]
        taken[name] += 1
        if name == "group":
            current = value
            groups.setdefault(current, defaultdict(list))
        else:
            groups[current][name].append(value)
    query: dict[str, list[str]] = defaultdict(list)
    for suffix, group in groups.items():
        _group_query(query, suffix, group)
    for key in ("group_policy", "limit"):
        if params.get(key) is not None:
            query[key] = [str(params[key])]
    if params.get("root_required"):
        query["root_required"] = [",".join(params["root_required"])]
    for subtree in params.get("same_subtree") or ():
        query["same_subtree"].append(subtree)
    return dict(query)


def _group_query(query: dict[str, list[str]], s: str, group: dict[str, list[str]]) -> None:
    if group["resources"]:
        try:
            amounts = parse_shape(",".join(group["resources"]))
        except ShapeError as exc:
            raise click.BadParameter(str(exc), param_hint="--resource") from None
        query[f"resources{s}"] = [",".join(f"{rc}:{n}" for rc, n in amounts.items())]
    for trait in group["required"]:
        query[f"required{s}"].append(f"in:{trait}" if "," in trait else trait)
    for trait in group["forbidden"]:
        query[f"required{s}"].append(f"!{trait}")
    for aggregates in map(inputs.member_of, group["member_of"]):
        plain = "," in aggregates and not aggregates.startswith(("in:", "!"))
        query[f"member_of{s}"].append(f"in:{aggregates}" if plain else aggregates)
    if group["in_tree"]:
        query[f"in_tree{s}"] = group["in_tree"][-1:]
