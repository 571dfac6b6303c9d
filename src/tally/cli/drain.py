"""`tally drain HOST`: empty a compute host, then check its provider is empty;
`--what-if`: predict it in a sandbox of Tally's, writing nothing."""

from __future__ import annotations

import dataclasses

import click

from tally.cli import exits
from tally.cli.context import Context, Output, cell, output_options, pass_context
from tally.cli.progress import phases
from tally.cli.scripting import counted, dry_run, dry_run_line
from tally.doctor import drain as doctor
from tally.doctor import drain_what_if

PROVIDER_COLUMNS = (
    "provider",
    "resource_class",
    "used_before",
    "used_after",
    "capacity_before",
    "capacity_after",
    "fits",
    "note",
)

COLUMNS = ["server", "status", "target", "migration", "error"]


@click.command("drain")
@click.argument("host")
@click.option("--apply", is_flag=True, help="Do it (default: check the plan, write nothing).")
@click.option(
    "--what-if",
    is_flag=True,
    help="Predict it in a sandbox (Tally's API): which servers would move where, which "
    "would fail and why, each host's usage after against its capacity; nothing is written.",
)
@click.option("--reason", default=doctor.REASON, show_default=True, help="Why it is disabled.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait in all.")
@output_options(csv_ok=False)
@pass_context
def drain(
    ctx: Context,
    out: Output,
    host: str,
    apply: bool,
    what_if: bool,
    reason: str,
    timeout: float,
) -> None:
    """Disable HOST's compute service with a reason, live-migrate its servers,
    wait for each migration, check its provider holds no allocations, and report
    what is left. HOST stays disabled afterwards: the last line says how to enable
    it again.

    First, without writing, the plan is checked: nova-compute up on HOST, each
    server ACTIVE or PAUSED with no task under way, another enabled host with
    room for each, nothing held on HOST that no migration takes away; each reason
    it fails is printed, and --apply then writes nothing. A dry run unless
    --apply. Exit status: 0 drained (or nothing to do), 1 not drained or the plan
    fails, 5 a dry run whose plan holds (add --apply), 127 bad input.

    --what-if predicts it in a sandbox of Tally's instead (each server placed as
    the scheduler would place it, each move judged as its claim would be), writing
    nothing: exit 0 when it would drain, 1 when not.
    """
    if what_if:
        if apply:
            raise click.UsageError("--what-if and --apply exclude each other")
        return _what_if(ctx, out, host)
    with phases("drain") as progress:
        report = doctor.drain(
            ctx.client, ctx.compute, host, apply, reason, timeout=timeout, progress=progress
        )
    if out.fmt in ("json", "yaml"):
        out.dump(report.as_dict())
    else:
        out.rows(COLUMNS, map(dataclasses.asdict, report.moves))
        for blocker in report.blockers:
            click.echo(f"cannot drain {host}: {blocker}")
        if report.applied:
            for consumer, held in report.left.items():
                click.echo(f"left on {host}: {consumer} {cell(held)}")
            click.echo("drained" if report.drained else "not drained")
            click.echo(doctor.stays_disabled(host))
        elif not report.feasible:
            click.echo(f"not drained: nothing changed on {host}" if apply else "the plan fails")
        else:
            click.echo(f"the plan holds: {len(report.moves)} server(s) to live-migrate")
            click.echo(f"with --apply: {doctor.stays_disabled(host)}")
    if not apply:
        dry_run_line()
    exits.leave(exits.drain_status(apply, report.feasible, report.pending, report.drained))


def _what_if(ctx: Context, out: Output, host: str) -> None:
    found = drain_what_if.predict(ctx.client, ctx.compute, host)
    if out.fmt in ("json", "yaml"):
        out.dump(found.as_dict())
    else:
        columns = ["server", "name", "outcome", "to", "reason"]
        out.rows(columns, map(dataclasses.asdict, found.moves))
        Output(out.fmt).rows(PROVIDER_COLUMNS, [r.as_dict() for r in found.rows])
        for consumer, held in found.left.items():
            click.echo(f"would stay on {host}: {consumer} {cell(held)}")
        failing = sum(m.outcome == "fails" for m in found.moves)
        moving = len(found.moves) - failing
        said = f"would drain {host}"
        if not found.drained:
            said = (
                f"would not drain {host}: {failing} of {counted(len(found.moves), 'server')} "
                f"would fail, {counted(len(found.left), 'consumer')} would still hold on it"
            )
        click.echo(said)
        moves = counted(moving, "server")
        click.echo(dry_run(f"move {moves} off {host} (tally drain {host} --apply)"))
    if not found.drained:
        exits.leave(exits.FAILED)
