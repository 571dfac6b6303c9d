"""`tally heal`: give servers the allocations their flavor claims on their host."""

from __future__ import annotations

import dataclasses

import click

from tally.cli.context import Context, Output, output_options, pass_context, progress_bar
from tally.cli.lab import compute
from tally.doctor.heal import heal as heal_allocations

COLUMNS = ("server", "action", "allocations", "applied", "error")


@click.command("heal")
@click.option("--instance", help="Heal only this server.")
@click.option("--max-count", type=click.IntRange(min=1), help="Heal at most N servers.")
@click.option("--dry-run", is_flag=True, help="Show what would be written (the default).")
@click.option("--apply", is_flag=True, help="Write the allocations.")
@click.option("--force", is_flag=True, help="Rewrite allocations from the flavor even if present.")
@output_options
@pass_context
def heal(
    ctx: Context,
    out: Output,
    instance: str | None,
    max_count: int | None,
    dry_run: bool,
    apply: bool,
    force: bool,
) -> None:
    """Servers with no allocations get them from their flavor on their host;
    allocations missing project, user or consumer type are completed (the parity
    of `nova-manage placement heal_allocations`). A dry run unless --apply; exit 1
    when a write failed, or when a dry run finds something to heal."""
    if apply and dry_run:
        raise click.UsageError("--dry-run and --apply exclude each other")
    with progress_bar("checking servers") as tick:
        report = heal_allocations(
            ctx.client, compute(ctx), instance, max_count, apply, force, progress=tick
        )
    if out.fmt in ("json", "yaml"):
        out.dump(report.as_dict())
    else:
        out.rows(COLUMNS, (dataclasses.asdict(h) for h in report.healings))
        click.echo(f"{report.checked} servers checked, {len(report.healings)} to heal")
    if report.failed or (report.healings and not apply):
        raise click.exceptions.Exit(1)
