"""`tally plan FILE`: a list of changes (a Watcher-like action plan) tried in a
sandbox of Tally's: before and after per provider, the steps refused; `--apply`
commits it whole, or nothing."""

from __future__ import annotations

from typing import IO, Any

import click
import yaml

from tally.cli import exits
from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.drain import PROVIDER_COLUMNS
from tally.cli.scripting import counted, dry_run_line
from tally.doctor import whatif

FAILED_COLUMNS = ("change", "kind", "subject", "status", "code", "detail")


def read_changes(file: IO[str]) -> list[Any]:
    """The changes of a JSON or YAML file: a list, or `{"changes": [...]}`."""
    try:
        found = yaml.safe_load(file)  # (JSON is YAML)
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"neither JSON nor YAML: {exc}", param_hint="FILE") from exc
    if isinstance(found, dict) and "changes" in found:
        found = found["changes"]
    if not isinstance(found, list) or not found:
        raise click.BadParameter(
            'not a list of changes (nor {"changes": [...]}) with at least one', param_hint="FILE"
        )
    return found


@click.command("plan")
@click.argument("file", type=click.File("r"))
@click.option(
    "--apply",
    is_flag=True,
    help="Commit it: every step in one transaction, only if none is refused and nothing "
    "it read has moved since (default: a dry run).",
)
@output_options
@pass_context
def plan(ctx: Context, out: Output, file: IO[str], apply: bool) -> None:
    """Try FILE's changes (JSON or YAML: a list of the sandbox API's changes, e.g.
    {"kind": "move", "consumer": UUID, "to": "anywhere"}; a provider may be named by
    its name) in a sandbox of Tally's, and show each provider's used and capacity
    before and after, and the steps refused with why. A dry run unless --apply,
    which commits them in one transaction when no step is refused, or writes
    nothing (409 naming what moved since). Exit 0 committed, 5 a dry run whose
    every step applies (add --apply), 1 a step refused or the commit refused, 127
    bad input (a file that does not read, a change the API does not take)."""
    changes = whatif.with_uuids(ctx.client, read_changes(file))
    report = whatif.try_plan(ctx.client, changes, commit=apply)
    if out.fmt in ("json", "yaml"):
        out.dump(report.as_dict())
    else:
        out.rows(PROVIDER_COLUMNS, [r.as_dict() for r in report.rows])
        if report.failed:
            Output(out.fmt).rows(FAILED_COLUMNS, [_failed(f) for f in report.failed])
        click.echo(_last_line(report, len(changes), apply, file.name))
    if not apply:
        dry_run_line()
    if report.failed or report.refused:
        exits.leave(exits.FAILED)
    exits.leave(exits.DONE if apply else exits.PENDING)


def _failed(step: dict[str, Any]) -> dict[str, Any]:
    """A refused step as a row: its error's lines on one (all of it: -f json)."""
    error = step.get("error") or {}
    detail = " ".join(line.strip() for line in str(error.get("detail", "")).splitlines())
    return {**step, "status": error.get("status"), "code": error.get("code"), "detail": detail}


def _last_line(report: whatif.PlanReport, changes: int, apply: bool, name: str) -> str:
    steps, refused = len(report.steps), len(report.failed)
    made = f"{counted(changes, 'change')} in {counted(steps, 'step')}"
    if report.committed:
        return f"committed {made}"
    if report.refused:
        return f"not committed, nothing was written: {report.refused}"
    if apply:
        return f"not committed, nothing was written: {refused} of {steps} steps refused"
    if refused:
        return f"would refuse {refused} of {counted(steps, 'step')} ({made})"
    return f"would commit {made} (tally plan {name} --apply)"
