"""`tally history`: the claim history of a consumer or a provider (Tally's own API,
`GET /tally/v1/history`; admin only)."""

from __future__ import annotations

import datetime as dt

import click

from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context
from tally.cli.inputs import Uuid
from tally.cli.scripting import Duration, ago, pages

COLUMNS = (
    "time",
    "action",
    "consumer",
    "consumer_type",
    "provider",
    "resource_class",
    "before",
    "after",
    "provider_generation",
    "consumer_generation",
    "request_id",
    "global_request_id",
    "user_id",
    "project_id",
    "detail",
)
SHORT = ("time", "action", "consumer", "resource_class", "before", "after")
NOTHING = "No change recorded matches."


@click.command("history")
@click.argument("consumer", required=False, type=Uuid())
@click.option("--provider", type=PROVIDER, help="Only changes of this provider (uuid or name).")
@click.option(
    "--since", type=Duration(), help="Only changes of this last while (90s, 30m, 1h, 7d)."
)
@click.option(
    "--until", type=Duration(), help="Only changes at least this old (1h: before an hour ago)."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="At most this many changes, the newest.",
)
@output_options(columns=COLUMNS, short=SHORT)
@pass_context
def history(
    ctx: Context,
    out: Output,
    consumer: str | None,
    provider: str | None,
    since: dt.timedelta | None,
    until: dt.timedelta | None,
    limit: int,
) -> None:
    """The claim history, newest first: each change of allocations (before and after,
    per consumer, provider and class), inventories, providers (created, renamed or
    re-parented, deleted), traits and aggregates, with the Placement request that
    made it, the caller's global request id (nova-api's or nova-compute's), user and
    project. `tally history CONSUMER`, `tally history --provider RP --since 7d`; with
    neither, every change. Tally's own API (admin only): upstream Placement has none.
    """
    params = {"consumer": consumer, "provider": provider, "since": ago(since), "until": ago(until)}
    missing = (
        "this Placement has no claim history (GET /tally/v1/history answered 404): "
        "it is Tally's own API"
    )
    rows = pages(ctx.client.history, "history", params, limit, missing)
    if consumer is not None:  # the same on every row
        out.short = tuple(c for c in out.short if c != "consumer")
    out.rows(COLUMNS, rows, prose=("detail",), empty=NOTHING)
