"""`tally audit`: classify every consumer holding allocations; free orphans."""

from __future__ import annotations

from typing import Any

import click

from tally.cli.context import Context, Output, cell, output_options, pass_context, progress_bar
from tally.cli.lab import compute
from tally.doctor import audit as doctor

COLUMNS = ("consumer", "class", "server", "host", "allocations", "reason")


def finding_row(report: doctor.Audit, finding: doctor.Finding) -> dict[str, Any]:
    names = report.providers
    return {
        "consumer": finding.consumer_uuid,
        "class": finding.kind,
        "server": finding.server,
        "host": finding.host,
        "allocations": {names.get(rp) or rp: r for rp, r in finding.allocations.items()},
        "reason": finding.reason,
    }


def render(out: Output, report: doctor.Audit, verbose: bool) -> None:
    if out.fmt in ("json", "yaml"):
        return out.dump(report.as_dict())
    shown = report.consumers if verbose else report.findings
    out.rows(COLUMNS, (finding_row(report, f) for f in shown))
    for removal in report.removals:
        verb = "removed" if removal.applied else "failed" if removal.error else "would remove"
        freed = {report.providers.get(rp) or rp: r for rp, r in removal.freed.items()}
        click.echo(f"{verb} {removal.consumer_uuid}: {cell(freed)} {removal.error or ''}".rstrip())
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items() if n)
    click.echo(f"{len(report.consumers)} consumers: {counts or 'none'}")


@click.command("audit")
@click.option("--provider", help="Audit only the consumers holding allocations on this provider.")
@click.option("--verbose", is_flag=True, help="List live and migrating consumers too.")
@click.option("--delete", is_flag=True, help="Free orphans and stale migration holds.")
@click.option("--apply", is_flag=True, help="With --delete: write (default: a dry run).")
@output_options
@pass_context
def audit(
    ctx: Context, out: Output, provider: str | None, verbose: bool, delete: bool, apply: bool
) -> None:
    """Classify each consumer holding allocations: live, migrating, orphan,
    stale-migration, double-allocation or leaked-host (exit 1 when any is found).

    --delete frees orphans and stale migration holds (only their part on --provider
    when given), with the consumer generation: a dry run unless --apply.
    """
    if apply and not delete:
        raise click.UsageError("--apply goes with --delete")
    with progress_bar("reading allocations") as tick:
        report = doctor.audit(ctx.client, compute(ctx), provider, tick)
    if delete:
        report = doctor.remove(ctx.client, report, apply)
    render(out, report, verbose)
    if not report.clean:
        raise click.exceptions.Exit(1)
