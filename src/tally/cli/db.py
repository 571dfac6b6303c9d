"""`tally db upgrade|version|import|export`: the schema (by Alembic), and moving a
cloud's books from upstream Placement's database into Tally's and back."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import click

from tally.cli.scripting import dry_run
from tally.cli.serve import read_settings
from tally.progress import Progress


@click.group()
def db() -> None:
    """Database schema commands, and moves from and to upstream Placement."""


def settings_options(f: Callable) -> Callable:
    """--config and --placement-conf: where the settings (and `database_url`) come from."""

    @click.option("--config", "config_file", help="A TOML settings file.")
    @click.option("--placement-conf", help="An upstream placement.conf to read options from.")
    @functools.wraps(f)
    def run(*args: Any, config_file: str | None, placement_conf: str | None, **kw: Any) -> Any:
        settings = read_settings(config_file, placement_conf)
        if "max_rows" in inspect.signature(f).parameters:  # the commands that read books
            kw["max_rows"] = settings.import_max_rows or None
        return f(*args, database=settings.database, **kw)

    return run


format_option = click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    help="Output: tables and a last line, or the report as JSON.",
)


@db.command()
@settings_options
def upgrade(database: str) -> None:
    """Migrate the database to the newest schema (and sync standard classes/traits)."""
    from tally.db import migrate  # imported here: keeps the operator commands quick
    from tally.db.engine import make_engine
    from tally.placement.ledger.bootstrap import prepare_database

    engine = make_engine(database)
    prepare_database(engine)
    click.echo(f"database at revision {migrate.current_revision(engine)}")


@db.command()
@settings_options
def version(database: str) -> None:
    """Print the database's schema revision and the newest one (changing nothing)."""
    from tally.db import migrate, probe

    found = probe.look(database)
    if found.kind == "upstream":
        click.echo(probe.refusal(database, found))
    click.echo(f"current {found.revision}, head {migrate.head_revision()}")


@db.command()
@settings_options
def check(database: str, max_rows: int | None) -> None:
    """Check Tally's database against the ledger's rules (read-only): exit 1 on a fault."""
    from tally.books import check, move

    with _moving("check") as progress:
        faults = move.check_books(database, max_rows, progress)
    if faults:
        raise click.ClickException(check.report(faults))
    click.echo("the books keep every rule of the ledger")


@db.command("import")
@click.option("--from", "source", required=True, help="URL of the upstream Placement database.")
@click.option("--dry-run", is_flag=True, help="Read both databases and report; write nothing.")
@click.option(
    "--repair",
    is_flag=True,
    help="Drop allocations and links pointing at what does not exist and repeated "
    "allocation rows (the largest kept) on the way; each fix is reported.",
)
@settings_options
@format_option
def import_(
    source: str, dry_run: bool, repair: bool, database: str, fmt: str, max_rows: int | None
) -> None:
    """Copy an upstream Placement database into Tally's empty one (read-only on it)."""
    from tally.books import move
    from tally.placement.ledger.bootstrap import prepare_database

    with _moving("import") as progress:
        source = move.placement_conf_url(source)
        outcome = move.import_from(
            source, database, prepare_database, progress, dry_run, repair, max_rows
        )
    _summary(outcome, fmt, "import")


@db.command("export")
@click.option("--to", "target", required=True, help="URL of an empty database for upstream.")
@click.option("--dry-run", is_flag=True, help="Read both databases and report; write nothing.")
@settings_options
@format_option
def export(target: str, dry_run: bool, database: str, fmt: str) -> None:
    """Copy Tally's database into an empty one in upstream Placement 16.0.0's schema."""
    from tally.books import move

    with _moving("export") as progress:
        outcome = move.export_to(database, move.placement_conf_url(target), progress, dry_run)
    _summary(outcome, fmt, "export")


@contextlib.contextmanager
def _moving(command: str) -> Iterator[Progress]:
    """Its phases on stderr (tally.cli.progress); a refusal or a mismatch as one
    message (the mismatch's differences first), exit status 1."""
    from tally.books.move import Mismatch, TransferError
    from tally.cli.progress import phases

    with phases(command) as progress:
        try:
            yield progress
        except Mismatch as exc:
            for check in exc.report.checks:
                for line in check.differences[:20]:
                    click.echo(f"  {line}", err=True)
            raise click.ClickException(str(exc)) from None
        except TransferError as exc:
            raise click.ClickException(str(exc)) from None


def _summary(outcome: Any, fmt: str, verb: str) -> None:
    """Rows per table, the checks, the providers over capacity, and one last line."""
    from tally.cli.context import Output, console

    report = outcome.report
    if fmt == "json":
        click.echo(_json(outcome))
        return
    out, tables = console(), Output()
    out.print(f"{outcome.source} (revision {outcome.revision}) -> {outcome.target}")
    rows = tables.table(["table", "source rows"] + ([] if outcome.dry_run else ["target rows"]))
    for count in report.counts:
        rows.add_row(
            count.table, str(count.source), *([] if outcome.dry_run else [str(count.target)])
        )
    out.print(rows)
    if report.checks:
        out.print("Checked, source against target:")
        checks = tables.table(["what", "rows", "result"])
        for check in report.checks:
            checks.add_row(check.what, str(check.rows), "same" if check.ok else "DIFFERENT")
        out.print(checks)
    if report.over_capacity:
        out.print("Already over capacity (readable; nothing more fits there until usage falls):")
        over = tables.table(["provider", "name", "resource class", "used", "capacity"])
        for o in report.over_capacity:
            over.add_row(o.provider, o.name, o.resource_class, str(o.used), f"{o.capacity:g}")
        out.print(over)
    for note in report.notes:
        out.print(f"note: {note}")
    click.echo(_last_line(outcome, verb))


def _last_line(outcome: Any, verb: str) -> str:
    counts = outcome.report.counts
    written = not outcome.dry_run and all(c.target is not None for c in counts)
    rows = {c.table: c.target if written else c.source for c in counts}
    what = (
        f"{rows['resource_providers']} providers, {rows['consumers']} consumers, "
        f"{rows['allocations']} allocations"
    )
    if outcome.dry_run:
        return dry_run(
            f"{verb} {what} (schema revision {outcome.revision}) into "
            f"{outcome.target} ({outcome.target_state})"
        )
    return (
        f"{verb}ed {what} (schema revision {outcome.revision}) from {outcome.source} into "
        f"{outcome.target}; {_checked_how(outcome.report)}; nothing was written to "
        f"{outcome.source}"
    )


def _checked_how(report: Any) -> str:
    if all(check.ok for check in report.checks):
        return "checked equal"
    return "checked equal but for the repairs noted"


def _json(outcome: Any) -> str:
    import json

    data = dataclasses.asdict(outcome)
    data["report"]["ok"] = outcome.report.ok
    return json.dumps(data, indent=2, default=str)


# `tally db sync`: placement-manage's (and nova-manage's) spelling of `tally db upgrade`
sync = copy.copy(upgrade)
sync.name = "sync"
sync.short_help = "The same as `tally db upgrade` (placement-manage db sync's spelling)."
db.add_command(sync)
