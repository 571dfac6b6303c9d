"""`tally drain HOST`: empty a compute host, then check its provider is empty."""

from __future__ import annotations

import dataclasses

import click

from tally.cli import exits
from tally.cli.context import Context, Output, cell, output_options, pass_context
from tally.cli.progress import phases
from tally.cli.scripting import dry_run_line
from tally.doctor import drain as doctor

COLUMNS = ["server", "status", "target", "migration", "error"]


@click.command("drain")
@click.argument("host")
@click.option("--apply", is_flag=True, help="Do it (default: check the plan, write nothing).")
@click.option("--reason", default=doctor.REASON, show_default=True, help="Why it is disabled.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait in all.")
@output_options(csv_ok=False)
@pass_context
def drain(ctx: Context, out: Output, host: str, apply: bool, reason: str, timeout: float) -> None:
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
    """
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
