"""`tally heal`: give servers the allocations their flavor claims on their host."""

from __future__ import annotations

import dataclasses

import click

from tally.cli import exits
from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.progress import phases
from tally.cli.scripting import dry_run_line, notes, summary
from tally.doctor.heal import heal as heal_allocations

COLUMNS = ("server", "action", "allocations", "reason", "applied", "error")


@click.command("heal")
@click.option("--instance", help="Heal only this server.")
@click.option("--max-count", type=click.IntRange(min=1), help="Heal at most N servers.")
@click.option("--dry-run", is_flag=True, help="Show what would be written (the default).")
@click.option("--apply", is_flag=True, help="Write the allocations.")
@click.option("--force", is_flag=True, help="Rewrite allocations from the flavor even if present.")
@output_options(columns=COLUMNS)
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
    """Servers on a host holding nothing get their flavor there; a server accounted
    on another host gets back what its failed move holds on its own host (or its
    flavor there); allocations missing project, user or consumer type are completed
    (the parity of `nova-manage placement heal_allocations`). A dry run unless
    --apply.

    Exit status as nova-manage's: 0 healed, 1 --max-count reached with servers
    left (or a service cannot be reached), 2 a server's host has no resource
    provider (its compute service was deleted: re-create or restart it), 3 a write
    failed, 4 nothing to heal, 5 a dry run that found servers to heal (nothing
    written: add --apply), 127 bad input (an --instance the compute API does not
    have too), 255 an unexpected error.
    """
    if apply and dry_run:
        raise click.UsageError("--dry-run and --apply exclude each other")
    with phases("heal") as progress:
        report = heal_allocations(
            ctx.client, ctx.compute, instance, max_count, apply, force, progress=progress
        )
    out.rows(COLUMNS, (dataclasses.asdict(h) for h in report.healings))
    healable = [h for h in report.healings if h.action != "no-provider"]
    if apply:
        healed = sum(1 for h in healable if h.applied)
        failed = sum(1 for h in healable if h.error)
        said = f"{healed} healed" + (f", {failed} failed" if failed else "")
    else:
        said = f"{len(healable)} to heal"
    summary(f"{report.checked} servers checked, {said}")
    for stranded in report.stranded:
        summary(f"Cannot heal {stranded.server}: {stranded.reason}")
    notes(ctx.compute)
    if not apply:
        dry_run_line()
    exits.leave(
        exits.heal_status(
            report.failed, bool(report.stranded), report.more, bool(healable), dry_run=not apply
        )
    )
