"""`tally why REQUEST-ID`: why a search of GET /allocation_candidates found nothing,
from its record (`GET /tally/v1/failures?request_id=`): when, who asked, the query,
and the verdict (the constraints that rule trees out, the trees that came closest)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from tally.cli import exits
from tally.cli.context import Context, Output, cell, console, output_options, pass_context, shown
from tally.cli.failures import fetch
from tally.clients.placement import PlacementClient
from tally.escapes import visible

CONSTRAINTS = ("constraint", "rules_out")
CLOSEST = ("root", "name", "reasons", "shortfall")
MOST = 100  # records of one request id (a caller retrying under one global id)


def records_of(client: PlacementClient, request_id: str) -> list[dict[str, Any]]:
    """The failed searches of `request_id` (a request id or a global request id),
    newest first."""
    return fetch(client, {"request_id": request_id}, MOST)


@click.command("why")
@click.argument("request_id", metavar="REQUEST-ID")
@output_options
@pass_context
def why(ctx: Context, out: Output, request_id: str) -> None:
    """Why the search of REQUEST-ID (the Placement request id, or the global request
    id Nova logged with "No valid host was found") found nothing: when, who asked,
    the query, then the verdict. Exit 127 when no failed search has that id."""
    found = records_of(ctx.client, request_id)
    if not found:
        click.echo(f"Error: no failed search has the request id {visible(request_id)!r}", err=True)
        exits.leave(exits.BAD_INPUT)
    if out.fmt in ("json", "yaml"):
        out.dump(found)
        return
    for i, record in enumerate(found):
        if i:
            click.echo("")
        explain(out, record)


def explain(out: Output, record: Mapping[str, Any]) -> None:
    """One record for people: its facts, then its verdict's tables."""
    facts = {
        "when": record.get("created_at"),
        "request": record.get("request_id"),
        "global request": record.get("global_request_id"),
        "who": f"user {record.get('user_id') or '-'}, project {record.get('project_id') or '-'}",
        "microversion": record.get("microversion"),
        "query": record.get("query"),
        "reason": record.get("reason"),
    }
    for name, value in facts.items():
        console().print(shown(f"{name}: {cell(value)}"))
    verdict = record.get("verdict") or {}
    constraints = sorted(verdict.get("constraints") or (), key=lambda c: -(c.get("rules_out") or 0))
    if constraints:
        _table(out, "constraints (trees each rules out)", CONSTRAINTS, constraints)
    if verdict.get("closest"):
        _table(out, "closest trees", CLOSEST, verdict["closest"])


def _table(out: Output, title: str, columns: tuple[str, ...], rows: Any) -> None:
    if out.fmt == "value":
        for row in rows:
            click.echo(" ".join(cell(row.get(c)) for c in columns))
        return
    console().print(shown(title + ":"))
    table = out.table(columns)
    for row in rows:
        table.add_row(*(cell(row.get(c)) for c in columns))
    console().print(table)
