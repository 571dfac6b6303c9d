"""`tally why REQUEST-ID|SERVER`: why a search of GET /allocation_candidates found
nothing, from its record (`GET /tally/v1/failures?request_id=`): when, who asked,
the query, and the verdict (the constraints that rule trees out, the trees that came
closest); then what would make it fit now (`doctor.fit_hints`). A server (name or
uuid, deleted too) is found through the compute API's instance actions, whose
request ids are the global request ids Nova sent Placement."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

import click

from tally.cli import exits
from tally.cli.context import (
    Context,
    Output,
    ProviderRef,
    cell,
    console,
    output_options,
    pass_context,
    shown,
)
from tally.cli.explain import render_hints
from tally.cli.failures import fetch
from tally.clients.compute import ComputeClient, ComputeError
from tally.clients.errors import ClientError
from tally.clients.placement import PlacementClient
from tally.doctor.fit_hints import Hint, fit_hints
from tally.escapes import visible

CONSTRAINTS = ("constraint", "rules_out")
CLOSEST = ("root", "name", "reasons", "distance")
MOST = 100  # records of one request id (a caller retrying under one global id)


def records_of(client: PlacementClient, request_id: str) -> list[dict[str, Any]]:
    """The failed searches of `request_id` (a request id or a global request id),
    newest first."""
    return fetch(client, {"request_id": request_id}, MOST)


@click.command("why")
@click.argument("request_id", metavar="REQUEST-ID|SERVER")
@output_options(csv_ok=False)
@pass_context
def why(ctx: Context, out: Output, request_id: str) -> None:
    """Why the search of REQUEST-ID|SERVER found nothing: when, who asked, the
    query, the verdict, and what would make it fit now. REQUEST-ID is the Placement
    request id, or the global request id Nova logged with "No valid host was
    found"; SERVER a server's name or uuid (deleted too), whose create, resize and
    move requests are found through its instance actions. Exit 127 when no failed
    search has that id (or the server none)."""
    found = records_of(ctx.client, request_id)
    missing = f"no failed search has the request id {visible(request_id)!r}"
    if not found and not request_id.startswith("req-"):
        try:
            actions = server_actions(ctx.compute, request_id)
        except ClientError as exc:  # no compute API to ask
            missing += f" (and no server could be looked up: {exc})"
            actions = []
        else:
            missing = f"no failed search among the {len(actions)} requests of server "
            missing += repr(visible(request_id))
        found = [
            {**record, "action": action["action"]}
            for action in actions
            for record in records_of(ctx.client, action["request_id"])
        ]
    if not found:
        click.echo(f"Error: {missing}", err=True)
        exits.leave(exits.BAD_INPUT)
    for record in found:
        hints = fit_hints(record.get("verdict") or {}, ctx.client, ctx.compute)
        record["hints"] = [dataclasses.asdict(h) for h in hints]
    if out.fmt in ("json", "yaml"):
        out.dump(found)
        return
    for i, record in enumerate(found):
        if i:
            click.echo("")
        explain(out, record)
        render_hints([Hint(**h) for h in record["hints"]])


def server_actions(compute: ComputeClient, server: str) -> list[dict[str, Any]]:
    """The instance actions of SERVER (uuid or exact name; a deleted one too),
    oldest first; click.BadParameter when no server has that name."""
    uuid = server if ProviderRef.UUID.match(server) else _server_named(compute, server)
    try:
        actions = compute.get(f"/servers/{uuid}/os-instance-actions")["instanceActions"]
    except ComputeError as exc:
        if exc.status != 404:
            raise
        raise click.BadParameter(f"no server {server!r}", param_hint="SERVER") from None
    return sorted(actions, key=lambda a: a.get("start_time") or "")


def _server_named(compute: ComputeClient, name: str) -> str:
    for deleted in (False, True):
        params = {"name": f"^{re.escape(name)}$", "all_tenants": "1"}
        if deleted:
            params["deleted"] = "true"
        servers = compute.get("/servers/detail", params)["servers"]
        if servers:
            return max(servers, key=lambda s: s.get("created") or "")["id"]
    raise click.BadParameter(f"no server {name!r}", param_hint="SERVER")


def explain(out: Output, record: Mapping[str, Any]) -> None:
    """One record for people: its facts, then its verdict's tables."""
    facts = {
        "when": record.get("created_at"),
        "action": record.get("action"),
        "request": record.get("request_id"),
        "global request": record.get("global_request_id"),
        "who": f"user {record.get('user_id') or '-'}, project {record.get('project_id') or '-'}",
        "microversion": record.get("microversion"),
        "query": urllib.parse.unquote(record.get("query") or ""),
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
