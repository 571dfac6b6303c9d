"""`tally drain HOST`: empty a compute host, then check its provider is empty;
`--what-if`: predict it in a sandbox of Tally's, writing nothing."""

from __future__ import annotations

import dataclasses

import click

from tally.cli import exits
from tally.cli.context import Context, Output, cell, output_options, pass_context, progress_bar
from tally.cli.scripting import counted, dry_run
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


@click.command("drain")
@click.argument("host")
@click.option("--apply", is_flag=True, help="Do it (default: say what would be done).")
@click.option(
    "--what-if",
    is_flag=True,
    help="Predict it in a sandbox (Tally's API): which servers would move where, which "
    "would fail and why, each host's usage after against its capacity; nothing is written.",
)
@click.option("--reason", default=doctor.REASON, show_default=True, help="Why it is disabled.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait in all.")
@output_options
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
    it again. A dry run unless --apply; --what-if predicts it in a sandbox of
    Tally's (each server placed as the scheduler would place it, each move judged
    as its claim would be). Exit 1 unless drained (--what-if: unless it would be)."""
    if what_if:
        if apply:
            raise click.UsageError("--what-if and --apply exclude each other")
        return _what_if(ctx, out, host)
    with progress_bar("migrating servers") as tick:
        report = doctor.drain(
            ctx.client, ctx.compute, host, apply, reason, timeout=timeout, progress=tick
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
