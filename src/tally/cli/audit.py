"""`tally audit`: are the books true? Every consumer classified; what is safe freed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from tally.cli import exits
from tally.cli.context import (
    PROVIDER,
    Context,
    Output,
    cell,
    output_options,
    pass_context,
)
from tally.cli.progress import phases
from tally.cli.scripting import STUCK_AFTER, dry_run_line, notes, summary
from tally.clients.errors import PlacementError
from tally.doctor import audit as doctor

COLUMNS = ("consumer", "kind", "server", "host", "allocations", "reason", "fix", "action")
COLUMNS += ("history",)  # when, and by which request, the hold was written
SHORT = ("consumer", "kind", "host", "fix")  # the table's, with "action" after --delete
PROSE = ("allocations", "reason", "action", "history")  # may wrap in a table
NOTHING = "Nothing found: every consumer and server checked is accounted for."


def rows(report: doctor.Audit, verbose: bool) -> list[dict[str, Any]]:
    books = report.books
    writes = {w.target: w for w in report.writes}
    shown = report.consumers if verbose else report.findings
    found = [
        {
            "consumer": f.consumer_uuid,
            "kind": f.kind,
            "server": f.server,
            "host": f.host,
            "allocations": {books.name(rp): r for rp, r in f.allocations.items()},
            "reason": f.reason,
            "fix": f.fix,
            "action": _action(report, writes.get(f.consumer_uuid)),
            "history": f.history.as_dict() if f.history else None,
        }
        for f in shown
    ]
    for rp in report.leaked_providers:
        found.append(
            {
                "consumer": rp,
                "kind": "leaked-provider",
                "server": None,
                "host": books.name(rp),
                "allocations": {},
                "reason": "a provider no compute service reports",
                "fix": f"tally audit --provider {rp} --delete --apply",
                "action": _action(report, writes.get(rp)),
                "history": None,
            }
        )
    return found


def _must_exist(ctx: Context, provider: str) -> None:
    """An unknown --provider is bad input (127), as nova-manage's audit says."""
    try:
        ctx.client.get(f"/resource_providers/{provider}")
    except PlacementError as exc:
        if exc.status != 404:
            raise
        raise click.BadParameter(
            f"no resource provider {provider}", param_hint="--provider"
        ) from None


def _action(report: doctor.Audit, write: doctor.Write | None) -> str | None:
    """What --delete did (or, in a dry run, would do) for this row."""
    if write is None:
        return None
    if write.error:
        return f"failed: {write.error}"
    if write.delete_provider:
        verb, what = ("deleted", "delete"), f"provider {report.books.name(write.target)}"
    else:
        freed = {report.books.name(rp): r for rp, r in write.freed.items()}
        verb, what = ("freed", "free"), cell(freed)
    return f"{verb[0]} {what}" if write.applied else f"would {verb[1]} {what}"


def _written(writes: tuple[doctor.Write, ...], apply: bool) -> str:
    """What --delete wrote, or (a dry run) would write."""
    if not apply:
        return f"{len(writes)} write(s) to make"
    failed = sum(1 for w in writes if w.error)
    done = f"{sum(1 for w in writes if w.applied)} of {len(writes)} write(s) made"
    return done + (f", {failed} failed" if failed else "")


@click.command("audit")
@click.option(
    "--provider",
    type=PROVIDER,
    help="Audit the consumers on this provider (uuid or name) and its host's servers.",
)
@click.option("--verbose", is_flag=True, help="List live and migrating consumers too.")
@STUCK_AFTER
@click.option("--delete", is_flag=True, help="Free what is safe to free (see below).")
@click.option("--apply", is_flag=True, help="With --delete: write (default: a dry run).")
@output_options(columns=COLUMNS, short=SHORT)
@pass_context
def audit(
    ctx: Context,
    out: Output,
    provider: str | None,
    verbose: bool,
    stuck_after: dt.timedelta,
    delete: bool,
    apply: bool,
) -> None:
    """Compare Placement with the compute API: each consumer (and each server that
    should hold something) is live, migrating, stuck-migration, orphan,
    stale-migration, double-allocation, misplaced, unallocated, leaked-host,
    unverified or offloaded; the `fix` column names the command that resolves it.

    --delete frees orphans, stale migration holds and what offloaded (shelved)
    servers hold, a double allocation's part off
    its host and servers' parts on a leaked provider (which is then deleted), each
    consumer's rest written back with its consumer generation; only on --provider
    when given. A dry run unless --apply. Exit status as nova-manage's: 0 nothing
    found, 3 found (or not all of it written), 4 everything found was fixed, 1
    cannot reach a service, 127 bad input (a --provider that does not exist too);
    a --delete dry run that would fix everything found: 5.
    """
    if apply and not delete:
        raise click.UsageError("--apply goes with --delete")
    if provider is not None:
        _must_exist(ctx, provider)
    with phases("audit") as progress:
        report = doctor.audit(ctx.client, ctx.compute, provider, progress, stuck_after)
        if delete:
            report = doctor.remove(ctx.client, report, apply, progress)
    if delete:
        out.short += ("action",)
    out.rows(COLUMNS, rows(report, verbose), prose=PROSE, empty=NOTHING)
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items() if n)
    summary(f"{len(report.consumers)} consumers: {counts or 'none'}")
    if delete:
        summary(_written(report.writes, apply))
    notes(ctx.compute, ctx.client)
    found = bool(report.findings or report.leaked_providers)
    failed = any(w.error for w in report.writes)
    if delete and not apply:
        dry_run_line()
        exits.leave(exits.audit_status(found, report.all_planned, failed, dry_run=True))
    exits.leave(exits.audit_status(found, apply and report.all_fixed, failed))
