"""What makes the doctor's commands safe to script: durations on the command line, and
summaries on stderr (exit statuses: `tally.cli.exits`)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import click

from tally.clients.errors import PlacementError

PAGE = 1000  # the most Tally's own listings give at once


class Duration(click.ParamType):
    """`90s`, `30m`, `1h`, `2d`, or plain seconds."""

    name = "duration"
    UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 1}

    def convert(self, value: Any, param: Any, ctx: Any) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(value))
        if not match:
            self.fail(f"{value!r} is not a duration like 90s, 30m, 1h or 2d", param, ctx)
        return dt.timedelta(seconds=float(match.group(1)) * self.UNITS[match.group(2)])


STUCK_AFTER = click.option(
    "--stuck-after",
    type=Duration(),
    default="5m",
    show_default=True,
    help="A move whose state has not changed for this long is stuck (90s, 30m, 1h); on "
    "the lab, three of its steps if that is sooner.",
)


def summary(text: str) -> None:
    """A closing line for people: on stderr, so stdout stays the data."""
    click.echo(text, err=True)


DRY_RUN = "dry run: nothing written; add --apply"


def dry_run_line() -> None:
    """The last line of every command that writes only with --apply, without it."""
    summary(DRY_RUN)


def counted(n: int, noun: str) -> str:
    """`1 server`, `2 servers`."""
    return f"{n} {noun}{'s' * (n != 1)}"


def dry_run(would: str) -> str:
    """The last line of a command that wrote nothing (`tally db import --dry-run`,
    `tally plan`, `tally drain --what-if`)."""
    return f"dry run: would {would}; nothing was written"


def notes(*clients: Any) -> None:
    """What an older compute API (or a Placement without the claim history) could
    not tell, once each."""
    for client in clients:
        for note in getattr(client, "notes", []):
            summary(f"Note: {note}")


def ago(delta: dt.timedelta | None) -> str | None:
    """The moment `delta` ago as Tally's own APIs take a time (UTC, ISO 8601)."""
    if delta is None:
        return None
    return (dt.datetime.now(dt.UTC) - delta).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pages(
    ask: Callable[[dict[str, Any]], dict[str, Any]],
    key: str,
    params: dict[str, Any],
    limit: int,
    missing: str,
) -> list[dict[str, Any]]:
    """At most `limit` rows of one of Tally's own listings (`limit`, `marker`,
    `next_marker`), newest first, page after page; `missing`, one line, when the
    Placement asked has no such API (404: it is Tally's own)."""
    found: list[dict[str, Any]] = []
    marker = None
    while len(found) < limit:
        try:
            page = ask({**params, "limit": min(limit - len(found), PAGE), "marker": marker})
        except PlacementError as exc:
            if exc.status != 404:
                raise
            raise click.ClickException(missing) from exc
        found += page[key]
        marker = page.get("next_marker")
        if not marker:
            break
    return found
