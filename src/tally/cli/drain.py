"""`tally drain HOST`: empty a compute host, then check its provider is empty."""

from __future__ import annotations

import dataclasses

import click

from tally.cli import exits
from tally.cli.context import Context, Output, cell, output_options, pass_context
from tally.cli.progress import phases
from tally.doctor import drain as doctor


@click.command("drain")
@click.argument("host")
@click.option("--apply", is_flag=True, help="Do it (default: say what would be done).")
@click.option("--reason", default=doctor.REASON, show_default=True, help="Why it is disabled.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait in all.")
@output_options
@pass_context
def drain(ctx: Context, out: Output, host: str, apply: bool, reason: str, timeout: float) -> None:
    """Disable HOST's compute service with a reason, live-migrate its servers,
    wait for each migration, check its provider holds no allocations, and report
    what is left. HOST stays disabled afterwards: the last line says how to enable
    it again. A dry run unless --apply; exit 1 unless drained."""
    with phases("drain") as progress:
        report = doctor.drain(
            ctx.client, ctx.compute, host, apply, reason, timeout=timeout, progress=progress
        )
    if out.fmt in ("json", "yaml"):
        out.dump(report.as_dict())
    else:
        out.rows(["server", "status", "migration", "error"], map(dataclasses.asdict, report.moves))
        for consumer, held in report.left.items():
            click.echo(f"left on {host}: {consumer} {cell(held)}")
        click.echo("drained" if report.drained else "not drained")
        said = doctor.stays_disabled(host)
        click.echo(said if apply else f"with --apply: {said}")
    if not report.drained:
        exits.leave(exits.FAILED)
