"""`tally failures`: the searches of GET /allocation_candidates that found nothing
(Tally's own API, `GET /tally/v1/failures`; admin only)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.scripting import Duration
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient

COLUMNS = ("created_at", "request_id", "global_request_id", "project_id", "reason", "query")
PAGE = 1000  # the most the API gives at once


def fetch(client: PlacementClient, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """At most `limit` records matching `params`, newest first, page after page; a
    one-line error against a Placement without them."""
    found: list[dict[str, Any]] = []
    marker = None
    while len(found) < limit:
        wanted = {**params, "limit": min(limit - len(found), PAGE), "marker": marker}
        try:
            page = client.failures(wanted)
        except PlacementError as exc:
            if exc.status != 404:
                raise
            raise click.ClickException(
                "this Placement keeps no failed searches (GET /tally/v1/failures answered "
                "404): it is Tally's own API"
            ) from exc
        found += page["failures"]
        marker = page.get("next_marker")
        if not marker:
            break
    return found


def stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@click.command("failures")
@click.option("--request-id", help="Only this request's (its id or the global request id).")
@click.option("--since", type=Duration(), help="Only of this last while (90s, 30m, 1h, 7d).")
@click.option("--until", type=Duration(), help="Only at least this old (1h: before an hour ago).")
@click.option("--class", "resource_class", help="Only searches asking for this resource class.")
@click.option("--trait", help="Only searches naming this trait (required, forbidden or any-of).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="At most this many, the newest.",
)
@output_options
@pass_context
def failures(
    ctx: Context,
    out: Output,
    request_id: str | None,
    since: dt.timedelta | None,
    until: dt.timedelta | None,
    resource_class: str | None,
    trait: str | None,
    limit: int,
) -> None:
    """The searches of GET /allocation_candidates that found nothing ("No valid host
    was found"), newest first, with the request and the caller's global request id,
    the project, the dominant reason and the query. `tally why REQUEST-ID` explains
    one. Tally's own API (admin only): upstream Placement has none."""
    now = dt.datetime.now(dt.UTC)
    params = {
        "request_id": request_id,
        "since": stamp(now - since) if since is not None else None,
        "until": stamp(now - until) if until is not None else None,
        "resource_class": resource_class,
        "trait": trait,
    }
    out.rows(COLUMNS, fetch(ctx.client, params, limit))
