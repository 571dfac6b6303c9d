"""`tally failures`: the searches of GET /allocation_candidates that found nothing
(Tally's own API, `GET /tally/v1/failures`; admin only)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from tally.cli.context import Context, Output, output_options, pass_context
from tally.cli.inputs import ClassName
from tally.cli.scripting import Duration, ago, pages
from tally.clients.placement import PlacementClient

COLUMNS = ("created_at", "request_id", "global_request_id", "project_id", "reason", "query")


def fetch(client: PlacementClient, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """At most `limit` records matching `params`, newest first."""
    missing = (
        "this Placement keeps no failed searches (GET /tally/v1/failures answered 404): "
        "it is Tally's own API"
    )
    return pages(client.failures, "failures", params, limit, missing)


@click.command("failures")
@click.option("--request-id", help="Only this request's (its id or the global request id).")
@click.option("--since", type=Duration(), help="Only of this last while (90s, 30m, 1h, 7d).")
@click.option("--until", type=Duration(), help="Only at least this old (1h: before an hour ago).")
@click.option(
    "--class",
    "resource_class",
    type=ClassName(),
    help="Only searches asking for this resource class.",
)
@click.option("--trait", help="Only searches naming this trait (required, forbidden or any-of).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="At most this many, the newest.",
)
@output_options(columns=COLUMNS)
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
    params = {
        "request_id": request_id,
        "since": ago(since),
        "until": ago(until),
        "resource_class": resource_class,
        "trait": trait,
    }
    out.rows(COLUMNS, fetch(ctx.client, params, limit))
