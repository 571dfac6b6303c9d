"""`tally capacity`: how many more of a flavor or a shape fit, per host or aggregate."""

from __future__ import annotations

import dataclasses
import re

import click

from tally.cli import exits
from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.filters import member_of_params, required_params, shape_param
from tally.cli.scripting import notes, summary
from tally.doctor import fill as doctor
from tally.doctor import whatif

ADD_MAX = 1000  # copies one --after adds (the sandbox API's count)
COLUMNS = {
    "provider": ("provider", "uuid", "fits", "limiting"),
    "aggregate": ("aggregate", "providers", "fits"),
}


@click.command("capacity")
@click.option("--flavor", help="A flavor of the compute API (name or id): its claim's shape.")
@click.option(
    "--resource",
    "resources",
    multiple=True,
    metavar="CLASS=N[,CLASS=N...]",
    help="The shape, e.g. VCPU=4,MEMORY_MB=8192 (`CLASS:N` too; repeatable).",
)
@click.option(
    "--required",
    multiple=True,
    metavar="TRAIT",
    help="A trait the candidates must have; `!TRAIT` forbids; `A,B` any of (repeatable).",
)
@click.option("--member-of", multiple=True, metavar="AGGREGATES", help="Aggregates, `A,B` any of.")
@click.option(
    "--include-disabled",
    is_flag=True,
    help="Count hosts whose compute service is disabled too (Nova's scheduler leaves them out).",
)
@click.option(
    "--after",
    multiple=True,
    metavar="CHANGE",
    help="Count in a sandbox of Tally's once this is done: 'remove HOST[,HOST...]' (a "
    "uuid or name each: disabled, their consumers moved elsewhere, their trees "
    "removed), or 'add N x HOST' (N empty copies of HOST's tree, where the server's "
    "sandboxes can add); repeatable, in order. Nothing is written.",
)
@click.option(
    "--by",
    type=click.Choice(["provider", "aggregate"]),
    default="provider",
    show_default=True,
    help="One row per host provider, or per aggregate of the hosts.",
)
@output_options
@pass_context
def capacity(
    ctx: Context,
    out: Output,
    flavor: str | None,
    resources: tuple[str, ...],
    required: tuple[str, ...],
    member_of: tuple[str, ...],
    include_disabled: bool,
    after: tuple[str, ...],
    by: str,
) -> None:
    """How many more instances of a shape fit, counted exactly on current usage:
    one GET /allocation_candidates lists every way one fits (allocation ratios,
    reserved, min/max unit, step size, nested trees, sharing providers), then the
    room each provider summary reports is filled candidate after candidate, in
    the order the server answers, as claiming the first candidate until refused
    would. A row per host (the root of the tree giving the instance's own
    resources; an instance served by sharing providers alone counts on the
    sharing provider) with the classes that stop it (`limiting`), or per
    aggregate of the hosts (a host in two counts in both). The total is on
    stderr. Hosts whose compute service is disabled are left out, as Nova's
    scheduler leaves them out (`!COMPUTE_STATUS_DISABLED`), and how many were is
    said on stderr; --include-disabled counts them. `--after 'remove HOST,...'`
    counts in a sandbox of Tally's where those hosts are gone (their consumers
    moved first), and says on stderr which of those steps would be refused. Exit
    0 when at least one fits, 1 when none does, a step of --after is refused or
    on error, 127 bad input.
    """
    if bool(flavor) == bool(resources):
        raise click.UsageError("give either --flavor NAME or --resource CLASS=N,...")
    traits = tuple(required_params(required))
    aggregates = tuple(member_of_params(member_of))
    if flavor:
        try:
            shape = doctor.flavor_shape(ctx.compute, flavor, traits, aggregates)
        except doctor.UnknownFlavor as exc:
            raise click.BadParameter(str(exc), param_hint="--flavor") from exc
    else:
        shape = doctor.Shape(shape_param(resources), traits, aggregates)
    left_out = 0
    if not include_disabled:
        shape, left_out = doctor.leave_out_disabled(ctx.client, shape)
    changes = [c for text in after for c in after_changes(text)]
    failed: list[dict] = []
    if changes:
        found = whatif.capacity_after(ctx.client, shape, whatif.with_uuids(ctx.client, changes), by)
        report, failed = found.report, found.failed
    else:
        report = doctor.read_capacity(ctx.client, shape, by)
    out.rows(COLUMNS[by], map(dataclasses.asdict, report.rows))
    for step in failed:
        summary(
            f"after: step {step['kind']} {step['subject']} would be refused: "
            f"{step['error']['detail']}"
        )
    hosts = len(report.fill.hosts)
    when = f" after {'; '.join(after)}" if after else ""
    summary(
        f"{report.total} more of {shape.text()} fit{when}, on {hosts} "
        f"provider{'s' * (hosts != 1)}" + ("; nothing was written" if after else "")
    )
    if left_out:
        summary(
            f"{left_out} host{'s' * (left_out != 1)} left out: compute service disabled "
            f"(COMPUTE_STATUS_DISABLED), as Nova's scheduler leaves them; "
            f"--include-disabled counts them"
        )
    for note in shape.notes:
        summary(f"Note: {note}")
    notes(ctx.client)
    if report.total == 0 or failed:
        exits.leave(exits.FAILED)


def after_changes(text: str) -> list[dict]:
    """The sandbox changes of one --after: `remove HOST[,HOST...]`, or `add N x HOST`
    (N copies of HOST's provider tree, empty: the sandbox API's `add` of a
    template, where the server has it)."""
    verb, _, rest = text.strip().partition(" ")
    added = re.fullmatch(r"\s*(\d+)\s*x\s*(\S+)\s*", rest)
    if verb == "add" and added and 1 <= int(added.group(1)) <= ADD_MAX:
        return [{"kind": "add", "template": added.group(2), "count": int(added.group(1))}]
    hosts = [h.strip() for h in rest.split(",") if h.strip()]
    if verb != "remove" or not hosts:
        raise click.BadParameter(
            f"{text!r} is neither 'remove HOST[,HOST...]' nor 'add N x HOST' (N from 1 to "
            f"{ADD_MAX})",
            param_hint="--after",
        )
    return whatif.retire(hosts)
